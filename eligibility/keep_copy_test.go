package eligibility

import (
	"testing"

	"github.com/prunesched/prunesched/events"
)

// lastCopy is noRecent with the old survivor rule: the newest copy stays.
const lastCopy = noRecent + "  keep_copy: last\n"

// partial is a read of a.go lines 10 to 19.
func partial(p string) map[string]any {
	return map[string]any{"file_path": p, "offset": 10, "limit": 10}
}

// versioned is a read result whose source declares version v.
func versioned(tag, v string) *events.ToolResult {
	return &events.ToolResult{Output: strPtr(body(tag, 400)), Source: &events.SourceIdentity{Kind: "file", Path: "a.go", Version: v}}
}

// TestKeepCachedCopy is the keep_copy rule (the default "first": the
// earliest copy still in context stays, the newcomer goes) for L0 and L1,
// its fallback to the newest copy, and recent-turn protection.
func TestKeepCachedCopy(t *testing.T) {
	cases := []struct {
		name   string
		policy string
		run    func(s *sess)
		wants  []want
		// survivor maps a pruned item to the survivor its certificate names.
		survivor map[string]string
		// keep is the keep_copy evidence value wanted on each pruned item.
		keep map[string]string
	}{
		{"L0: the newcomer goes inside the recent turns", "", func(s *sess) {
			s.tool("Read", read("a.go"), "A")
			s.reqs(3)
			s.tool("Read", read("a.go"), "A")
		}, []want{{"c1", events.Keep, events.ReasonSurvivingCopy}, {"c2", events.Prune, events.ReasonDuplicateOutput}},
			map[string]string{"c2": "c1"}, map[string]string{"c2": "first"}},
		{"L0: every newcomer points at the earliest copy", "", func(s *sess) {
			s.tool("Read", read("a.go"), "A")
			s.req()
			s.tool("Read", read("a.go"), "A")
			s.req()
			s.tool("Read", read("a.go"), "A")
		}, []want{{"c1", events.Keep, events.ReasonSurvivingCopy}, {"c2", events.Prune, events.ReasonDuplicateOutput}, {"c3", events.Prune, events.ReasonDuplicateOutput}},
			map[string]string{"c2": "c1", "c3": "c1"}, nil},
		{"L0: keep_copy last keeps the newest and waits for the recent turns", "eligibility:\n  keep_copy: last\n", func(s *sess) {
			s.tool("Read", read("a.go"), "A")
			s.tool("Read", read("a.go"), "A")
		}, []want{{"c1", events.Keep, events.ReasonRecentTurn}, {"c2", "", ""}}, nil, nil},
		{"L0: keep_copy last after the recent turns", lastCopy, func(s *sess) {
			s.tool("Read", read("a.go"), "A")
			s.tool("Read", read("a.go"), "A")
		}, []want{{"c1", events.Prune, events.ReasonDuplicateOutput}, {"c2", events.Keep, events.ReasonSurvivingCopy}},
			map[string]string{"c1": "c2"}, map[string]string{"c1": "last"}},
		{"L0: the earliest copy is pruned, so the newest stays", noRecent, func(s *sess) {
			s.tool("Read", partial("a.go"), "X")
			s.tool("Read", read("a.go"), "A") // covers c1: c1 superseded (L2)
			s.tool("Read", partial("a.go"), "X")
		}, []want{{"c1", events.Prune, events.ReasonDuplicateOutput}, {"c2", events.Keep, events.ReasonUnique}, {"c3", events.Keep, events.ReasonSurvivingCopy}},
			map[string]string{"c1": "c3"}, map[string]string{"c1": "last (fallback)"}},
		{"L0: after the fallback the newest copy starts the run", noRecent, func(s *sess) {
			s.tool("Read", partial("a.go"), "X")
			s.tool("Read", read("a.go"), "A")
			s.tool("Read", partial("a.go"), "X")
			s.tool("Read", partial("a.go"), "X")
		}, []want{{"c3", events.Keep, events.ReasonSurvivingCopy}, {"c4", events.Prune, events.ReasonDuplicateOutput}},
			map[string]string{"c4": "c3"}, map[string]string{"c4": "first"}},
		{"L0: a host-pruned earlier copy is not a survivor", "", func(s *sess) {
			s.toolR("Read", read("a.go"), &events.ToolResult{Output: strPtr(body("A", 400)), HostPruned: true})
			s.tool("Read", read("a.go"), "A")
		}, []want{{"c1", "", ""}, {"c2", "", ""}}, nil, nil},
		{"L0: a compacted earlier copy is not a survivor", "", func(s *sess) {
			s.tool("Read", read("a.go"), "A")
			s.feed(&events.HostCompaction{Host: "claude-code"})
			s.tool("Read", read("a.go"), "A")
		}, []want{{"c2", "", ""}}, nil, nil},
		{"L0: state tools still need no change between", "", func(s *sess) {
			s.tool("Bash", bash("git status"), "clean")
			s.tool("Edit", edit("b.go"), "ok")
			s.tool("Bash", bash("git status"), "clean")
		}, []want{{"c1", events.Abstain, events.ReasonStateChanged}, {"c3", "", ""}}, nil, nil},
		{"L1: the newcomer goes, the earliest version stays", "", func(s *sess) {
			s.toolR("Read", read("a.go"), versioned("A", "v1"))
			s.toolR("Read", read("a.go"), versioned("A with a reminder", "v1"))
		}, []want{{"c1", events.Keep, events.ReasonSurvivingCopy}, {"c2", events.Prune, events.ReasonSameSource}},
			map[string]string{"c2": "c1"}, map[string]string{"c2": "first"}},
		{"L1: a run of three keeps the first", "", func(s *sess) {
			s.toolR("Read", read("a.go"), versioned("A", "v1"))
			s.toolR("Read", read("a.go"), versioned("A1", "v1"))
			s.toolR("Read", read("a.go"), versioned("A2", "v1"))
		}, []want{{"c1", events.Keep, events.ReasonSurvivingCopy}, {"c2", events.Prune, events.ReasonSameSource}, {"c3", events.Prune, events.ReasonSameSource}},
			map[string]string{"c2": "c1", "c3": "c1"}, nil},
		{"L1: keep_copy last keeps the newest", lastCopy, func(s *sess) {
			s.toolR("Read", read("a.go"), versioned("A", "v1"))
			s.toolR("Read", read("a.go"), versioned("A with a reminder", "v1"))
		}, []want{{"c1", events.Prune, events.ReasonSameSource}, {"c2", events.Keep, events.ReasonSurvivingCopy}},
			map[string]string{"c1": "c2"}, map[string]string{"c1": "last"}},
		{"L1: the earliest version is pruned, so the newest stays", noRecent, func(s *sess) {
			s.toolR("Read", read("a.go"), versioned("A", "v1"))
			s.feed(&events.PruneRequest{Item: "c1", By: "alice"})
			s.toolR("Read", read("a.go"), versioned("A with a reminder", "v1"))
		}, []want{{"c1", events.Prune, events.ReasonManualPrune}, {"c2", "", ""}}, nil, nil},
		{"L1: a version change starts a new run", noRecent, func(s *sess) {
			s.toolR("Read", read("a.go"), versioned("A", "v1"))
			s.toolR("Read", read("a.go"), versioned("B", "v2"))
			s.toolR("Read", read("a.go"), versioned("B with a reminder", "v2"))
		}, []want{{"c2", events.Keep, events.ReasonSurvivingCopy}, {"c3", events.Prune, events.ReasonSameSource}},
			map[string]string{"c3": "c2"}, nil},
		{"L2 victims stay under recent-turn protection", "", func(s *sess) {
			s.tool("Read", partial("a.go"), "X")
			s.tool("Read", read("a.go"), "A")
		}, []want{{"c1", events.Keep, events.ReasonRecentTurn}}, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSess(t, tc.policy)
			tc.run(s)
			check(t, s, tc.wants)
			for it, surv := range tc.survivor {
				m := s.decision(it)
				if m.Recoverability == nil || m.Recoverability.Survivor != surv {
					t.Errorf("%s: survivor %+v, want %s", it, m.Recoverability, surv)
				}
			}
			for it, v := range tc.keep {
				got := ""
				for _, e := range s.decision(it).Evidence {
					if e.Kind == "keep_copy" {
						got = e.Value
					}
				}
				if got != v {
					t.Errorf("%s: keep_copy evidence %q, want %q (%+v)", it, got, v, s.decision(it).Evidence)
				}
			}
		})
	}
}
