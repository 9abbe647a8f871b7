package analyze

import (
	"context"
	"fmt"
	"sort"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/tokens"
	"github.com/prunesched/prunesched/internal/importers"
	"github.com/prunesched/prunesched/policy"
)

// Shape names a prunable shape of context, detected from the session's facts
// alone (tool names, the shell classifier, source identity, content hashes),
// independently of the policy, so that the prevalence table shows both where
// the policy agrees and where it leaves opportunity.
type Shape string

// The shapes, in the order an item is assigned to the first that fits (an
// item counts in one shape only, so shape tokens add up).
const (
	// ShapeRepeatedRead is a read of a file whose source provably did not
	// change before a later read covering the same lines (no recorded
	// write of the path, no unscoped write, or identical content).
	ShapeRepeatedRead Shape = "repeated_read_unchanged"
	// ShapeDuplicateSearch is a search or listing repeated later with the
	// same arguments and no write in between, or with identical output.
	ShapeDuplicateSearch Shape = "duplicate_search"
	// ShapeSupersededTest is a test log (passing or failing) followed by a
	// later run of the same test command (compared without output
	// redirection and a trailing head/tail filter).
	ShapeSupersededTest Shape = "superseded_test_log"
	// ShapeSupersededRead is a read of a file that changed before a later
	// read covering the same lines.
	ShapeSupersededRead Shape = "superseded_read"
	// ShapeSupersededPlan is a plan/todo call (input and output) followed by
	// a later plan call that replaces the plan.
	ShapeSupersededPlan Shape = "superseded_plan"
	// ShapeCompletedResidue is the output of a successful file edit or
	// write (an edit tool, or a shell command whose writes are scoped to
	// named files) followed by a later passing test run: completed-work
	// residue.
	ShapeCompletedResidue Shape = "completed_edit_residue"
	// ShapeInstallLog is the output of a package install (pip, npm, ...)
	// of at least installLogTokens tokens.
	ShapeInstallLog Shape = "install_log"
	// ShapeIdenticalOutput is any other tool output byte-identical to a
	// later output (repeated status checks, repeated errors).
	ShapeIdenticalOutput Shape = "identical_output"
	// ShapeFailedLargeInput is the input of a failed call of at least
	// failedInputTokens tokens.
	ShapeFailedLargeInput Shape = "failed_large_input"
)

// Shapes lists every shape in table order.
var Shapes = []Shape{ShapeRepeatedRead, ShapeDuplicateSearch, ShapeFailedLargeInput, ShapeSupersededTest,
	ShapeSupersededRead, ShapeCompletedResidue, ShapeSupersededPlan, ShapeInstallLog, ShapeIdenticalOutput}

// Thresholds of the size-dependent shapes, in tokens.
const (
	failedInputTokens = 100
	installLogTokens  = 200
	identicalMinimum  = 20
)

// PolicyCounts is what the policy decided on the items of one shape: the
// latest decision per item, counted and with the items' tokens. None counts
// items with no decision.
type PolicyCounts struct {
	Prune         int `json:"prune"`
	PruneTokens   int `json:"prune_tokens"`
	Defer         int `json:"defer"`
	DeferTokens   int `json:"defer_tokens"`
	Abstain       int `json:"abstain"`
	AbstainTokens int `json:"abstain_tokens"`
	Keep          int `json:"keep"`
	KeepTokens    int `json:"keep_tokens"`
	None          int `json:"none"`
	NoneTokens    int `json:"none_tokens"`
}

func (p *PolicyCounts) add(d events.Decision, tok int) {
	switch d {
	case events.Prune:
		p.Prune, p.PruneTokens = p.Prune+1, p.PruneTokens+tok
	case events.Defer:
		p.Defer, p.DeferTokens = p.Defer+1, p.DeferTokens+tok
	case events.Abstain:
		p.Abstain, p.AbstainTokens = p.Abstain+1, p.AbstainTokens+tok
	case events.Keep:
		p.Keep, p.KeepTokens = p.Keep+1, p.KeepTokens+tok
	default:
		p.None, p.NoneTokens = p.None+1, p.NoneTokens+tok
	}
}

func (p *PolicyCounts) merge(o PolicyCounts) {
	p.Prune += o.Prune
	p.PruneTokens += o.PruneTokens
	p.Defer += o.Defer
	p.DeferTokens += o.DeferTokens
	p.Abstain += o.Abstain
	p.AbstainTokens += o.AbstainTokens
	p.Keep += o.Keep
	p.KeepTokens += o.KeepTokens
	p.None += o.None
	p.NoneTokens += o.NoneTokens
}

// ShapeStats is one shape's prevalence in a group of sessions.
type ShapeStats struct {
	Shape  Shape `json:"shape"`
	Count  int   `json:"count"`
	Tokens int   `json:"tokens"`
	// Share is Tokens over the group's total tokens.
	Share  float64      `json:"share"`
	Policy PolicyCounts `json:"policy"`
	// HostPruned counts the shape's items the host had removed itself
	// (they are out of context, so the policy never judges them: they
	// appear under no mark).
	HostPruned       int `json:"host_pruned"`
	HostPrunedTokens int `json:"host_pruned_tokens"`
}

// PrevalenceGroup is the prevalence over a group of sessions (one session,
// one format, or all).
type PrevalenceGroup struct {
	Name     string `json:"name"`
	Sessions int    `json:"sessions"`
	Items    int    `json:"items"`
	// Tokens is the tokens of every item (messages, tool inputs, tool
	// outputs); ToolOutputTokens those of tool outputs, ToolOutputShare
	// their share.
	Tokens           int     `json:"tokens"`
	ToolOutputs      int     `json:"tool_outputs"`
	ToolOutputTokens int     `json:"tool_output_tokens"`
	ToolOutputShare  float64 `json:"tool_output_share"`
	// ShapeTokens is the tokens in any shape, ShapeShare its share.
	ShapeTokens int          `json:"shape_tokens"`
	ShapeShare  float64      `json:"shape_share"`
	Shapes      []ShapeStats `json:"shapes"`
	// Policy is the policy's decisions on all shaped items; PolicyOutside
	// its prunes outside any shape (count and tokens).
	Policy              PolicyCounts `json:"policy"`
	PrunesOutside       int          `json:"prunes_outside_shapes"`
	PrunesOutsideTokens int          `json:"prunes_outside_shapes_tokens"`
}

// HostAgreement compares the host's own pruning (HostPruned tool outputs:
// OpenCode's compacted parts, SWE-agent's collapsed observations) with the
// policy's PRUNE decisions on tool outputs.
type HostAgreement struct {
	Name           string `json:"name"`
	HostPruned     int    `json:"host_pruned"`
	Both           int    `json:"both"`
	BothTokens     int    `json:"both_tokens"`
	OnlyHost       int    `json:"only_host"`
	OnlyHostTokens int    `json:"only_host_tokens"`
	OnlyOurs       int    `json:"only_ours"`
	OnlyOursTokens int    `json:"only_ours_tokens"`
}

func (h *HostAgreement) merge(o HostAgreement) {
	h.HostPruned += o.HostPruned
	h.Both += o.Both
	h.BothTokens += o.BothTokens
	h.OnlyHost += o.OnlyHost
	h.OnlyHostTokens += o.OnlyHostTokens
	h.OnlyOurs += o.OnlyOurs
	h.OnlyOursTokens += o.OnlyOursTokens
}

// SessionPrevalence is one session's prevalence and host agreement.
type SessionPrevalence struct {
	Source  string          `json:"source"`
	Format  string          `json:"format"`
	Session string          `json:"session"`
	Group   PrevalenceGroup `json:"prevalence"`
	// Host is set when the host pruned anything itself.
	Host *HostAgreement `json:"host,omitempty"`
	// Items lists every shaped item (for inspection and tests).
	Items []ShapedItem `json:"items"`
}

// ShapedItem is one item found in a shape, with the policy's decision.
type ShapedItem struct {
	Item     string          `json:"item"`
	Shape    Shape           `json:"shape"`
	Tokens   int             `json:"tokens"`
	Tool     string          `json:"tool,omitempty"`
	Decision events.Decision `json:"decision,omitempty"`
	// HostPruned is true when the host had removed the item itself (the
	// pipeline then never judges it).
	HostPruned bool `json:"host_pruned,omitempty"`
}

// PrevalenceReport is the prevalence of every shape over many sessions:
// per session, per format and in total, with the host agreement.
type PrevalenceReport struct {
	Tokenizer     string              `json:"tokenizer"`
	PolicyVersion string              `json:"policy_version"`
	Sessions      []SessionPrevalence `json:"sessions"`
	Formats       []PrevalenceGroup   `json:"formats"`
	Total         PrevalenceGroup     `json:"total"`
	Host          []HostAgreement     `json:"host_agreement"`
	HostTotal     HostAgreement       `json:"host_agreement_total"`
}

// RunPrevalence runs the analysis (Run) and measures the prevalence of each
// shape in the analysed sessions against the policy's decisions.
func RunPrevalence(ctx context.Context, cfg Config) (*PrevalenceReport, error) {
	prev, _, err := RunPrevalenceReport(ctx, cfg)
	return prev, err
}

// RunPrevalenceReport is RunPrevalence that also returns the analysis it
// measured (with the files that failed).
func RunPrevalenceReport(ctx context.Context, cfg Config) (*PrevalenceReport, *Report, error) {
	rep, err := Run(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	prev, err := Prevalence(rep, rep.Imported, cfg.Policy, tokens.New())
	return prev, rep, err
}

// Prevalence measures the shapes in sessions (the imported sessions, in the
// order of rep.Sessions) against the decisions in rep. pol is the policy the
// report ran: the host agreement replays the eligibility core under it.
func Prevalence(rep *Report, sessions []importers.Session, pol policy.Policy, tc events.TokenCounter) (*PrevalenceReport, error) {
	if len(sessions) != len(rep.Sessions) {
		return nil, fmt.Errorf("prevalence: %d imported sessions for %d reported", len(sessions), len(rep.Sessions))
	}
	out := &PrevalenceReport{Tokenizer: rep.Tokenizer, PolicyVersion: rep.PolicyVersion, Sessions: []SessionPrevalence{}, Host: []HostAgreement{}}
	byFormat := map[string]*PrevalenceGroup{}
	var formats []string
	out.Total = newGroup("all")
	for i, s := range sessions {
		sr := rep.Sessions[i]
		if sr.Source != s.Source {
			return nil, fmt.Errorf("prevalence: session %d is from %s in the report, %s imported", i, sr.Source, s.Source)
		}
		sp := measure(s, sr, pol, tc)
		out.Sessions = append(out.Sessions, sp)
		g := byFormat[s.Format]
		if g == nil {
			ng := newGroup(s.Format)
			g = &ng
			byFormat[s.Format] = g
			formats = append(formats, s.Format)
		}
		g.merge(sp.Group)
		out.Total.merge(sp.Group)
		if sp.Host != nil {
			out.Host = append(out.Host, *sp.Host)
			out.HostTotal.merge(*sp.Host)
		}
	}
	out.HostTotal.Name = "all"
	sort.Strings(formats)
	for _, f := range formats {
		g := byFormat[f]
		g.finish()
		out.Formats = append(out.Formats, *g)
	}
	out.Total.finish()
	return out, nil
}

func newGroup(name string) PrevalenceGroup {
	g := PrevalenceGroup{Name: name}
	for _, s := range Shapes {
		g.Shapes = append(g.Shapes, ShapeStats{Shape: s})
	}
	return g
}

func (g *PrevalenceGroup) merge(o PrevalenceGroup) {
	g.Sessions += o.Sessions
	g.Items += o.Items
	g.Tokens += o.Tokens
	g.ToolOutputs += o.ToolOutputs
	g.ToolOutputTokens += o.ToolOutputTokens
	g.ShapeTokens += o.ShapeTokens
	g.Policy.merge(o.Policy)
	g.PrunesOutside += o.PrunesOutside
	g.PrunesOutsideTokens += o.PrunesOutsideTokens
	for i := range g.Shapes {
		g.Shapes[i].Count += o.Shapes[i].Count
		g.Shapes[i].Tokens += o.Shapes[i].Tokens
		g.Shapes[i].Policy.merge(o.Shapes[i].Policy)
		g.Shapes[i].HostPruned += o.Shapes[i].HostPruned
		g.Shapes[i].HostPrunedTokens += o.Shapes[i].HostPrunedTokens
	}
}

// finish computes the shares.
func (g *PrevalenceGroup) finish() {
	g.ToolOutputShare = share(g.ToolOutputTokens, g.Tokens)
	g.ShapeShare = share(g.ShapeTokens, g.Tokens)
	for i := range g.Shapes {
		g.Shapes[i].Share = share(g.Shapes[i].Tokens, g.Tokens)
	}
}

func share(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
