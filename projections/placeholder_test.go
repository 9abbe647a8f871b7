package projections

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/prunesched/prunesched/events"
)

func TestPlaceholder(t *testing.T) {
	hash := "sha256:ab12cd34ef567890ab12cd34ef567890ab12cd34ef567890ab12cd34ef567890"
	cases := []struct {
		name string
		spec PlaceholderSpec
		want string
	}{
		{
			name: "L0 output",
			spec: PlaceholderSpec{Session: "S", Item: "toolu_01", Part: "output", Tool: "Read",
				Args: json.RawMessage(`{"file_path":"src/a.go"}`), Rung: events.L0, Reason: events.ReasonDuplicateOutput,
				Tokens: 1234, Survivor: "toolu_02", Original: hash},
			want: `[prunesched: output of Read {"file_path":"src/a.go"} removed (L0 DUPLICATE_OUTPUT, 1234 tokens). Identical copy kept: toolu_02. Original: sha256:ab12cd34ef56 in the session log. Recover: prunesched item S toolu_01]`,
		},
		{
			name: "L1 with source",
			spec: PlaceholderSpec{Session: "S", Item: "c9", Part: "output", Tool: "WebFetch",
				Args: json.RawMessage(`{"url":"https://example.com/spec"}`), Rung: events.L1, Reason: events.ReasonSameSource,
				Tokens: 50, Survivor: "c12", Source: "https://example.com/spec@etag:1", Original: hash},
			want: `[prunesched: output of WebFetch {"url":"https://example.com/spec"} removed (L1 SAME_SOURCE_VERSION, 50 tokens). Same source version kept: c12. Source: https://example.com/spec@etag:1. Original: sha256:ab12cd34ef56 in the session log. Recover: prunesched item S c9]`,
		},
		{
			name: "L2 superseded",
			spec: PlaceholderSpec{Session: "S", Item: "c3", Part: "output", Tool: "Bash",
				Args: json.RawMessage(`{"command":"git status"}`), Rung: events.L2, Reason: events.ReasonSuperseded,
				Tokens: 7, Survivor: "c8", Original: hash},
			want: `[prunesched: output of Bash {"command":"git status"} removed (L2 SUPERSEDED, 7 tokens). Superseded by: c8. Original: sha256:ab12cd34ef56 in the session log. Recover: prunesched item S c3]`,
		},
		{
			name: "errored input with residue",
			spec: PlaceholderSpec{Session: "S", Item: "c4/input", Part: "input", Tool: "Write",
				Args: json.RawMessage(`{"file_path":"b.go","content":"` + strings.Repeat("x", 5000) + `"}`),
				Rung: events.L3, Reason: events.ReasonErroredInput, Tokens: 900, Original: "e17",
				Residue: &events.Residue{Tool: "Write", ErrorType: "invalid_parameter", ErrorMessage: `bad "path"`, Skeleton: `{"content":"<5000 bytes>","file_path":"b.go"}`}},
			want: `[prunesched: input of Write {"content":"<5000 bytes>","file_path":"b.go"} removed (L3 ERRORED_INPUT, 900 tokens). Residue: tool Write, error invalid_parameter "bad \"path\"", skeleton {"content":"<5000 bytes>","file_path":"b.go"}. Original: event e17 in the session log. Recover: prunesched item S c4/input]`,
		},
		{
			name: "manual prune of a message, no rung",
			spec: PlaceholderSpec{Session: "S", Item: "m7", Role: events.RoleUser, Reason: events.ReasonManualPrune, Tokens: 3, Original: "e3"},
			want: `[prunesched: user text removed (MANUAL_PRUNE, 3 tokens). Original: event e3 in the session log. Recover: prunesched item S m7]`,
		},
		{
			name: "no args, no tool",
			spec: PlaceholderSpec{Session: "S", Item: "c1", Part: "output", Rung: events.L0, Reason: events.ReasonDuplicateOutput, Tokens: 0},
			want: `[prunesched: output of - removed (L0 DUPLICATE_OUTPUT, 0 tokens). Recover: prunesched item S c1]`,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Placeholder(c.spec)
			if got != c.want {
				t.Fatalf("got  %s\nwant %s", got, c.want)
			}
			require_Equal(t, Placeholder(c.spec), got, "deterministic")
		})
	}
}

func TestArgsSummary(t *testing.T) {
	big := strings.Repeat("secret payload ", 1000)
	cases := []struct {
		name, in, want string
	}{
		{"sorted keys", `{"b":1,"a":"x"}`, `{"a":"x","b":1}`},
		{"long string sized", `{"content":"` + big + `"}`, `{"content":"<15000 bytes>"}`},
		{"multi-line sized", `{"cmd":"a\nb"}`, `{"cmd":"<3 bytes>"}`},
		{"nested sized", `{"o":{"x":1,"y":2},"l":[1,2,3],"n":null,"t":true}`, `{"l":"<array, 3 items>","n":null,"o":"<object, 2 keys>","t":true}`},
		{"html kept", `{"q":"a<b&c"}`, `{"q":"a<b&c"}`},
		{"not an object", `"hello"`, `"hello"`},
		{"invalid", `{`, `<1 bytes>`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require_Equal(t, ArgsSummary(json.RawMessage(c.in), ArgsSummaryBytes), c.want, "summary")
		})
	}

	// Many keys: cut on a member boundary, bounded, never copying bulk.
	var b strings.Builder
	b.WriteString("{")
	for i := 0; i < 40; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"key_` + string(rune('a'+i%26)) + strings.Repeat("k", i) + `":"value"`)
	}
	b.WriteString("}")
	got := ArgsSummary(json.RawMessage(b.String()), ArgsSummaryBytes)
	require_True(t, len(got) <= ArgsSummaryBytes+len(",…}"), "summary too long (%d): %s", len(got), got)
	require_True(t, strings.HasSuffix(got, ",…}"), "cut not marked: %s", got)
	require_True(t, !strings.Contains(ArgsSummary(json.RawMessage(`{"c":"`+big+`"}`), ArgsSummaryBytes), "secret"), "bulk copied")
}

func TestTruncUTF8(t *testing.T) {
	s := strings.Repeat("é", 100) // 200 bytes
	got := truncUTF8(s, 11)
	require_True(t, len(got) <= 11, "too long: %d", len(got))
	require_True(t, strings.HasSuffix(got, "…") && !strings.ContainsRune(got, '\uFFFD'), "bad cut %q", got)
	require_Equal(t, truncUTF8("short", 11), "short", "no cut")
}
