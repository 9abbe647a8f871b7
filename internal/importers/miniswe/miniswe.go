// Package miniswe imports mini-swe-agent trajectories (the .traj.json files,
// trajectory_format "mini-swe-agent-1.1" with tool calls, and the older
// "mini-swe-agent-1" with the command in a fenced block) as prunesched
// events.
//
// messages[] is what the model saw. Each assistant message is one model
// request: its usage comes from extra.response.usage, read once per message
// (extra.response repeats the turn's text and tool calls, which are taken
// from the message itself, never from the copy). Each tool call (always
// bash) keeps its tool_call id; its result is the following tool message's
// content (the wrapped <returncode>/<output> text the model saw, not the
// extra.raw_output copy), with the exit code from extra.returncode and the
// source the shell classifier recognises. The final "exit" message carries
// the submission for the harness and is not model context.
package miniswe

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/importers/internal/build"
	"github.com/prunesched/prunesched/internal/toolspec"
)

// Format is the format name of mini-swe-agent trajectories.
const Format = "mini-swe-agent"

type trajectory struct {
	TrajectoryFormat string            `json:"trajectory_format"`
	InstanceID       string            `json:"instance_id"`
	Info             *info             `json:"info"`
	Messages         []json.RawMessage `json:"messages"`
}

type info struct {
	MiniVersion string `json:"mini_version"`
}

type message struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []toolCall      `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
	Extra      *extra          `json:"extra"`
}

type toolCall struct {
	ID       string `json:"id"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

type extra struct {
	Timestamp     *float64        `json:"timestamp"`
	Returncode    json.RawMessage `json:"returncode"`
	ExceptionInfo json.RawMessage `json:"exception_info"`
	Response      *response       `json:"response"`
	Actions       []struct {
		Command    string `json:"command"`
		ToolCallID string `json:"tool_call_id"`
	} `json:"actions"`
}

type response struct {
	ID      string   `json:"id"`
	Model   string   `json:"model"`
	Created *float64 `json:"created"`
	Usage   *usage   `json:"usage"`
}

// usage is an OpenAI-convention usage report as LiteLLM returns it; the
// cache fields depend on the provider.
type usage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens *int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	PromptCacheHitTokens     *int `json:"prompt_cache_hit_tokens"`
	CacheReadInputTokens     *int `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int  `json:"cache_creation_input_tokens"`
}

// events converts a LiteLLM usage report (prompt tokens include cached
// tokens): cache reads are prompt_cache_hit_tokens (DeepSeek), else
// cache_read_input_tokens (Anthropic), else prompt_tokens_details.cached_tokens
// (OpenAI); cache writes are cache_creation_input_tokens.
func (u *usage) events() *events.Usage {
	read := 0
	switch {
	case u.PromptCacheHitTokens != nil:
		read = *u.PromptCacheHitTokens
	case u.CacheReadInputTokens != nil:
		read = *u.CacheReadInputTokens
	case u.PromptTokensDetails != nil && u.PromptTokensDetails.CachedTokens != nil:
		read = *u.PromptTokensDetails.CachedTokens
	}
	return events.OpenAIUsage(u.PromptTokens, u.CompletionTokens, read, u.CacheCreationInputTokens)
}

// Import reads one mini-swe-agent trajectory. name is used in error
// messages and as the session's source path. A trajectory is one session.
func Import(r io.Reader, name string) ([]build.Session, error) {
	return build.ImportJSON(r, name, func(tr *trajectory) string {
		if tr.Messages == nil {
			return "messages"
		}
		return ""
	}, convert)
}

// pending is a tool call waiting for its result.
type pending struct {
	id      string
	command string
}

type converter struct {
	name  string
	b     *build.Builder
	calls map[string][]*pending // by source tool_call id, in order
	// fenced is the call of a 1.x assistant message (command in a fenced
	// block), answered by the next user message.
	fenced *pending
}

func convert(name string, tr *trajectory) (build.Session, error) {
	c := &converter{name: name, b: build.New(Format, name), calls: map[string][]*pending{}}
	c.b.SetSourceID(tr.InstanceID)
	st := c.b.Started()
	st.Agent = "mini-swe-agent"
	if tr.Info != nil && tr.Info.MiniVersion != "" {
		st.Agent += "/" + tr.Info.MiniVersion
	}
	st.Title = tr.InstanceID
	for i, raw := range tr.Messages {
		path := fmt.Sprintf("messages[%d]", i)
		var m message
		if err := json.Unmarshal(raw, &m); err != nil {
			return build.Session{}, build.Locate(name, nil, path, err)
		}
		if err := c.message(i, path, &m); err != nil {
			return build.Session{}, fmt.Errorf("%s: %s: %w", name, path, err)
		}
	}
	return c.b.Finish("mini-start")
}

var fenceRe = regexp.MustCompile("(?s)```(?:bash|sh|shell)?[ \t]*\n(.*?)\n?```")

func (c *converter) message(i int, path string, m *message) error {
	text, err := build.ChatText(m.Content)
	if err != nil {
		return fmt.Errorf("field %q: %w", "content", err)
	}
	loc := c.name + ": " + path
	at := eventTime(m.Extra)
	k := 0
	add := func(p events.Payload) {
		c.b.Add(fmt.Sprintf("mini-%d-%d", i, k), at, loc, p)
		k++
	}
	switch m.Role {
	case "system":
		add(&events.Message{Item: c.b.Item(fmt.Sprintf("m%d", i)), Role: events.RoleSystem, Kind: events.KindText, Text: text})
	case "user":
		if c.fenced != nil && strings.HasPrefix(strings.TrimSpace(text), "<returncode>") {
			p := c.fenced
			c.fenced = nil
			add(result(p, text, m.Extra))
			return nil
		}
		add(&events.Message{Item: c.b.Item(fmt.Sprintf("m%d", i)), Role: events.RoleUser, Kind: events.KindText, Text: text})
	case "assistant":
		add(c.request(i, m.Extra))
		if text != "" {
			add(&events.Message{Item: c.b.Item(fmt.Sprintf("m%d", i)), Role: events.RoleAssistant, Kind: events.KindText, Text: text})
		}
		for j, tc := range m.ToolCalls {
			if tc.ID == "" {
				return build.Missing(fmt.Sprintf("tool_calls[%d].id", j))
			}
			tool := tc.Function.Name
			if tool == "" {
				tool = "bash"
			}
			args, err := build.Text(tc.Function.Arguments)
			if err != nil {
				return fmt.Errorf("field %q: %w", fmt.Sprintf("tool_calls[%d].function.arguments", j), err)
			}
			input := json.RawMessage(args)
			if !json.Valid(input) {
				// Arguments the model wrote that are not JSON: kept as text.
				input, _ = json.Marshal(args)
			}
			input = build.Input(input)
			p := &pending{id: c.b.Call(tc.ID), command: build.Str(build.InputMap(input)["command"])}
			c.calls[tc.ID] = append(c.calls[tc.ID], p)
			add(&events.ToolCall{Item: events.CallInputItem(p.id), CallID: p.id, Tool: tool, Input: input})
		}
		if len(m.ToolCalls) == 0 {
			// mini-swe-agent 1.x: the action is a fenced block in the text.
			if f := fenceRe.FindStringSubmatch(text); f != nil {
				cmd := f[1]
				input, _ := json.Marshal(map[string]string{"command": cmd})
				p := &pending{id: c.b.Call(fmt.Sprintf("step-%d", i)), command: cmd}
				c.fenced = p
				add(&events.ToolCall{Item: events.CallInputItem(p.id), CallID: p.id, Tool: "bash", Input: input})
			}
		}
	case "tool":
		var p *pending
		if q := c.calls[m.ToolCallID]; len(q) > 0 {
			p, c.calls[m.ToolCallID] = q[0], q[1:]
		}
		if p == nil {
			if m.ToolCallID == "" {
				return build.Missing("tool_call_id")
			}
			// A result whose call is not in the file: kept under its id.
			p = &pending{id: c.b.Call(m.ToolCallID)}
		}
		add(result(p, text, m.Extra))
	case "exit":
		// The submission, for the harness: not model context.
	case "":
		return build.Missing("role")
	default:
		return fmt.Errorf("field %q: bad value %q (want system, user, assistant, tool or exit)", "role", m.Role)
	}
	return nil
}

func (c *converter) request(i int, x *extra) *events.ModelRequest {
	mr := &events.ModelRequest{Request: c.b.Item(fmt.Sprintf("req-%d", i))}
	if x == nil || x.Response == nil {
		return mr
	}
	r := x.Response
	if r.ID != "" {
		mr.SourceID = r.ID
	}
	mr.Model = r.Model
	if st := c.b.Started(); st.Model == "" {
		st.Model = r.Model
	}
	if r.Usage != nil {
		mr.Usage = r.Usage.events()
	}
	return mr
}

var returncodeRe = regexp.MustCompile(`^\s*<returncode>(-?\d+)</returncode>`)

// result builds a tool result: the exit code from extra.returncode, else
// from the <returncode> the model saw; extra.exception_info (a timeout, a
// format error) makes it an error too.
func result(p *pending, text string, x *extra) *events.ToolResult {
	out := text
	res := &events.ToolResult{Item: p.id, CallID: p.id, Tool: "bash", Output: &out, Source: toolspec.ShellSource(p.command)}
	code, ok := 0, false
	if x != nil {
		code, ok = intValue(x.Returncode)
	}
	if !ok {
		if m := returncodeRe.FindStringSubmatch(text); m != nil {
			code, ok = atoi(m[1])
		}
	}
	if ok {
		res.ExitCode = &code
		if code != 0 {
			res.IsError = true
			res.Error = &events.ToolError{Type: "exit_code", Message: summary(text, code)}
		}
	}
	if x != nil {
		if exc, _ := build.Text(x.ExceptionInfo); strings.TrimSpace(exc) != "" {
			res.IsError = true
			res.Error = &events.ToolError{Type: "exception", Message: build.ErrorSummary(exc)}
		}
	}
	return res
}

var wrapRe = regexp.MustCompile(`</?(returncode|output|warning|output_head|output_tail|elided_chars)>`)

func summary(text string, code int) string {
	msg := build.ErrorSummary(strings.TrimSpace(returncodeRe.ReplaceAllString(text, "")))
	msg = strings.TrimSpace(wrapRe.ReplaceAllString(msg, ""))
	if msg == "" {
		msg = fmt.Sprintf("exit code %d", code)
	}
	return msg
}

// intValue reads an integer that may be written as a number or a string.
func intValue(raw json.RawMessage) (int, bool) {
	s, err := build.Text(raw)
	if err != nil || s == "" {
		return 0, false
	}
	return atoi(strings.Trim(s, `"`))
}

func atoi(s string) (int, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
	if err != nil {
		return 0, false
	}
	return int(n), true
}

func eventTime(x *extra) (t time.Time) {
	if x == nil {
		return t
	}
	if x.Timestamp != nil {
		return build.EpochSeconds(x.Timestamp)
	}
	if x.Response != nil {
		return build.EpochSeconds(x.Response.Created)
	}
	return t
}
