package eligibility

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prunesched/prunesched/events"
)

// recPolicy turns the recoverable policy on with a horizon of 5 model
// requests, a quiet stretch of 3 and a floor of 100 tokens, plus extra
// eligibility lines.
func recPolicy(extra string) string {
	return "eligibility:\n  recoverable: {enabled: true, horizon_requests: 5, quiet_requests: 3, min_tokens: 100}\n" + extra
}

// loaderOut is an output with distinctive terms (ParseConfig,
// config/loader.go, loader.go, 8788).
const loaderOut = "func ParseConfig(path string) in config/loader.go listens on 8788"

// mention has the user say text in n messages (n items holding its terms).
func mention(s *sess, n int, text string) {
	for i := range n {
		s.user(fmt.Sprintf("u%d", i), text)
	}
}

// usedAfter reads loaderOut, lets 3 model requests pass, has the agent use
// ParseConfig and lets 2 more pass: the output is 5 requests old and 2
// quiet when ParseConfig is watched, 5 when it is not.
func usedAfter(s *sess) string {
	id := s.tool("Read", read("config/loader.go"), loaderOut)
	s.reqs(3)
	s.assistant("m1", "ParseConfig is the culprit")
	s.reqs(2)
	return id
}

// TestColdRecoverable is the rule's table: cold against referenced,
// protected and too young.
func TestColdRecoverable(t *testing.T) {
	cases := []struct {
		name   string
		policy string
		run    func(s *sess) string // returns the item to check
		want   events.Decision      // "" for no decision
		reason events.Reason
	}{
		{"off by default", noRecent, func(s *sess) string {
			id := s.tool("Read", read("config/loader.go"), loaderOut)
			s.reqs(40)
			return id
		}, "", ""},
		{"cold: old and never used since", recPolicy(""), func(s *sess) string {
			id := s.tool("Read", read("config/loader.go"), loaderOut)
			s.reqs(5)
			return id
		}, events.Prune, events.ReasonColdRecoverable},
		{"too young", recPolicy(""), func(s *sess) string {
			id := s.tool("Read", read("config/loader.go"), loaderOut)
			s.reqs(4)
			return id
		}, "", ""},
		{"referenced by the agent's message: not yet quiet", recPolicy(""), func(s *sess) string {
			id := s.tool("Read", read("config/loader.go"), loaderOut)
			s.reqs(3)
			s.assistant("m1", "ParseConfig is the culprit")
			s.reqs(2) // 5 old, 2 quiet
			return id
		}, "", ""},
		{"referenced, then quiet again", recPolicy(""), func(s *sess) string {
			id := s.tool("Read", read("config/loader.go"), loaderOut)
			s.reqs(3)
			s.assistant("m1", "ParseConfig is the culprit")
			s.reqs(3) // 6 old, 3 quiet
			return id
		}, events.Prune, events.ReasonColdRecoverable},
		{"referenced by a tool input", recPolicy(""), func(s *sess) string {
			id := s.tool("Read", read("config/loader.go"), loaderOut)
			s.reqs(4)
			s.tool("Grep", map[string]any{"pattern": "8788"}, "main.go:3")
			s.reqs(2) // 6 old, 2 quiet
			return id
		}, "", ""},
		{"referenced in thinking", recPolicy(""), func(s *sess) string {
			id := s.tool("Read", read("config/loader.go"), loaderOut)
			s.reqs(4)
			s.feed(&events.Message{Item: "t1", Role: events.RoleAssistant, Kind: events.KindThinking, Text: "maybe loader.go"})
			s.reqs(2)
			return id
		}, "", ""},
		{"a user's mention is not the agent's use", recPolicy(""), func(s *sess) string {
			id := s.tool("Read", read("config/loader.go"), loaderOut)
			s.reqs(4)
			s.user("u1", "look at ParseConfig again")
			s.reqs(1)
			return id
		}, events.Prune, events.ReasonColdRecoverable},
		{"a plain word is no reference", recPolicy(""), func(s *sess) string {
			id := s.tool("Read", read("config/loader.go"), loaderOut)
			s.reqs(4)
			s.assistant("m1", "the config path string listens")
			s.reqs(1)
			return id
		}, events.Prune, events.ReasonColdRecoverable},
		{"no distinctive term: nothing shows it went cold", recPolicy(""), func(s *sess) string {
			id := s.tool("Bash", bash("fortune"), "the quick brown fox jumps over the lazy dog")
			s.reqs(20)
			return id
		}, "", ""},
		{"under min_tokens", "eligibility:\n  recoverable: {enabled: true, horizon_requests: 5, quiet_requests: 3, min_tokens: 1000}\n", func(s *sess) string {
			id := s.tool("Read", read("config/loader.go"), loaderOut)
			s.reqs(20)
			return id
		}, "", ""},
		{"a failed call's output", recPolicy(""), func(s *sess) string {
			id := s.fail("Bash", bash("go build ./config"), body("config/loader.go:3: undefined: ParseConfig", 300))
			s.tool("Bash", bash("go build ./config"), "ok")
			s.reqs(20)
			return id
		}, "", ""},
		{"pinned", recPolicy(""), func(s *sess) string {
			id := s.tool("Read", read("config/loader.go"), loaderOut)
			s.feed(&events.Pin{Item: id, By: "ana"})
			s.reqs(5)
			return id
		}, events.Keep, events.ReasonPinned},
		{"recent turns", recPolicy("  protect_recent_turns: 8\n"), func(s *sess) string {
			id := s.tool("Read", read("config/loader.go"), loaderOut)
			s.reqs(7)
			return id
		}, events.Keep, events.ReasonRecentTurn},
		{"recent turns over, then cold", recPolicy("  protect_recent_turns: 8\n"), func(s *sess) string {
			id := s.tool("Read", read("config/loader.go"), loaderOut)
			s.reqs(8)
			return id
		}, events.Prune, events.ReasonColdRecoverable},
		{"project rules", recPolicy(""), func(s *sess) string {
			id := s.tool("Read", read("/repo/CLAUDE.md"), "Run make lint_all before every commit")
			s.reqs(5)
			return id
		}, events.Keep, events.ReasonProjectRule},
		{"protected tool", recPolicy("  protected_tools: [grep]\n"), func(s *sess) string {
			id := s.tool("Grep", map[string]any{"pattern": "x"}, loaderOut)
			s.reqs(5)
			return id
		}, events.Keep, events.ReasonProtectedTool},
		{"protected file", recPolicy("  protected_files: ['*.sql']\n"), func(s *sess) string {
			id := s.tool("Read", read("db/schema.sql"), "CREATE TABLE user_accounts")
			s.reqs(5)
			return id
		}, events.Keep, events.ReasonProtectedFile},
		{"active plan", recPolicy(""), func(s *sess) string {
			id := s.tool("TodoWrite", map[string]any{"todos": []string{"fix ParseConfig"}}, "Todos updated: ParseConfig_fix")
			s.reqs(5)
			return id
		}, events.Keep, events.ReasonActivePlan},
		{"the surviving copy of a pruned duplicate: unique evidence", recPolicy(""), func(s *sess) string {
			id := s.tool("Read", read("config/loader.go"), loaderOut)
			s.tool("Read", read("config/loader.go"), loaderOut)
			s.reqs(5)
			return id
		}, events.Keep, events.ReasonUniqueEvidence},
		{"the duplicate's own proof wins", recPolicy(""), func(s *sess) string {
			s.tool("Read", read("config/loader.go"), loaderOut)
			id := s.tool("Read", read("config/loader.go"), loaderOut)
			s.reqs(5)
			return id
		}, events.Prune, events.ReasonDuplicateOutput},
		{"a prune stands after a later use (a recovery)", recPolicy(""), func(s *sess) string {
			id := s.tool("Read", read("config/loader.go"), loaderOut)
			s.reqs(5)
			s.assistant("m1", "back to ParseConfig")
			s.reqs(3)
			return id
		}, events.Prune, events.ReasonColdRecoverable},
		{"restored by a person: no prune again", recPolicy(""), func(s *sess) string {
			id := s.tool("Read", read("config/loader.go"), loaderOut)
			s.reqs(5)
			s.feed(&events.Restore{Item: id, By: "ana"})
			s.reqs(20)
			return id
		}, events.Keep, events.ReasonRestored},
		{"a term in common_term_items other items is not watched", recPolicy(""), func(s *sess) string {
			mention(s, 4, "is ParseConfig slow?")
			return usedAfter(s) // 5 old, 5 quiet: ParseConfig is everywhere
		}, events.Prune, events.ReasonColdRecoverable},
		{"failed outputs count among the items", recPolicy(""), func(s *sess) string {
			for range 4 {
				s.fail("Bash", bash("go vet ./config"), "vet: ParseConfig: unused result")
			}
			return usedAfter(s)
		}, events.Prune, events.ReasonColdRecoverable},
		{"a term in fewer other items still is", recPolicy(""), func(s *sess) string {
			mention(s, 3, "is ParseConfig slow?")
			return usedAfter(s) // 5 old, 2 quiet
		}, "", ""},
		{"common_term_items set lower", "eligibility:\n  recoverable: {enabled: true, horizon_requests: 5, quiet_requests: 3, min_tokens: 100, common_term_items: 2}\n", func(s *sess) string {
			mention(s, 2, "is ParseConfig slow?")
			return usedAfter(s)
		}, events.Prune, events.ReasonColdRecoverable},
		{"every term common: nothing to watch, never cold", recPolicy(""), func(s *sess) string {
			mention(s, 4, loaderOut)
			id := s.tool("Read", read("config/loader.go"), loaderOut)
			s.reqs(20)
			return id
		}, "", ""},
		{"a host compaction forgets the items that left", recPolicy(""), func(s *sess) string {
			mention(s, 4, "is ParseConfig slow?")
			s.feed(&events.HostCompaction{Host: "claude-code"})
			return usedAfter(s)
		}, "", ""},
		{"after host compaction: gone", recPolicy(""), func(s *sess) string {
			id := s.tool("Read", read("config/loader.go"), loaderOut)
			s.feed(&events.HostCompaction{Host: "claude-code"})
			s.reqs(20)
			return id
		}, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSess(t, tc.policy)
			item := tc.run(s)
			if tc.want == "" {
				s.wantNone(item)
				return
			}
			m := s.want(item, tc.want, tc.reason)
			if tc.reason == events.ReasonColdRecoverable && m.Rung != events.L4 {
				t.Fatalf("rung %s, want L4", m.Rung)
			}
		})
	}
}

// TestColdRecoverableCertificate: the certificate names the rule, its age
// and quiet stretch, and the recovery path; the placeholder says how to
// recover the item.
func TestColdRecoverableCertificate(t *testing.T) {
	s := newSess(t, recPolicy(""))
	s.user("u1", "fix the port")
	id := s.tool("Read", read("config/loader.go"), loaderOut)
	s.reqs(2)
	s.assistant("m1", "ParseConfig reads 8788")
	s.reqs(2)
	s.wantNone(id) // 4 old, 2 quiet
	s.req()        // 5 old, 3 quiet
	m := s.want(id, events.Prune, events.ReasonColdRecoverable)
	kinds := map[string]events.Evidence{}
	for _, e := range m.Evidence {
		kinds[e.Kind] = e
	}
	if kinds["age"].Value != "5" || kinds["quiet"].Value != "3" || !strings.Contains(kinds["quiet"].Detail, "last used by the agent at model request 2") {
		t.Errorf("age/quiet evidence: %+v", m.Evidence)
	}
	rec := kinds["recovery"]
	if rec.Value != "context_recover #2" || !strings.Contains(rec.Detail, "recoverable, not proven redundant") {
		t.Errorf("recovery evidence: %+v", rec)
	}
	if r := m.Recoverability; r == nil || r.Log == "" || r.Source != "" || r.Blob == "" {
		t.Errorf("recoverability: %+v", r)
	}
	if m.TokensEstimated <= 0 || m.By != By || len(m.Protection) != 0 {
		t.Errorf("tokens %d by %q protection %v", m.TokensEstimated, m.By, m.Protection)
	}
}

// TestColdRecoverableDeterministic: replaying the same facts gives the
// same marks, byte for byte.
func TestColdRecoverableDeterministic(t *testing.T) {
	build := func() *sess {
		s := newSess(t, recPolicy(""))
		for i := range 6 {
			s.tool("Read", read("pkg/f"+itoa(i)+".go"), "func Handler"+itoa(i)+"() in pkg/f"+itoa(i)+".go")
			s.req()
			if i%2 == 0 {
				s.assistant("m"+itoa(i), "Handler"+itoa(i/2)+" next")
			}
		}
		s.reqs(10)
		return s
	}
	a, b := build(), build()
	sameMarks(t, "replay", a.marks, b.marks)
	n := 0
	for _, e := range a.marks {
		if m := e.Data.(*events.Mark); m.Reason == events.ReasonColdRecoverable {
			n++
		}
	}
	if n != 6 {
		t.Errorf("%d cold removals, want 6", n)
	}
}
