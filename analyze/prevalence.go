package analyze

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/prunesched/prunesched/cores"
	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/tokens"
	"github.com/prunesched/prunesched/importers"
	"github.com/prunesched/prunesched/policy"
	"github.com/prunesched/prunesched/toolspec"
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

// callFacts is what shape detection knows about one tool call.
type callFacts struct {
	idx        int
	tool       string
	canon      string // tool + canonical input
	cls        toolspec.CallClass
	readPath   string
	rangeKey   string
	full       bool
	install    bool
	inItem     string
	inTokens   int
	outItem    string
	outTokens  int
	outHash    string
	hasResult  bool
	failed     bool
	passing    bool
	hostPruned bool
	// Write counters when the result arrived: of readPath, and of all
	// writes (scoped or not) and unscoped writes.
	pathWrites, allWrites, unscoped int
}

// measure detects the shapes of one session and joins the policy's
// decisions.
func measure(s importers.Session, sr SessionReport, pol policy.Policy, tc events.TokenCounter) SessionPrevalence {
	sp := SessionPrevalence{Source: s.Source, Format: s.Format, Session: sr.Session, Items: []ShapedItem{}}
	g := newGroup(sr.Session)
	g.Sessions = 1
	decisions := map[string]events.Decision{}
	for _, d := range sr.Decisions {
		decisions[d.Item] = d.Decision
	}
	cwd := ""
	var calls []*callFacts
	byID := map[string]*callFacts{}
	tokensOf := map[string]int{}
	pathWrites := map[string]int{}
	allWrites, unscoped := 0, 0
	var outputs []string
	for _, e := range s.Events {
		switch p := e.Data.(type) {
		case *events.SessionStarted:
			cwd = p.CWD
		case *events.Message:
			n := tc.Count(p.Text)
			tokensOf[p.Item] = n
			g.Items++
			g.Tokens += n
		case *events.ToolCall:
			n := tc.Count(string(p.Input))
			tokensOf[p.Item] = n
			g.Items++
			g.Tokens += n
			cf := classifyCall(p.Tool, p.Input, cwd)
			cf.idx, cf.inItem, cf.inTokens = len(calls), p.Item, n
			calls = append(calls, cf)
			byID[p.CallID] = cf
			if cf.cls.Class == events.DeterminismSideEffect || !cf.cls.Known {
				allWrites++
				if cf.cls.Unscoped {
					unscoped++
				}
				for _, w := range cf.cls.Writes {
					pathWrites[toolspec.CleanPath(w, cwd)]++
				}
			}
		case *events.ToolResult:
			out := ""
			if p.Output != nil {
				out = *p.Output
			}
			n := tc.Count(out)
			tokensOf[p.Item] = n
			g.Items++
			g.Tokens += n
			g.ToolOutputs++
			g.ToolOutputTokens += n
			outputs = append(outputs, p.Item)
			cf := byID[p.CallID]
			if cf == nil || cf.hasResult {
				continue
			}
			cf.hasResult = true
			cf.outItem, cf.outTokens = p.Item, n
			sum := sha256.Sum256([]byte(out))
			cf.outHash = string(sum[:])
			cf.failed = p.IsError
			cf.passing = !p.IsError && (p.ExitCode == nil || *p.ExitCode == 0)
			cf.hostPruned = p.HostPruned
			if cf.readPath == "" && p.Source != nil && p.Source.Kind == "file" && p.Source.Path != "" && cf.cls.Class != events.DeterminismSideEffect {
				cf.readPath = toolspec.CleanPath(p.Source.Path, cwd)
				cf.full = p.Source.Offset == 0 && p.Source.Limit == 0
				cf.rangeKey = fmt.Sprintf("%d:%d", p.Source.Offset, p.Source.Limit)
				if cf.full {
					cf.rangeKey = "full"
				}
			}
			cf.pathWrites, cf.allWrites, cf.unscoped = pathWrites[cf.readPath], allWrites, unscoped
		}
	}
	shaped := detect(calls)
	inShape := map[string]bool{}
	for _, it := range shaped {
		it.Tokens = tokensOf[it.Item]
		it.Decision = decisions[it.Item]
		inShape[it.Item] = true
		sp.Items = append(sp.Items, it)
		for i := range g.Shapes {
			if g.Shapes[i].Shape == it.Shape {
				g.Shapes[i].Count++
				g.Shapes[i].Tokens += it.Tokens
				g.Shapes[i].Policy.add(it.Decision, it.Tokens)
				if it.HostPruned {
					g.Shapes[i].HostPruned++
					g.Shapes[i].HostPrunedTokens += it.Tokens
				}
			}
		}
		g.ShapeTokens += it.Tokens
		g.Policy.add(it.Decision, it.Tokens)
	}
	for _, d := range sr.Decisions {
		if d.Decision == events.Prune && !inShape[d.Item] {
			g.PrunesOutside++
			g.PrunesOutsideTokens += tokensOf[d.Item]
		}
	}
	g.finish()
	sp.Group = g
	sp.Host = hostAgreement(s, sr, pol, tokensOf, outputs)
	return sp
}

// hostAgreement compares HostPruned outputs with the PRUNE decisions our
// policy takes on tool outputs; nil when the host pruned nothing. The
// pipeline never judges an output the host already removed (it is out of
// context), so the comparison replays the cores in process (cores.Run)
// over the session with the host's pruning taken out: what our policy
// would have done on the same items.
func hostAgreement(s importers.Session, sr SessionReport, pol policy.Policy, tokensOf map[string]int, outputs []string) *HostAgreement {
	host := map[string]bool{}
	for _, e := range s.Events {
		if r, ok := e.Data.(*events.ToolResult); ok && r.HostPruned {
			host[r.Item] = true
		}
	}
	if len(host) == 0 {
		return nil
	}
	facts := make([]events.Event, 0, len(s.Events))
	for _, e := range s.Events {
		switch p := e.Data.(type) {
		case *events.Message:
			cp := *p
			cp.Tokens = tokensOf[p.Item]
			e.Data = &cp
		case *events.ToolCall:
			cp := *p
			cp.InputTokens = tokensOf[p.Item]
			e.Data = &cp
		case *events.ToolResult:
			cp := *p
			cp.HostPruned = false
			if p.Output != nil {
				cp.Output = nil
				cp.OutputRef = &events.ContentRef{Hash: events.HashBytes([]byte(*p.Output)), Bytes: len(*p.Output), Tokens: tokensOf[p.Item]}
			}
			e.Data = &cp
		}
		facts = append(facts, e)
	}
	// The latest mark of each item decides, as in the projection.
	marks, _ := cores.Run(pol, facts, nil)
	latest := map[string]*events.Mark{}
	for _, m := range marks {
		mk := m.Data.(*events.Mark)
		latest[mk.Item] = mk
	}
	ours := map[string]bool{}
	for id, m := range latest {
		if m.Decision == events.Prune && m.Part != "input" {
			ours[id] = true
		}
	}
	h := &HostAgreement{Name: name(sr), HostPruned: len(host)}
	for _, it := range outputs {
		switch {
		case host[it] && ours[it]:
			h.Both++
			h.BothTokens += tokensOf[it]
		case host[it]:
			h.OnlyHost++
			h.OnlyHostTokens += tokensOf[it]
		case ours[it]:
			h.OnlyOurs++
			h.OnlyOursTokens += tokensOf[it]
		}
	}
	return h
}

// classifyCall classifies a call with the eligibility core's own tool table
// and shell classifier (package toolspec). A Codex code-mode exec snippet
// running one command is classified as that command.
func classifyCall(tool string, input json.RawMessage, cwd string) *callFacts {
	cf := &callFacts{tool: tool}
	canon, _, _ := toolspec.CanonicalJSON(input)
	cf.canon = tool + "\x00" + canon
	cls := toolspec.ClassifyRun(tool, input)
	cf.cls = cls
	if cls.Command != "" {
		// A shell call is its command (Claude Code's Bash also carries a
		// free-text description that differs between identical runs).
		cf.canon = "shell\x00" + strings.TrimSpace(cls.Command)
	}
	if cls.ReadPath != "" {
		cf.readPath = toolspec.CleanPath(cls.ReadPath, cwd)
		switch {
		case cls.Full:
			cf.rangeKey, cf.full = "full", true
		case cls.Tail:
			cf.rangeKey = fmt.Sprintf("tail:%d", cls.Limit)
		case cls.Window:
			cf.rangeKey = fmt.Sprintf("window:%d", cls.Offset)
		default:
			cf.rangeKey = fmt.Sprintf("%d:%d", cls.Offset, cls.Limit)
		}
		// Ranges are compared within one tool only (line conventions
		// differ), except whole-file reads.
		if !cf.full {
			cf.rangeKey = tool + ":" + cf.rangeKey
		}
	}
	cf.install = toolspec.IsInstall(cls.Command, cls.Program)
	return cf
}

// detect assigns shapes, walking the calls backwards so each call knows what
// comes after it.
func detect(calls []*callFacts) []ShapedItem {
	type snap struct{ path, rng string }
	laterUnchanged := map[string]bool{} // path, range, write counters
	laterSameHashRead := map[string]bool{}
	laterReadRanges := map[snap]bool{}
	laterFullRead := map[string]bool{}
	laterSearch := map[string]bool{}
	laterTest := map[string]bool{}
	laterHash := map[string]bool{}
	laterPlan := false
	laterPassingTest := false
	var out []ShapedItem
	for i := len(calls) - 1; i >= 0; i-- {
		c := calls[i]
		kind := c.cls.Kind
		if c.cls.Class == events.DeterminismSideEffect && kind != "plan" && kind != "write" {
			kind = "write"
		}
		if c.failed && c.inTokens >= failedInputTokens {
			out = append(out, ShapedItem{Item: c.inItem, Shape: ShapeFailedLargeInput, Tool: c.tool})
		}
		if kind == "plan" && laterPlan {
			out = append(out, ShapedItem{Item: c.inItem, Shape: ShapeSupersededPlan, Tool: c.tool})
		}
		if !c.hasResult {
			if kind == "plan" {
				laterPlan = true
			}
			continue
		}
		unchangedKey := fmt.Sprintf("%s\x00%s\x00%d\x00%d", c.readPath, c.rangeKey, c.pathWrites, c.unscoped)
		hashKey := c.readPath + "\x00" + c.outHash
		var shape Shape
		ok := !c.failed
		switch {
		case kind == "test" && laterTest[testKey(c)]:
			// Failed runs too: an old failing log is the common case.
			shape = ShapeSupersededTest
		case !ok:
		case c.readPath != "" && (laterUnchanged[unchangedKey] || laterSameHashRead[hashKey] || laterFullRead[c.readPath+"\x00unchanged\x00"+fmt.Sprintf("%d\x00%d", c.pathWrites, c.unscoped)]):
			shape = ShapeRepeatedRead
		case kind == "search" && (laterSearch[fmt.Sprintf("%s\x00%d", c.canon, c.allWrites)] || laterSearch[c.canon+"\x00"+c.outHash]):
			shape = ShapeDuplicateSearch
		case c.readPath != "" && (laterReadRanges[snap{c.readPath, c.rangeKey}] || laterFullRead[c.readPath]):
			shape = ShapeSupersededRead
		case kind == "plan" && laterPlan:
			shape = ShapeSupersededPlan
		case kind == "write" && laterPassingTest && (c.cls.Command == "" || len(c.cls.Writes) > 0 && !c.cls.Unscoped):
			shape = ShapeCompletedResidue
		case c.install && c.outTokens >= installLogTokens:
			shape = ShapeInstallLog
		case c.outTokens >= identicalMinimum && laterHash[c.outHash]:
			shape = ShapeIdenticalOutput
		}
		if shape != "" {
			out = append(out, ShapedItem{Item: c.outItem, Shape: shape, Tool: c.tool, HostPruned: c.hostPruned})
		}
		// Index this call for the earlier ones.
		if ok {
			laterHash[c.outHash] = true
		}
		switch {
		case c.readPath != "" && ok:
			laterUnchanged[unchangedKey] = true
			laterSameHashRead[hashKey] = true
			laterReadRanges[snap{c.readPath, c.rangeKey}] = true
			if c.full {
				laterFullRead[c.readPath] = true
				laterFullRead[c.readPath+"\x00unchanged\x00"+fmt.Sprintf("%d\x00%d", c.pathWrites, c.unscoped)] = true
			}
		case kind == "search" && ok:
			laterSearch[fmt.Sprintf("%s\x00%d", c.canon, c.allWrites)] = true
			laterSearch[c.canon+"\x00"+c.outHash] = true
		case kind == "test":
			laterTest[testKey(c)] = true
			if c.passing {
				laterPassingTest = true
			}
		case kind == "plan":
			laterPlan = true
		}
	}
	// Report in session order.
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// WritePrevalence prints the prevalence report as Markdown tables: per
// format and in total, each shape's count, tokens and share of the group's
// tokens with what the policy decided on its items; then the agreement with
// the hosts' own pruning, per file and in total.
func WritePrevalence(w io.Writer, p *PrevalenceReport) {
	fmt.Fprintf(w, "### Prevalence of prunable shapes (policy %s, tokenizer %s)\n\n", p.PolicyVersion, p.Tokenizer)
	fmt.Fprintf(w, "| group | sessions | items | tokens | tool outputs | tool output tokens | in any shape | policy prunes outside shapes |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, g := range append(append([]PrevalenceGroup{}, p.Formats...), p.Total) {
		label := g.Name
		if g.Name == "all" {
			label = "**all**"
		}
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %d (%.1f%%) | %d (%.1f%%) | %d (%d tok) |\n", label, g.Sessions, g.Items, g.Tokens,
			g.ToolOutputs, g.ToolOutputTokens, 100*g.ToolOutputShare, g.ShapeTokens, 100*g.ShapeShare, g.PrunesOutside, g.PrunesOutsideTokens)
	}
	for _, g := range append(append([]PrevalenceGroup{}, p.Formats...), p.Total) {
		fmt.Fprintf(w, "\n#### %s: %d session(s), %d tokens, tool outputs %.1f%%\n\n", g.Name, g.Sessions, g.Tokens, 100*g.ToolOutputShare)
		fmt.Fprintf(w, "| shape | count | tokens | share | PRUNE | DEFER | ABSTAIN | KEEP | no mark | of which host-pruned |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		hp, hpTok := 0, 0
		for _, s := range g.Shapes {
			hp, hpTok = hp+s.HostPruned, hpTok+s.HostPrunedTokens
		}
		rows := append(append([]ShapeStats{}, g.Shapes...), ShapeStats{Shape: "**any shape**", Count: countAll(g.Shapes), Tokens: g.ShapeTokens, Share: g.ShapeShare, Policy: g.Policy, HostPruned: hp, HostPrunedTokens: hpTok})
		for _, s := range rows {
			if s.Count == 0 && s.Shape != "**any shape**" {
				fmt.Fprintf(w, "| %s | 0 | 0 | 0.0%% | | | | | | |\n", s.Shape)
				continue
			}
			q := s.Policy
			fmt.Fprintf(w, "| %s | %d | %d | %.1f%% | %s | %s | %s | %s | %s | %s |\n", s.Shape, s.Count, s.Tokens, 100*s.Share,
				cell(q.Prune, q.PruneTokens), cell(q.Defer, q.DeferTokens), cell(q.Abstain, q.AbstainTokens), cell(q.Keep, q.KeepTokens), cell(q.None, q.NoneTokens),
				cell(s.HostPruned, s.HostPrunedTokens))
		}
	}
	fmt.Fprintf(w, "\n### Agreement with the hosts' own pruning (tool outputs the host removed itself vs our PRUNE decisions)\n\n")
	if len(p.Host) == 0 {
		fmt.Fprintf(w, "No session has outputs the host pruned itself.\n")
		return
	}
	fmt.Fprintf(w, "| file | host-pruned | both removed | only the host | only ours |\n|---|---:|---:|---:|---:|\n")
	for _, h := range append(append([]HostAgreement{}, p.Host...), p.HostTotal) {
		label := h.Name
		if label == "all" {
			label = "**all**"
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s |\n", label, h.HostPruned, cell(h.Both, h.BothTokens), cell(h.OnlyHost, h.OnlyHostTokens), cell(h.OnlyOurs, h.OnlyOursTokens))
	}
}

func cell(n, tok int) string {
	if n == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%d tok)", n, tok)
}

func countAll(ss []ShapeStats) int {
	n := 0
	for _, s := range ss {
		n += s.Count
	}
	return n
}

// testKey is what identifies a test run: its command without output
// redirection and head/tail filters, or the tool and input.
func testKey(c *callFacts) string {
	if c.cls.Command == "" {
		return c.canon
	}
	return toolspec.RunKey(c.cls.Command)
}
