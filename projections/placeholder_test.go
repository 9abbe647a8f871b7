package projections

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/prunesched/prunesched/internal/testutil"
)

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
			testutil.Equal(t, ArgsSummary(json.RawMessage(c.in), ArgsSummaryBytes), c.want, "summary")
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
	testutil.True(t, len(got) <= ArgsSummaryBytes+len(",…}"), "summary too long (%d): %s", len(got), got)
	testutil.True(t, strings.HasSuffix(got, ",…}"), "cut not marked: %s", got)
	testutil.True(t, !strings.Contains(ArgsSummary(json.RawMessage(`{"c":"`+big+`"}`), ArgsSummaryBytes), "secret"), "bulk copied")
}

func TestTruncUTF8(t *testing.T) {
	s := strings.Repeat("é", 100) // 200 bytes
	got := truncUTF8(s, 11)
	testutil.True(t, len(got) <= 11, "too long: %d", len(got))
	testutil.True(t, strings.HasSuffix(got, "…") && !strings.ContainsRune(got, '\uFFFD'), "bad cut %q", got)
	testutil.Equal(t, truncUTF8("short", 11), "short", "no cut")
}
