// Package codex imports Codex CLI rollouts (the JSONL files under
// ~/.codex/sessions/YYYY/MM/DD/rollout-<ts>-<uuid>.jsonl, lines
// {timestamp, type, payload}) as prunesched events. It follows the schema
// documented in research-trace-formats.md §4 (CLI 0.60 to 0.146); no real
// rollout could be shipped, so it is tested on synthetic files.
//
// Context comes from response_item lines only: messages, reasoning,
// function_call / custom_tool_call (tool calls, ids from call_id) and their
// *_output (results). event_msg lines are the UI echo (agent_message,
// user_message, patch_apply_end with whole files, ...) and are ignored,
// except token_count: its last_token_usage is the usage of the latest model
// request, taken once (a token_count whose cumulative total_token_usage did
// not move repeats the previous one). A model request is emitted where the
// model's output begins (the first reasoning, assistant message or tool call
// after input). Tool failures are read from the output text ("Exit code: N",
// "Process exited with code N", "Script failed") or from the metadata JSON of
// apply_patch outputs. A compacted line is a host_compaction.
package codex

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/importers/internal/build"
	"github.com/prunesched/prunesched/internal/importers/internal/jsonl"
	"github.com/prunesched/prunesched/internal/toolspec"
)

// Format is the format name of Codex CLI rollouts.
const Format = "codex"

type line struct {
	Timestamp string          `json:"timestamp"`
	Type      string          `json:"type"`
	Payload   json.RawMessage `json:"payload"`
}

type sessionMeta struct {
	ID               string `json:"id"`
	SessionID        string `json:"session_id"`
	CWD              string `json:"cwd"`
	CLIVersion       string `json:"cli_version"`
	ModelProvider    string `json:"model_provider"`
	Instructions     any    `json:"instructions"`
	BaseInstructions *struct {
		Text string `json:"text"`
	} `json:"base_instructions"`
}

type item struct {
	Type             string          `json:"type"`
	ID               string          `json:"id"`
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	Summary          json.RawMessage `json:"summary"`
	EncryptedContent string          `json:"encrypted_content"`
	Name             string          `json:"name"`
	Namespace        string          `json:"namespace"`
	Arguments        json.RawMessage `json:"arguments"`
	Input            json.RawMessage `json:"input"`
	CallID           string          `json:"call_id"`
	Output           json.RawMessage `json:"output"`
	Action           json.RawMessage `json:"action"`
}

type tokenUsage struct {
	InputTokens           int `json:"input_tokens"`
	CachedInputTokens     int `json:"cached_input_tokens"`
	CacheWriteInputTokens int `json:"cache_write_input_tokens"`
	OutputTokens          int `json:"output_tokens"`
	TotalTokens           int `json:"total_tokens"`
}

type eventMsg struct {
	Type string `json:"type"`
	Info *struct {
		TotalTokenUsage *tokenUsage `json:"total_token_usage"`
		LastTokenUsage  *tokenUsage `json:"last_token_usage"`
	} `json:"info"`
}

// Import reads one Codex CLI rollout. name is used in error messages and as
// the session's source path. A rollout is one session.
func Import(r io.Reader, name string) ([]build.Session, error) {
	c := &converter{name: name, b: build.New(Format, name), calls: map[string][]*call{}}
	c.b.Started().Agent = "codex"
	err := jsonl.Each(r, name, func(n int, b []byte) error {
		if err := c.line(n, b); err != nil {
			return fmt.Errorf("%s:%d: %w", name, n, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s, err := c.b.Finish("codex-start")
	if err != nil {
		return nil, err
	}
	return []build.Session{s}, nil
}

type call struct {
	id, tool string
	input    json.RawMessage
	resolved bool
}

type converter struct {
	name  string
	b     *build.Builder
	calls map[string][]*call
	// req is the latest model request; inTurn is true while the model's
	// output continues (no input item since the request).
	req       *events.ModelRequest
	inTurn    bool
	model     string
	lastTotal *tokenUsage
	nreq      int
}

func (c *converter) line(n int, b []byte) error {
	if err := build.CheckText(b); err != nil {
		return err
	}
	var l line
	if err := json.Unmarshal(b, &l); err != nil {
		return build.FieldError(err, "")
	}
	var at time.Time
	if l.Timestamp != "" {
		t, err := time.Parse(time.RFC3339Nano, l.Timestamp)
		if err != nil {
			return fmt.Errorf("field %q: %w", "timestamp", err)
		}
		at = t.UTC()
		c.b.HintStart(at)
	}
	loc := fmt.Sprintf("%s:%d", c.name, n)
	k := 0
	add := func(p events.Payload) {
		c.b.Add(fmt.Sprintf("cx-%d-%d", n, k), at, loc, p)
		k++
	}
	switch l.Type {
	case "session_meta":
		var m sessionMeta
		if err := json.Unmarshal(l.Payload, &m); err != nil {
			return build.FieldError(err, "payload")
		}
		id := m.ID
		if id == "" {
			id = m.SessionID
		}
		c.b.SetSourceID(id)
		st := c.b.Started()
		if st.CWD == "" {
			st.CWD = m.CWD
		}
		if m.CLIVersion != "" {
			st.Agent = "codex/" + m.CLIVersion
		}
		if st.Provider == "" {
			st.Provider = m.ModelProvider
		}
		text := ""
		if s, ok := m.Instructions.(string); ok {
			text = s
		}
		if m.BaseInstructions != nil && m.BaseInstructions.Text != "" {
			text = m.BaseInstructions.Text
		}
		if text != "" {
			add(&events.Message{Item: c.b.Item(fmt.Sprintf("l%d-instructions", n)), Role: events.RoleSystem, Kind: events.KindText, Text: text})
		}
	case "turn_context":
		var tc struct {
			Model string `json:"model"`
			CWD   string `json:"cwd"`
		}
		if err := json.Unmarshal(l.Payload, &tc); err != nil {
			return build.FieldError(err, "payload")
		}
		if tc.Model != "" {
			c.model = tc.Model
			if st := c.b.Started(); st.Model == "" {
				st.Model = tc.Model
			}
		}
		if st := c.b.Started(); st.CWD == "" {
			st.CWD = tc.CWD
		}
	case "response_item":
		var it item
		if err := json.Unmarshal(l.Payload, &it); err != nil {
			return build.FieldError(err, "payload")
		}
		return c.item(n, &it, add)
	case "event_msg":
		var em eventMsg
		if err := json.Unmarshal(l.Payload, &em); err != nil {
			return build.FieldError(err, "payload")
		}
		if em.Type == "token_count" && em.Info != nil {
			c.tokenCount(em.Info.TotalTokenUsage, em.Info.LastTokenUsage)
		}
	case "compacted":
		var cp struct {
			Message string `json:"message"`
		}
		if err := json.Unmarshal(l.Payload, &cp); err != nil {
			return build.FieldError(err, "payload")
		}
		add(&events.HostCompaction{Host: Format, SourceID: fmt.Sprintf("line-%d", n)})
		if cp.Message != "" {
			add(&events.Message{Item: c.b.Item(fmt.Sprintf("l%d-summary", n)), Role: events.RoleUser, Kind: events.KindText, Text: cp.Message, Meta: true})
		}
		c.inTurn = false
	case "":
		return build.Missing("type")
	default:
		// world_state and future line types: not model context.
	}
	return nil
}

// tokenCount attaches a token_count report to the latest request, once.
func (c *converter) tokenCount(total, last *tokenUsage) {
	if total != nil && c.lastTotal != nil && *total == *c.lastTotal {
		return // a repeat of the previous report
	}
	u := last
	if u == nil && total != nil {
		d := *total
		if p := c.lastTotal; p != nil {
			d = tokenUsage{InputTokens: total.InputTokens - p.InputTokens, CachedInputTokens: total.CachedInputTokens - p.CachedInputTokens,
				CacheWriteInputTokens: total.CacheWriteInputTokens - p.CacheWriteInputTokens, OutputTokens: total.OutputTokens - p.OutputTokens}
		}
		u = &d
	}
	if total != nil {
		cp := *total
		c.lastTotal = &cp
	}
	if u == nil || c.req == nil || c.req.Usage != nil {
		return
	}
	c.req.Usage = events.OpenAIUsage(u.InputTokens, u.OutputTokens, u.CachedInputTokens, u.CacheWriteInputTokens)
}

// request emits a model request where the model's output begins.
func (c *converter) request(n int, add func(events.Payload)) {
	if c.inTurn {
		return
	}
	c.inTurn = true
	c.nreq++
	c.req = &events.ModelRequest{Request: c.b.Item(fmt.Sprintf("req-%d", c.nreq)), Model: c.model, Provider: c.b.Started().Provider, SourceID: fmt.Sprintf("line-%d", n)}
	add(c.req)
}

func (c *converter) item(n int, it *item, add func(events.Payload)) error {
	itemID := func(suffix string) string {
		if it.ID != "" {
			return c.b.Item(it.ID)
		}
		return c.b.Item(fmt.Sprintf("l%d%s", n, suffix))
	}
	switch it.Type {
	case "message":
		text, err := build.ChatText(it.Content)
		if err != nil {
			return fmt.Errorf("field %q: %w", "payload.content", err)
		}
		switch it.Role {
		case "assistant":
			c.request(n, add)
			add(&events.Message{Item: itemID(""), Role: events.RoleAssistant, Kind: events.KindText, Text: text})
		case "user":
			c.inTurn = false
			add(&events.Message{Item: itemID(""), Role: events.RoleUser, Kind: events.KindText, Text: text, Meta: isMeta(text)})
		case "developer", "system":
			c.inTurn = false
			add(&events.Message{Item: itemID(""), Role: events.RoleSystem, Kind: events.KindText, Text: text})
		case "":
			return build.Missing("payload.role")
		default:
			return fmt.Errorf("field %q: bad value %q (want user, assistant, developer or system)", "payload.role", it.Role)
		}
	case "reasoning":
		c.request(n, add)
		text, err := build.ChatText(it.Summary)
		if err != nil {
			return fmt.Errorf("field %q: %w", "payload.summary", err)
		}
		if text == "" && it.EncryptedContent == "" {
			return nil
		}
		add(&events.Message{Item: itemID(""), Role: events.RoleAssistant, Kind: events.KindThinking, Text: text, Signature: it.EncryptedContent})
	case "function_call", "custom_tool_call", "local_shell_call":
		c.request(n, add)
		if it.CallID == "" {
			return build.Missing("payload.call_id")
		}
		tool := it.Name
		var input json.RawMessage
		switch it.Type {
		case "function_call":
			s, err := build.Text(it.Arguments)
			if err != nil {
				return fmt.Errorf("field %q: %w", "payload.arguments", err)
			}
			input = json.RawMessage(s)
			if !json.Valid(input) {
				input, _ = json.Marshal(s)
			}
		case "custom_tool_call":
			s, err := build.Text(it.Input)
			if err != nil {
				return fmt.Errorf("field %q: %w", "payload.input", err)
			}
			input, _ = json.Marshal(s) // free text: a patch, or JavaScript
		default:
			tool = "local_shell"
			input = it.Action
		}
		if tool == "" {
			return build.Missing("payload.name")
		}
		cl := &call{id: c.b.Call(it.CallID), tool: tool, input: build.Input(input)}
		c.calls[it.CallID] = append(c.calls[it.CallID], cl)
		add(&events.ToolCall{Item: events.CallInputItem(cl.id), CallID: cl.id, Tool: cl.tool, Input: cl.input})
	case "function_call_output", "custom_tool_call_output", "local_shell_call_output":
		c.inTurn = false
		if it.CallID == "" {
			return build.Missing("payload.call_id")
		}
		out, err := outputText(it.Output)
		if err != nil {
			return fmt.Errorf("field %q: %w", "payload.output", err)
		}
		var cl *call
		for _, cand := range c.calls[it.CallID] {
			if !cand.resolved {
				cl = cand
				break
			}
		}
		if cl == nil {
			cl = &call{id: c.b.Call(it.CallID), input: json.RawMessage("{}")}
		}
		cl.resolved = true
		add(result(cl, out))
	default:
		// web_search_call, image generation and future item types: the
		// schema gives them no context text we can rely on.
	}
	return nil
}

// outputText renders a tool output: a string, a list of input_text parts,
// or an object with content/output (older shapes).
func outputText(raw json.RawMessage) (string, error) {
	c := bytes.TrimSpace(raw)
	if len(c) > 0 && c[0] == '{' {
		var o struct {
			Content json.RawMessage `json:"content"`
			Output  json.RawMessage `json:"output"`
		}
		if err := json.Unmarshal(c, &o); err != nil {
			return "", build.FieldError(err, "")
		}
		if o.Content != nil {
			return build.ChatText(o.Content)
		}
		return build.ChatText(o.Output)
	}
	return build.ChatText(c)
}

var exitRe = regexp.MustCompile(`(?m)^(?:Exit code:|Process exited with code) (-?\d+)`)

// result builds a tool result, reading the exit status from the text.
func result(cl *call, out string) *events.ToolResult {
	res := &events.ToolResult{Item: cl.id, CallID: cl.id, Tool: cl.tool, Output: &out, Source: source(cl.tool, cl.input)}
	code, ok := 0, false
	if m := exitRe.FindStringSubmatch(out); m != nil {
		if v, err := strconv.Atoi(m[1]); err == nil {
			code, ok = v, true
		}
	} else if strings.HasPrefix(strings.TrimSpace(out), "{") {
		// apply_patch in 0.60: {"output": ..., "metadata": {"exit_code": N}}.
		var j struct {
			Output   string `json:"output"`
			Metadata *struct {
				ExitCode *int `json:"exit_code"`
			} `json:"metadata"`
		}
		if json.Unmarshal([]byte(out), &j) == nil && j.Metadata != nil && j.Metadata.ExitCode != nil {
			code, ok = *j.Metadata.ExitCode, true
		}
	}
	if ok {
		res.ExitCode = &code
		if code != 0 {
			res.IsError = true
			res.Error = &events.ToolError{Type: "exit_code", Message: errMessage(out, code)}
		}
	}
	if strings.HasPrefix(strings.TrimSpace(out), "Script failed") {
		res.IsError = true
		res.Error = &events.ToolError{Type: "script_failed", Message: build.ErrorSummary(out)}
	}
	return res
}

func errMessage(out string, code int) string {
	if _, rest, ok := strings.Cut(out, "Output:\n"); ok {
		if msg := build.ErrorSummary(rest); msg != "" {
			return msg
		}
	}
	if msg := build.ErrorSummary(out); msg != "" {
		return msg
	}
	return fmt.Sprintf("exit code %d", code)
}

// source names what a call observed: shell tools and code-mode exec
// snippets that run one command are classified by the shell classifier.
func source(tool string, input json.RawMessage) *events.SourceIdentity {
	switch tool {
	case "exec":
		cmds := toolspec.ExecCommands(input)
		if len(cmds) == 1 {
			return toolspec.ShellSource(cmds[0])
		}
		if len(cmds) > 1 {
			return &events.SourceIdentity{Kind: "command"}
		}
		return nil
	case "apply_patch", "update_plan", "wait", "write_stdin", "view_image":
		return nil
	}
	return toolspec.ShellSource(toolspec.CommandOf(build.InputMap(input)))
}

// isMeta reports harness-injected user text (environment context, AGENTS.md
// instructions) rather than the person's words.
func isMeta(s string) bool {
	s = strings.TrimLeft(s, " \t\r\n")
	for _, p := range [...]string{"<environment_context>", "<user_instructions>", "# AGENTS.md instructions", "<turn_aborted>", "<user_shell_command>"} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
