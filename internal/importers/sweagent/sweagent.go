// Package sweagent imports SWE-agent trajectories (.traj: {environment,
// trajectory[], history[], info}) as prunesched events.
//
// history[] is the model-facing message sequence with the observations
// un-collapsed; it is imported whole. Each assistant entry outside the
// demonstration is one model request (SWE-agent records only aggregate
// usage, so requests carry none) followed by its thought and its action as a
// tool call: in function-calling configs the entry's tool_calls (ids kept);
// otherwise the action string, an ACI command (open, edit, find_file, ...)
// becoming a call of that tool and anything else a bash call, with the step
// index as id. The next observation entry is the call's result; errors are
// recognised in its text (SWE-agent has no structured error signal).
//
// SWE-agent's own history processor replaces old observations in the prompt
// with "Old environment output: (N lines omitted)". In 1.0 files the last
// trajectory[].messages holds the final prompt after that processing: the
// results whose observation it collapsed are marked HostPruned.
package sweagent

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/importers/internal/build"
	"github.com/prunesched/prunesched/internal/toolspec"
)

// Format is the format name of SWE-agent trajectories.
const Format = "swe-agent"

// CollapsedPrefix starts an observation SWE-agent's history processor
// collapsed.
const CollapsedPrefix = "Old environment output"

type trajectory struct {
	Environment json.RawMessage   `json:"environment"`
	Trajectory  []step            `json:"trajectory"`
	History     []json.RawMessage `json:"history"`
}

type step struct {
	Action   string            `json:"action"`
	State    json.RawMessage   `json:"state"`
	Messages []json.RawMessage `json:"messages"`
}

type entry struct {
	Role        string          `json:"role"`
	Content     json.RawMessage `json:"content"`
	Action      *string         `json:"action"`
	IsDemo      bool            `json:"is_demo"`
	MessageType string          `json:"message_type"`
	ToolCalls   []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
	ToolCallIDs []string `json:"tool_call_ids"`
}

type stepState struct {
	OpenFile   string `json:"open_file"`
	WorkingDir string `json:"working_dir"`
}

// Import reads one SWE-agent trajectory. name is used in error messages and
// as the session's source path. A trajectory is one session.
func Import(r io.Reader, name string) ([]build.Session, error) {
	return build.ImportJSON(r, name, func(tr *trajectory) string {
		if tr.History == nil && tr.Trajectory == nil {
			return "history"
		}
		return ""
	}, convert)
}

type pending struct {
	id, tool string
	input    json.RawMessage
	srcID    string // tool_call id, "" for positional calls
}

type converter struct {
	name   string
	b      *build.Builder
	tr     *trajectory
	step   int        // next trajectory step to pair with an assistant entry
	open   []*pending // calls waiting for their observation, in order
	hist   []entry
	pruned map[int]bool
}

func convert(name string, tr *trajectory) (build.Session, error) {
	c := &converter{name: name, b: build.New(Format, name), tr: tr}
	st := c.b.Started()
	st.Agent = "swe-agent"
	// A trajectory names no session: the file does (SWE-agent names it
	// after the instance).
	c.b.SetSourceID(strings.TrimSuffix(filepath.Base(name), ".traj"))
	hist, err := c.entries()
	if err != nil {
		return build.Session{}, err
	}
	c.hist = hist
	c.pruned = collapsed(tr, hist)
	for i, e := range hist {
		if err := c.entry(i, e); err != nil {
			return build.Session{}, fmt.Errorf("%s: history[%d]: %w", name, i, err)
		}
	}
	return c.b.Finish("swe-start")
}

// entries decodes history[].
func (c *converter) entries() ([]entry, error) {
	out := make([]entry, len(c.tr.History))
	for i, raw := range c.tr.History {
		if err := json.Unmarshal(raw, &out[i]); err != nil {
			return nil, build.Locate(c.name, nil, fmt.Sprintf("history[%d]", i), err)
		}
	}
	return out, nil
}

// observation reports whether history entry e (after prev) is an
// environment observation.
func observation(e, prev entry) bool {
	switch {
	case e.Role == "tool":
		return true
	case e.Role != "user" || e.IsDemo:
		return false
	case e.MessageType == "observation":
		return prev.Role == "assistant"
	}
	return prev.Role == "assistant" && !prev.IsDemo && (len(prev.ToolCalls) > 0 || prev.Action != nil && strings.TrimSpace(*prev.Action) != "")
}

// collapsed returns the history indexes of the observations SWE-agent's
// history processor had collapsed in the final prompt snapshot (1.0 files:
// the last trajectory step's messages). Observations are paired in order.
func collapsed(tr *trajectory, hist []entry) map[int]bool {
	out := map[int]bool{}
	if len(tr.Trajectory) == 0 {
		return out
	}
	snap := tr.Trajectory[len(tr.Trajectory)-1].Messages
	if len(snap) == 0 {
		return out
	}
	var histObs []int
	for i := range hist {
		var prev entry
		if i > 0 {
			prev = hist[i-1]
		}
		if observation(hist[i], prev) {
			histObs = append(histObs, i)
		}
	}
	var prev entry
	j := 0
	for _, raw := range snap {
		var e entry
		if json.Unmarshal(raw, &e) != nil {
			continue
		}
		if observation(e, prev) {
			text, _ := build.ChatText(e.Content)
			if j < len(histObs) && strings.HasPrefix(strings.TrimSpace(text), CollapsedPrefix) {
				out[histObs[j]] = true
			}
			j++
		}
		prev = e
	}
	return out
}

func (c *converter) entry(i int, e entry) error {
	text, err := build.ChatText(e.Content)
	if err != nil {
		return fmt.Errorf("field %q: %w", "content", err)
	}
	loc := fmt.Sprintf("%s: history[%d]", c.name, i)
	k := 0
	add := func(p events.Payload) {
		// SWE-agent records no wall-clock times: the builder keeps every
		// event at the session start.
		c.b.Add(fmt.Sprintf("swe-%d-%d", i, k), time.Time{}, loc, p)
		k++
	}
	item := func() string { return c.b.Item(fmt.Sprintf("h%d", i)) }
	var prev entry
	if i > 0 {
		prev = c.hist[i-1]
	}
	switch {
	case e.IsDemo:
		role := events.RoleUser
		if e.Role == "system" {
			role = events.RoleSystem
		}
		add(&events.Message{Item: item(), Role: role, Kind: events.KindText, Text: text, Meta: true})
	case e.Role == "system":
		add(&events.Message{Item: item(), Role: events.RoleSystem, Kind: events.KindText, Text: text})
	case e.Role == "assistant":
		return c.assistant(i, e, text, add, item)
	case (e.Role == "user" || e.Role == "tool") && len(c.open) > 0 && observation(e, prev):
		c.result(i, e, text, add)
	case e.Role == "user" || e.Role == "tool":
		add(&events.Message{Item: item(), Role: events.RoleUser, Kind: events.KindText, Text: text})
	case e.Role == "":
		return build.Missing("role")
	default:
		return fmt.Errorf("field %q: bad value %q (want system, user, assistant or tool)", "role", e.Role)
	}
	return nil
}

func (c *converter) assistant(i int, e entry, text string, add func(events.Payload), item func() string) error {
	add(&events.ModelRequest{Request: c.b.Item(fmt.Sprintf("req-%d", i))})
	if text != "" {
		add(&events.Message{Item: item(), Role: events.RoleAssistant, Kind: events.KindText, Text: text})
	}
	// The trajectory step this assistant entry produced: its state is the
	// state after the step; the one before gives the open file.
	stepIdx := c.step
	c.step++
	before := c.stateAt(stepIdx - 1)
	if after := c.stateAt(stepIdx); after.WorkingDir != "" && c.b.Started().CWD == "" {
		c.b.Started().CWD = after.WorkingDir
	}
	c.open = c.open[:0]
	for j, tc := range e.ToolCalls {
		tool := tc.Function.Name
		if tool == "" {
			return build.Missing(fmt.Sprintf("tool_calls[%d].function.name", j))
		}
		args, err := build.Text(tc.Function.Arguments)
		if err != nil {
			return fmt.Errorf("field %q: %w", fmt.Sprintf("tool_calls[%d].function.arguments", j), err)
		}
		input := json.RawMessage(args)
		if !json.Valid(input) {
			input, _ = json.Marshal(args)
		}
		base := tc.ID
		if base == "" {
			base = fmt.Sprintf("step-%d", stepIdx)
		}
		p := &pending{id: c.b.Call(base), tool: tool, input: build.Input(input), srcID: tc.ID}
		c.open = append(c.open, p)
		add(&events.ToolCall{Item: events.CallInputItem(p.id), CallID: p.id, Tool: p.tool, Input: p.input})
	}
	if len(e.ToolCalls) > 0 {
		return nil
	}
	action := ""
	if e.Action != nil {
		action = *e.Action
	} else if stepIdx < len(c.tr.Trajectory) {
		action = c.tr.Trajectory[stepIdx].Action
	}
	action = strings.TrimSpace(action)
	if action == "" {
		return nil
	}
	tool, input := ParseAction(action, before.OpenFile)
	p := &pending{id: c.b.Call(fmt.Sprintf("step-%d", stepIdx)), tool: tool, input: input}
	c.open = append(c.open, p)
	add(&events.ToolCall{Item: events.CallInputItem(p.id), CallID: p.id, Tool: tool, Input: input})
	return nil
}

func (c *converter) stateAt(i int) stepState {
	var s stepState
	if i < 0 || i >= len(c.tr.Trajectory) {
		return s
	}
	raw := c.tr.Trajectory[i].State
	if str, err := build.Text(raw); err == nil && strings.HasPrefix(strings.TrimSpace(str), "{") {
		raw = json.RawMessage(str)
	}
	_ = json.Unmarshal(raw, &s)
	return s
}

// result pairs an observation with a waiting call: by tool_call_ids when the
// entry names them, else the first waiting call.
func (c *converter) result(i int, e entry, text string, add func(events.Payload)) {
	idx := 0
	if len(e.ToolCallIDs) > 0 {
		for j, p := range c.open {
			if p.srcID == e.ToolCallIDs[0] {
				idx = j
				break
			}
		}
	}
	p := c.open[idx]
	c.open = append(c.open[:idx], c.open[idx+1:]...)
	out := text
	res := &events.ToolResult{Item: p.id, CallID: p.id, Tool: p.tool, Output: &out, Source: source(p.tool, p.input), HostPruned: c.pruned[i]}
	if et := errorType(text); et != "" {
		res.IsError = true
		res.Error = &events.ToolError{Type: et, Message: build.ErrorSummary(text)}
	}
	add(res)
}

// aciCommands are SWE-agent (and EnIGMA) interface commands: an action
// starting with one becomes a call of that tool; anything else runs in bash.
var aciCommands = map[string]bool{
	"open": true, "goto": true, "scroll_up": true, "scroll_down": true, "create": true, "edit": true,
	"insert": true, "search_file": true, "search_dir": true, "find_file": true, "submit": true,
	"filemap": true, "decompile": true, "disassemble": true, "debug_start": true, "debug_add_breakpoint": true,
	"debug_continue": true, "debug_step": true, "debug_exec": true, "debug_stop": true, "connect_start": true,
	"connect_sendline": true, "connect_exec": true, "connect_stop": true, "exit_forfeit": true,
}

// ParseAction turns a SWE-agent action string into a tool name and JSON
// input with the argument names SWE-agent's function-calling tools use.
// openFile is the file open before the action (the target of edit/insert).
func ParseAction(action, openFile string) (string, json.RawMessage) {
	first, body, _ := strings.Cut(action, "\n")
	words := splitWords(first)
	if len(words) == 0 || !aciCommands[words[0]] {
		in, _ := json.Marshal(map[string]string{"command": action})
		return "bash", in
	}
	cmd, args := words[0], words[1:]
	arg := func(i int) string {
		if i < len(args) {
			return args[i]
		}
		return ""
	}
	m := map[string]any{}
	switch cmd {
	case "open":
		m["path"] = arg(0)
		if n, err := strconv.Atoi(arg(1)); err == nil {
			m["line_number"] = n
		}
	case "create":
		m["filename"] = arg(0)
	case "goto":
		m["line_number"] = arg(0)
	case "search_file":
		m["search_term"] = arg(0)
		if a := arg(1); a != "" {
			m["file"] = a
		}
	case "search_dir":
		m["search_term"] = arg(0)
		if a := arg(1); a != "" {
			m["dir"] = a
		}
	case "find_file":
		m["file_name"] = arg(0)
		if a := arg(1); a != "" {
			m["dir"] = a
		}
	case "edit", "insert":
		if openFile != "" && openFile != "n/a" {
			m["path"] = openFile
		}
		if r := arg(0); r != "" {
			m["range"] = r
		}
		body = strings.TrimSuffix(strings.TrimRight(body, "\n"), "end_of_edit")
		body = strings.TrimSuffix(body, "end_of_insert")
		m["text"] = strings.TrimRight(body, "\n")
	default:
		if len(args) > 0 {
			m["args"] = strings.TrimSpace(strings.TrimPrefix(action, cmd))
		}
	}
	in, _ := json.Marshal(m)
	return cmd, in
}

// splitWords splits a command line on blanks, honouring simple quotes.
func splitWords(s string) []string {
	var out []string
	var cur strings.Builder
	var quote byte
	in := false
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case quote != 0 && ch == quote:
			quote = 0
		case quote != 0:
			cur.WriteByte(ch)
		case ch == '"' || ch == '\'':
			quote, in = ch, true
		case ch == ' ' || ch == '\t' || ch == '\r':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(ch)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}

// source names what a read or search call observed.
func source(tool string, input json.RawMessage) *events.SourceIdentity {
	in := build.InputMap(input)
	switch tool {
	case "bash":
		return toolspec.ShellSource(build.Str(in["command"]))
	case "open", "search_file", "search_dir", "find_file":
		return toolspec.ToolSource(tool, input, "")
	case "str_replace_editor":
		if build.Str(in["command"]) == "view" {
			if p := build.Str(in["path"]); p != "" {
				return &events.SourceIdentity{Kind: "file", Path: p}
			}
		}
	}
	return nil
}

// errorType recognises a failed action in SWE-agent's observation text.
func errorType(text string) string {
	t := strings.TrimSpace(text)
	firstLine, _, _ := strings.Cut(t, "\n")
	switch {
	case strings.HasPrefix(t, "Your proposed edit has introduced new syntax error"):
		return "edit_rejected"
	case strings.HasSuffix(firstLine, "command not found"):
		return "not_found"
	case strings.HasPrefix(firstLine, "Error: ") || strings.HasPrefix(firstLine, "ERROR: "):
		return "tool_error"
	case strings.HasPrefix(firstLine, "Usage: "):
		return "usage"
	}
	return ""
}
