package policy

import (
	"fmt"
	"strings"
	"testing"
)

func TestEligibilityDefaults(t *testing.T) {
	p := Default()
	e := p.Eligibility
	if e.KeepCopy != "first" {
		t.Errorf("keep_copy = %q, want first", e.KeepCopy)
	}
	if e.RecentTurns() != 2 || e.ErrorHorizon() != 4 || e.ErroredMinTokens() != 200 {
		t.Errorf("defaults: recent %d horizon %d min %d", e.RecentTurns(), e.ErrorHorizon(), e.ErroredMinTokens())
	}
	if e.L4 || e.L4MinAgeRequests != 10 || e.MinPruneTokens != 0 {
		t.Errorf("l4 defaults: %v %d %d", e.L4, e.L4MinAgeRequests, e.MinPruneTokens)
	}
	if len(e.ProjectRuleFiles) == 0 || e.ProjectRuleFiles[0] != "CLAUDE.md" {
		t.Errorf("project_rule_files default = %v", e.ProjectRuleFiles)
	}
}

func TestEligibilityParse(t *testing.T) {
	cases := []struct {
		name  string
		yaml  string
		check func(t *testing.T, e Eligibility)
	}{
		{"keep_copy last", "eligibility:\n  keep_copy: last\n", func(t *testing.T, e Eligibility) {
			if e.KeepCopy != "last" {
				t.Errorf("got %q", e.KeepCopy)
			}
		}},
		{"tools", "eligibility:\n  tools:\n    mcp__db__query: state\n    Read: pure\n", func(t *testing.T, e Eligibility) {
			if e.Tools["mcp__db__query"] != "state" || e.Tools["Read"] != "pure" {
				t.Errorf("got %v", e.Tools)
			}
		}},
		{"protected_tools", "eligibility:\n  protected_tools: [Task, skill]\n", func(t *testing.T, e Eligibility) {
			if len(e.ProtectedTools) != 2 || e.ProtectedTools[1] != "skill" {
				t.Errorf("got %v", e.ProtectedTools)
			}
		}},
		{"protected_files", "eligibility:\n  protected_files: ['*.sql', 'migrations/*']\n", func(t *testing.T, e Eligibility) {
			if len(e.ProtectedFiles) != 2 {
				t.Errorf("got %v", e.ProtectedFiles)
			}
		}},
		{"project_rule_files", "eligibility:\n  project_rule_files: [RULES.md]\n", func(t *testing.T, e Eligibility) {
			if len(e.ProjectRuleFiles) != 1 || e.ProjectRuleFiles[0] != "RULES.md" {
				t.Errorf("got %v", e.ProjectRuleFiles)
			}
		}},
		{"project_rule_files empty", "eligibility:\n  project_rule_files: []\n", func(t *testing.T, e Eligibility) {
			if len(e.ProjectRuleFiles) != 0 {
				t.Errorf("got %v", e.ProjectRuleFiles)
			}
		}},
		{"protect_recent_turns zero kept", "eligibility:\n  protect_recent_turns: 0\n", func(t *testing.T, e Eligibility) {
			if e.RecentTurns() != 0 {
				t.Errorf("got %d", e.RecentTurns())
			}
		}},
		{"protect_recent_turns", "eligibility:\n  protect_recent_turns: 5\n", func(t *testing.T, e Eligibility) {
			if e.RecentTurns() != 5 {
				t.Errorf("got %d", e.RecentTurns())
			}
		}},
		{"error_horizon_requests", "eligibility:\n  error_horizon_requests: 7\n", func(t *testing.T, e Eligibility) {
			if e.ErrorHorizon() != 7 {
				t.Errorf("got %d", e.ErrorHorizon())
			}
		}},
		{"errored_input_min_tokens", "eligibility:\n  errored_input_min_tokens: 50\n", func(t *testing.T, e Eligibility) {
			if e.ErroredMinTokens() != 50 {
				t.Errorf("got %d", e.ErroredMinTokens())
			}
		}},
		{"min_prune_tokens", "eligibility:\n  min_prune_tokens: 100\n", func(t *testing.T, e Eligibility) {
			if e.MinPruneTokens != 100 {
				t.Errorf("got %d", e.MinPruneTokens)
			}
		}},
		{"recoverable defaults", "eligibility:\n  recoverable: {enabled: true}\n", func(t *testing.T, e Eligibility) {
			r, on := e.RecoverableOn()
			want := Recoverable{Enabled: true, HorizonRequests: DefaultRecoverableHorizonRequests,
				QuietRequests: DefaultRecoverableQuietRequests, MinTokens: DefaultRecoverableMinTokens, CommonTermItems: DefaultRecoverableCommonTermItems}
			if !on || r != want || *e.Recoverable != want {
				t.Errorf("got %+v %v (field %+v)", r, on, e.Recoverable)
			}
		}},
		{"recoverable set", "eligibility:\n  recoverable:\n    enabled: true\n    horizon_requests: 7\n    quiet_requests: 3\n    min_tokens: 100\n    common_term_items: 2\n", func(t *testing.T, e Eligibility) {
			if r, on := e.RecoverableOn(); !on || r != (Recoverable{Enabled: true, HorizonRequests: 7, QuietRequests: 3, MinTokens: 100, CommonTermItems: 2}) {
				t.Errorf("got %+v %v", r, on)
			}
		}},
		{"recoverable off", "eligibility:\n  recoverable: {enabled: false}\n", func(t *testing.T, e Eligibility) {
			if _, on := e.RecoverableOn(); on || e.Recoverable != nil {
				t.Errorf("got %+v %v", e.Recoverable, on)
			}
		}},
		{"recoverable off with fields", "eligibility:\n  recoverable: {horizon_requests: 9}\n", func(t *testing.T, e Eligibility) {
			if _, on := e.RecoverableOn(); on {
				t.Errorf("on without enabled: %+v", e.Recoverable)
			}
		}},
		{"l4", "eligibility:\n  l4: true\n  l4_min_age_requests: 3\n", func(t *testing.T, e Eligibility) {
			if !e.L4 || e.L4MinAgeRequests != 3 {
				t.Errorf("got %v %d", e.L4, e.L4MinAgeRequests)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse([]byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, p.Eligibility)
		})
	}
}

func TestEligibilityParseErrors(t *testing.T) {
	cases := []struct{ name, yaml, want string }{
		{"unknown key", "eligibility:\n  keep_copies: last\n", "keep_copies"},
		{"bad keep_copy", "eligibility:\n  keep_copy: middle\n", "eligibility.keep_copy"},
		{"bad tool class", "eligibility:\n  tools:\n    Read: sometimes\n", "eligibility.tools.Read"},
		{"negative turns", "eligibility:\n  protect_recent_turns: -1\n", "eligibility.protect_recent_turns"},
		{"negative horizon", "eligibility:\n  error_horizon_requests: -2\n", "eligibility.error_horizon_requests"},
		{"negative min tokens", "eligibility:\n  errored_input_min_tokens: -2\n", "eligibility.errored_input_min_tokens"},
		{"negative min prune", "eligibility:\n  min_prune_tokens: -1\n", "eligibility.min_prune_tokens"},
		{"negative l4 age", "eligibility:\n  l4_min_age_requests: -1\n", "eligibility.l4_min_age_requests"},
		{"negative recoverable horizon", "eligibility:\n  recoverable: {enabled: true, horizon_requests: -1}\n", "eligibility.recoverable.horizon_requests"},
		{"negative recoverable quiet", "eligibility:\n  recoverable: {enabled: true, quiet_requests: -3}\n", "eligibility.recoverable.quiet_requests"},
		{"negative recoverable floor", "eligibility:\n  recoverable: {min_tokens: -5}\n", "eligibility.recoverable.min_tokens"},
		{"negative recoverable common terms", "eligibility:\n  recoverable: {enabled: true, common_term_items: -1}\n", "eligibility.recoverable.common_term_items"},
		{"unknown recoverable key", "eligibility:\n  recoverable: {enabled: true, horizon: 3}\n", "horizon"},
		{"bad file pattern", "eligibility:\n  protected_files: ['[']\n", "eligibility.protected_files[0]"},
		{"bad rule pattern", "eligibility:\n  project_rule_files: ['[']\n", "eligibility.project_rule_files[0]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want mention of %q", err, tc.want)
			}
		})
	}
}

func TestEligibilityVersionChanges(t *testing.T) {
	a, _ := Parse([]byte("eligibility:\n  keep_copy: last\n"))
	b, _ := Parse([]byte("eligibility:\n  keep_copy: first\n"))
	if a.Version() == b.Version() {
		t.Fatal("policy version does not change with keep_copy")
	}
	c, _ := Parse([]byte(""))
	if b.Version() != c.Version() {
		t.Fatal("explicit default changes the version")
	}
	off, _ := Parse([]byte("eligibility:\n  recoverable: {enabled: false}\n"))
	on, _ := Parse([]byte("eligibility:\n  recoverable: {enabled: true}\n"))
	onExplicit, _ := Parse(fmt.Appendf(nil, "eligibility:\n  recoverable: {enabled: true, horizon_requests: %d, quiet_requests: %d, min_tokens: %d, common_term_items: %d}\n",
		DefaultRecoverableHorizonRequests, DefaultRecoverableQuietRequests, DefaultRecoverableMinTokens, DefaultRecoverableCommonTermItems))
	if off.Version() != c.Version() || on.Version() == c.Version() || on.Version() != onExplicit.Version() {
		t.Fatalf("recoverable versions: off %s default %s on %s explicit %s", off.Version(), c.Version(), on.Version(), onExplicit.Version())
	}
}

func TestEligibilityRungToggles(t *testing.T) {
	def := Default()
	for _, r := range []string{"L0", "L1", "L2"} {
		if !def.Eligibility.RungEnabled(r) {
			t.Errorf("default: rung %s disabled", r)
		}
	}
	// L3 and L4 are opt-in.
	if def.Eligibility.RungEnabled("L3") || def.Eligibility.RungEnabled("L4") || !def.Eligibility.ErroredEnabled() {
		t.Errorf("default: L3 %v L4 %v errored %v", def.Eligibility.RungEnabled("L3"), def.Eligibility.RungEnabled("L4"), def.Eligibility.ErroredEnabled())
	}
	b, err := Parse([]byte("eligibility:\n  rungs: [L1, L0, L0]\n  errored_inputs: false\n"))
	if err != nil {
		t.Fatal(err)
	}
	e := b.Eligibility
	if !e.RungEnabled("L0") || !e.RungEnabled("L1") || e.RungEnabled("L2") || e.RungEnabled("L3") || e.ErroredEnabled() {
		t.Errorf("B toggles: %v errored %v", e.Rungs, e.ErroredEnabled())
	}
	if len(e.Rungs) != 2 || e.Rungs[0] != "L0" {
		t.Errorf("rungs not normalised: %v", e.Rungs)
	}
	if b.Version() == def.Version() {
		t.Error("version does not change with rungs / errored_inputs")
	}
	explicit, err := Parse([]byte("eligibility:\n  rungs: [L2, L1, L0]\n  errored_inputs: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	if explicit.Version() != def.Version() {
		t.Error("explicit default rungs / errored_inputs change the version")
	}
	for _, tc := range []struct{ yaml, want string }{
		{"eligibility:\n  rungs: [L5]\n", "eligibility.rungs[0]"},
		{"eligibility:\n  rungs: [L4]\n", "eligibility.rungs[0]"},
		{"eligibility:\n  rungs: []\n", "eligibility.rungs: empty"},
	} {
		if _, err := Parse([]byte(tc.yaml)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

func TestL3OptIn(t *testing.T) {
	p, err := Parse([]byte("eligibility:\n  rungs: [L0, L1, L2, L3]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !p.Eligibility.RungEnabled("L3") {
		t.Error("L3 listed but not enabled")
	}
	d := Default()
	if p.Version() == d.Version() {
		t.Error("turning L3 on must change the policy version")
	}
}
