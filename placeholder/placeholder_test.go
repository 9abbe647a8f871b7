package placeholder

import (
	"strings"
	"testing"

	"github.com/prunesched/prunesched/events"
)

func TestRender(t *testing.T) {
	for _, c := range []struct {
		name string
		spec Spec
		want string
	}{
		{"L0 output", Spec{Item: "#12", Part: PartOutput, Tool: "Read", Source: "src/a.go", Rung: events.L0, Reason: events.ReasonDuplicateOutput, Tokens: 1234, Survivor: "#3"},
			`[prunesched: output of Read src/a.go removed: L0 DUPLICATE_OUTPUT, 1234 tokens, copy #3, context_recover #12]`},
		{"L1 url", Spec{Item: "#9", Part: PartOutput, Tool: "WebFetch", Source: "https://example.com/spec", Rung: events.L1, Reason: events.ReasonSameSource, Tokens: 50, Survivor: "#12"},
			`[prunesched: output of WebFetch https://example.com/spec removed: L1 SAME_SOURCE_VERSION, 50 tokens, copy #12, context_recover #9]`},
		{"L2 survivor removed too", Spec{Item: "#3", Part: PartOutput, Tool: "Bash", Source: `"git status"`, Rung: events.L2, Reason: events.ReasonSuperseded, Tokens: 7, Survivor: "#8", SurvivorRemoved: "L0 DUPLICATE_OUTPUT", SurvivorNext: "#20"},
			`[prunesched: output of Bash "git status" removed: L2 SUPERSEDED, 7 tokens, newer #8 (since removed: L0 DUPLICATE_OUTPUT, see #20), context_recover #3]`},
		{"errored output with residue", Spec{Item: "#4", Part: PartOutput, Tool: "Write", Source: "b.go", Reason: events.ReasonErroredInput, Tokens: 900,
			Residue: &events.Residue{Tool: "Write", ErrorType: "invalid_parameter", ErrorMessage: `bad "path"`, Skeleton: `{"file_path":"b.go"}`}},
			`[prunesched: output of Write b.go removed: ERRORED_INPUT, 900 tokens, residue: tool Write, error invalid_parameter "bad \"path\"", skeleton {"file_path":"b.go"}, context_recover #4]`},
		{"manual prune of a message", Spec{Item: "#7", Role: events.RoleUser, Reason: events.ReasonManualPrune, Tokens: 3},
			`[prunesched: user text removed: MANUAL_PRUNE, 3 tokens, context_recover #7]`},
		{"no tool, no source", Spec{Item: "#1", Part: PartOutput, Rung: events.L0, Reason: events.ReasonDuplicateOutput},
			`[prunesched: output of - removed: L0 DUPLICATE_OUTPUT, 0 tokens, context_recover #1]`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Render(c.spec); got != c.want {
				t.Fatalf("got  %s\nwant %s", got, c.want)
			}
		})
	}
}

func TestSource(t *testing.T) {
	long := "/home/u/repo/" + strings.Repeat("deep/", 20) + "file_name.go"
	for _, c := range []struct{ name, args, cwd, want string }{
		{"relative to cwd", `{"file_path":"/home/u/repo/cmd/a.go","limit":20}`, "/home/u/repo", "cmd/a.go"},
		{"outside cwd kept", `{"file_path":"/etc/hosts"}`, "/home/u/repo", "/etc/hosts"},
		{"opencode filePath", `{"filePath":"/w/x/y.ts"}`, "/w/", "x/y.ts"},
		{"url", `{"url":"https://example.com/a","prompt":"p"}`, "", "https://example.com/a"},
		{"command quoted", `{"command":"go test ./...","description":"run"}`, "", `"go test ./..."`},
		{"long command cut", `{"command":"` + strings.Repeat("a", 60) + `"}`, "", `"` + strings.Repeat("a", 37) + `…"`},
		{"multi-line command: first line", `{"command":"cd x\nmake"}`, "", `"cd x…"`},
		{"no args", `{}`, "", ""},
		{"invalid", `{`, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Source([]byte(c.args), c.cwd); got != c.want {
				t.Fatalf("got %q want %q", got, c.want)
			}
		})
	}
	got := Source([]byte(`{"file_path":"`+long+`"}`), "/home/u/repo")
	if len(got) > SourceBytes || !strings.HasSuffix(got, "deep/file_name.go") || !strings.HasPrefix(got, "deep/deep/") || !strings.Contains(got, "…") || strings.Contains(got, "bytes>") {
		t.Fatalf("long path: %q (%d bytes): want elided in the middle, at most %d bytes", got, len(got), SourceBytes)
	}
	short := strings.Repeat("d/", 39) + "f.go" // 82 bytes: elided; 80 is kept whole
	if got := Elide(short[:80], SourceBytes); got != short[:80] {
		t.Fatalf("80 bytes elided: %q", got)
	}
}

func TestHandle(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		isOK bool
	}{{"#0", 0, true}, {"#142", 142, true}, {"#", 0, false}, {"142", 0, false}, {"#-1", 0, false}, {"#01", 0, false}, {"#a", 0, false}} {
		n, ok := ParseHandle(c.in)
		if n != c.n || ok != c.isOK {
			t.Errorf("ParseHandle(%q) = %d, %v", c.in, n, ok)
		}
	}
	if Handle(142) != "#142" {
		t.Fatal(Handle(142))
	}
}

func TestNetAndSaves(t *testing.T) {
	p := Spec{Item: "#12", Part: PartOutput, Tool: "Read", Source: "src/a.go", Rung: events.L0, Reason: events.ReasonDuplicateOutput, Survivor: "#3"}
	q := p
	q.Tokens = 400
	ph := Tokens(q)
	if ph <= 0 || ph > 40 {
		t.Fatalf("placeholder of a short path: %d tokens", ph)
	}
	if got := Net(p, 400); got != 400-ph {
		t.Fatalf("Net = %d, want %d", got, 400-ph)
	}
	if Net(p, 5) != 0 || Saves(p, 5) {
		t.Fatal("a 5-token item cannot net a saving")
	}
	if !Saves(p, 400) {
		t.Fatal("400 tokens should net a saving")
	}
}

// TestCountIsExact: counting word by word gives the tokenizer's count of
// the whole text, on placeholders and on awkward text.
func TestCountIsExact(t *testing.T) {
	texts := []string{
		"",
		" ",
		"a",
		"[prunesched: output of Read cmd/entire/cli/strategy/manual_commit_hooks.go removed: L2 SUPERSEDED, 141 tokens, newer #526, context_recover #502]",
		`[prunesched: output of Bash "sed -n '800,850p' cmd/entire/cli/chec…" removed: L2 SUPERSEDED, 405 tokens, newer #168, context_recover #165]`,
		"two  spaces,   three and\ttab\nnewline \n x",
		"héllo wörld ✓ — unicode… paths/with spaces /and ' quotes's",
		"1234567 12 #1 #12345 ,,, ...  ",
		"trailing space ",
		"nbsp\u00a0 b \u00a0c  \u3000 d",
	}
	for _, s := range texts {
		if got, want := Count(s), counter.Count(s); got != want {
			t.Errorf("Count(%q) = %d, tokenizer says %d", s, got, want)
		}
	}
}

// TestNamesRecovery: a placeholder names the recovery of its own item and
// of no other; the old ", recover #N]" form and a span line do not count.
func TestNamesRecovery(t *testing.T) {
	own := Render(Spec{Part: PartOutput, Tool: "Read", Source: "a.go", Rung: events.L0, Reason: events.ReasonDuplicateOutput, Tokens: 900, Item: Handle(7)})
	for _, c := range []struct {
		name  string
		text  string
		index int
		want  bool
	}{
		{"own handle", own, 7, true},
		{"another item", own, 17, false},
		{"prefix of a longer handle", own, 0, false},
		{"old form", "[prunesched: output of Read a.go, L0 DUPLICATE_OUTPUT, 900 tokens, recover #7]", 7, false},
		{"no handle", Render(Spec{Part: PartOutput, Tool: "Read", Tokens: 900}), 7, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := NamesRecovery(c.text, c.index); got != c.want {
				t.Fatalf("NamesRecovery(%q, %d) = %v, want %v", c.text, c.index, got, c.want)
			}
		})
	}
}

// TestSizerMatchesShared: a Sizer sizes every placeholder as Tokens, Net
// and FitsUnder do, warm or cold, past its cache's bound, and keeps no
// handle or number.
func TestSizerMatchesShared(t *testing.T) {
	var z Sizer
	reasons := []events.Reason{events.ReasonDuplicateOutput, events.ReasonSameSource, events.ReasonSuperseded, events.ReasonErroredInput, events.ReasonManualPrune}
	rungs := []events.Rung{events.L0, events.L1, events.L2, events.RungNone}
	res := &events.Residue{Tool: "Write", ErrorType: "invalid_parameter", ErrorMessage: `bad "path" <x> & y`, Skeleton: `{"file_path":"b.go"}`}
	for i := 0; i < 3000; i++ {
		p := Spec{Item: Handle(i), Part: []string{PartOutput, PartInput, ""}[i%3], Role: events.RoleUser,
			Tool: []string{"Read", "Bash", "Grep", "mcp__x__y" + Handle(i%300)}[i%4], Source: "src/dir" + Handle(i%500) + "/a b.go",
			Rung: rungs[i%len(rungs)], Reason: reasons[i%len(reasons)]}
		if i%5 == 0 {
			p.Survivor = Handle(i / 2)
		}
		if i%7 == 0 {
			p.Residue = res
		}
		payload := i % 97 * 13
		q := p
		q.Tokens = payload
		if got, want := z.Tokens(q), Tokens(q); got != want {
			t.Fatalf("%d: Sizer.Tokens %d, Tokens %d (%s)", i, got, want, Render(q))
		}
		if got, want := z.Net(p, payload), Net(p, payload); got != want {
			t.Fatalf("%d: Sizer.Net %d, Net %d", i, got, want)
		}
		if got, want := z.FitsUnder(q, payload), FitsUnder(q, payload); got != want {
			t.Fatalf("%d: Sizer.FitsUnder %v, FitsUnder %v", i, got, want)
		}
	}
	if len(z.pieces) == 0 || len(z.pieces) > sizerPieces {
		t.Fatalf("the cache holds %d pieces, want 1 to %d", len(z.pieces), sizerPieces)
	}
	for k := range z.pieces {
		if unique(k) {
			t.Fatalf("a handle or number in the cache: %q", k)
		}
	}
}

// TestSizerCountIsExact: a Sizer's count of a placeholder, through its
// cached heads and the handles' tails, is the tokenizer's count of the
// whole text, cold and warm, for handles below and past maxTails and for
// tail-like pieces that are not handles.
func TestSizerCountIsExact(t *testing.T) {
	var z Sizer
	items := []string{"#0", "#7", "#10", "#999", "#1000", "#65535", "#65536", "#123456", "#007", "#1a", "x]"}
	for i := 0; i < 300; i++ {
		items = append(items, Handle(i*211))
	}
	for pass := 0; pass < 2; pass++ {
		for i, h := range items {
			p := Spec{Item: h, Part: PartOutput, Tool: "Read", Source: "f" + Handle(i%50) + ".go",
				Rung: events.L0, Reason: events.ReasonDuplicateOutput, Tokens: 400 + i%3, Survivor: Handle(i % 7)}
			if got, want := z.Tokens(p), counter.Count(Render(p)); got != want {
				t.Fatalf("pass %d: Sizer.Tokens(%q) = %d, tokenizer says %d", pass, Render(p), got, want)
			}
		}
	}
	if len(z.heads) == 0 || len(z.heads) > sizerHeads {
		t.Fatalf("the heads cache holds %d, want 1 to %d", len(z.heads), sizerHeads)
	}
	for _, s := range []string{" #0]", " #65535]", " #999]"} {
		if i, ok := tailIndex(s); !ok || tails[i].Load() == 0 {
			t.Fatalf("tail %q not counted in tails", s)
		}
	}
	for _, s := range []string{" #65536]", " #007]", " #]", " #1a]", "#12]", " #12,", " #12]x"} {
		if _, ok := tailIndex(s); ok {
			t.Fatalf("tailIndex(%q) took a piece that is not a handle's tail", s)
		}
	}
}
