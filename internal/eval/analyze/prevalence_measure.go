package analyze

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/decide"
	"github.com/prunesched/prunesched/internal/importers"
	"github.com/prunesched/prunesched/internal/toolspec"
	"github.com/prunesched/prunesched/policy"
)

// callKey is what makes two calls the same call: the tool and its
// canonical input, or "shell" and the command for a shell call.
type callKey struct{ tool, input string }

// callFacts is what shape detection knows about one tool call.
type callFacts struct {
	idx        int
	tool       string
	canon      callKey
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
// context), so the comparison replays the cores in process (decide.Run)
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
	marks, _ := decide.Run(pol, facts, nil)
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
	cf.canon = callKey{tool, canon}
	cls := toolspec.ClassifyRun(tool, input)
	cf.cls = cls
	if cls.Command != "" {
		// A shell call is its command (Claude Code's Bash also carries a
		// free-text description that differs between identical runs).
		cf.canon = callKey{"shell", strings.TrimSpace(cls.Command)}
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
