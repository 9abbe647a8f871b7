// Package openhands imports OpenHands event lists (the V0 trajectory /
// replay format: a JSON array of events, each an action or an observation)
// as prunesched events.
//
// A user or agent "message" action is a message. An agent action with
// tool_call_metadata is a tool call of tool_call_metadata.function_name
// (id tool_call_id, input the arguments the model wrote, read from the
// LiteLLM response), preceded by one model_request per distinct model
// response (usage read once: OpenHands copies the whole response onto every
// action of it and onto each observation) and the action's thought. An
// observation whose cause is a call's action id is that call's result
// (content only: extras such as old_content/new_content are display copies),
// with the exit code from extras.metadata.exit_code. State changes, null
// observations and other bookkeeping events are not model context.
package openhands

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/importers/internal/build"
	"github.com/prunesched/prunesched/internal/toolspec"
)

// Format is the format name of OpenHands event lists.
const Format = "openhands"

type event struct {
	ID               json.RawMessage `json:"id"`
	Timestamp        string          `json:"timestamp"`
	Source           string          `json:"source"`
	Action           string          `json:"action"`
	Observation      string          `json:"observation"`
	Args             json.RawMessage `json:"args"`
	Content          json.RawMessage `json:"content"`
	Extras           json.RawMessage `json:"extras"`
	Cause            json.RawMessage `json:"cause"`
	Success          *bool           `json:"success"`
	ToolCallMetadata *toolCallMeta   `json:"tool_call_metadata"`
	Kind             string          `json:"kind"`
}

type toolCallMeta struct {
	FunctionName  string         `json:"function_name"`
	ToolCallID    string         `json:"tool_call_id"`
	ModelResponse *modelResponse `json:"model_response"`
}

type modelResponse struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			ToolCalls []struct {
				ID       string `json:"id"`
				Function struct {
					Arguments json.RawMessage `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
}

type usage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens *int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CacheReadInputTokens     *int `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int  `json:"cache_creation_input_tokens"`
}

// Import reads one OpenHands event list. name is used in error messages and
// as the session's source path. An event list is one session.
func Import(r io.Reader, name string) ([]build.Session, error) {
	return build.ImportJSON(r, name, nil, func(name string, raws *[]json.RawMessage) (build.Session, error) {
		return convert(name, *raws)
	})
}

type pending struct {
	id, tool string
	input    json.RawMessage
	args     map[string]any
	action   string
}

func convert(name string, raws []json.RawMessage) (build.Session, error) {
	b := build.New(Format, name)
	st := b.Started()
	st.Agent = "openhands"
	base := strings.TrimSuffix(name[strings.LastIndexAny(name, `/\`)+1:], ".json")
	b.SetSourceID(base)
	calls := map[string]*pending{} // by action id
	responses := map[string]bool{}
	for i, raw := range raws {
		path := fmt.Sprintf("[%d]", i)
		loc := name + ": " + path
		var e event
		dec := json.NewDecoder(bytes.NewReader(raw))
		if err := dec.Decode(&e); err != nil {
			return build.Session{}, build.Locate(name, nil, path, err)
		}
		if e.Kind != "" && e.Action == "" && e.Observation == "" {
			return build.Session{}, fmt.Errorf("%s: field %q: OpenHands V1 SDK events are not supported (want the V0 event list)", loc, "kind")
		}
		var at time.Time
		if e.Timestamp != "" {
			t, err := parseTime(e.Timestamp)
			if err != nil {
				return build.Session{}, fmt.Errorf("%s: field %q: %w", loc, "timestamp", err)
			}
			at = t
			b.HintStart(t)
		}
		k := 0
		add := func(p events.Payload) {
			b.Add(fmt.Sprintf("oh-%d-%d", i, k), at, loc, p)
			k++
		}
		idStr := idString(e.ID)
		if idStr == "" {
			idStr = fmt.Sprintf("i%d", i)
		}
		args := build.InputMap(e.Args)
		switch {
		case e.Action != "" && e.ToolCallMetadata != nil:
			tm := e.ToolCallMetadata
			first := true
			if r := tm.ModelResponse; r != nil {
				key := r.ID
				if key == "" {
					key = "resp-" + idStr
				}
				first = !responses[key]
				if first {
					responses[key] = true
					mr := &events.ModelRequest{Request: b.Item(key), Model: r.Model, SourceID: r.ID}
					if u := r.Usage; u != nil {
						read := 0
						switch {
						case u.CacheReadInputTokens != nil:
							read = *u.CacheReadInputTokens
						case u.PromptTokensDetails != nil && u.PromptTokensDetails.CachedTokens != nil:
							read = *u.PromptTokensDetails.CachedTokens
						}
						mr.Usage = events.OpenAIUsage(u.PromptTokens, u.CompletionTokens, read, u.CacheCreationInputTokens)
					}
					if st.Model == "" {
						st.Model = r.Model
					}
					add(mr)
				}
			}
			if th := build.Str(args["thought"]); th != "" && first {
				add(&events.Message{Item: b.Item("e" + idStr + "/thought"), Role: events.RoleAssistant, Kind: events.KindText, Text: th})
			}
			if e.Action == "message" {
				add(&events.Message{Item: b.Item("e" + idStr), Role: events.RoleAssistant, Kind: events.KindText, Text: build.Str(args["content"])})
				continue
			}
			tool := tm.FunctionName
			if tool == "" {
				tool = e.Action
			}
			cid := tm.ToolCallID
			if cid == "" {
				cid = "a" + idStr
			}
			p := &pending{id: b.Call(cid), tool: tool, input: modelArguments(tm, e.Args), args: args, action: e.Action}
			calls[idStr] = p
			add(&events.ToolCall{Item: events.CallInputItem(p.id), CallID: p.id, Tool: p.tool, Input: p.input})
		case e.Action == "message":
			role := events.RoleUser
			if e.Source == "agent" {
				role = events.RoleAssistant
			}
			add(&events.Message{Item: b.Item("e" + idStr), Role: role, Kind: events.KindText, Text: build.Str(args["content"])})
		case e.Action == "system":
			add(&events.Message{Item: b.Item("e" + idStr), Role: events.RoleSystem, Kind: events.KindText, Text: build.Str(args["content"])})
		case e.Observation != "":
			cause := idString(e.Cause)
			p := calls[cause]
			if p == nil || cause == "" {
				continue // state changes, null observations: not model context
			}
			delete(calls, cause)
			res, err := result(p, &e)
			if err != nil {
				return build.Session{}, fmt.Errorf("%s: %w", loc, err)
			}
			add(res)
		}
	}
	return b.Finish("oh-start")
}

// modelArguments returns the arguments the model wrote for the call (from
// the LiteLLM response), else the action's args without OpenHands' own
// bookkeeping keys.
func modelArguments(tm *toolCallMeta, args json.RawMessage) json.RawMessage {
	if r := tm.ModelResponse; r != nil {
		for _, ch := range r.Choices {
			for _, tc := range ch.Message.ToolCalls {
				if tc.ID != tm.ToolCallID {
					continue
				}
				s, err := build.Text(tc.Function.Arguments)
				if err == nil && json.Valid([]byte(s)) {
					return build.Input(json.RawMessage(s))
				}
			}
		}
	}
	m := build.InputMap(args)
	for _, k := range []string{"thought", "impl_source", "translated_ipython_code", "security_risk", "confirmation_state", "is_confirmed", "hidden", "blocking"} {
		delete(m, k)
	}
	out, err := json.Marshal(m)
	if err != nil {
		return json.RawMessage("{}")
	}
	return out
}

func result(p *pending, e *event) (*events.ToolResult, error) {
	out, err := build.Text(e.Content)
	if err != nil {
		return nil, fmt.Errorf("field %q: %w", "content", err)
	}
	res := &events.ToolResult{Item: p.id, CallID: p.id, Tool: p.tool, Output: &out}
	var extras struct {
		Path     string `json:"path"`
		Metadata *struct {
			ExitCode *int `json:"exit_code"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(e.Extras, &extras)
	switch {
	case e.Observation == "run" || p.action == "run":
		res.Source = toolspec.ShellSource(build.Str(p.args["command"]))
	case e.Observation == "read" || p.action == "read":
		path := extras.Path
		if path == "" {
			path = build.Str(p.args["path"])
		}
		if path != "" {
			kind := "file"
			if strings.HasPrefix(out, "Here's the files and directories") {
				kind = "search"
			}
			res.Source = &events.SourceIdentity{Kind: kind, Path: path}
		}
	}
	if md := extras.Metadata; md != nil && md.ExitCode != nil {
		code := *md.ExitCode
		res.ExitCode = &code
		if code != 0 {
			res.IsError = true
			typ := "exit_code"
			if code == -1 {
				typ = "no_exit" // still running or timed out
			}
			msg := build.ErrorSummary(out)
			if msg == "" {
				msg = fmt.Sprintf("exit code %d", code)
			}
			res.Error = &events.ToolError{Type: typ, Message: msg}
		}
	}
	if e.Observation == "error" || e.Success != nil && !*e.Success && !res.IsError {
		res.IsError = true
		msg := build.ErrorSummary(out)
		if msg == "" {
			msg = "error"
		}
		res.Error = &events.ToolError{Type: "tool_error", Message: msg}
	}
	return res, nil
}

// parseTime reads OpenHands' ISO timestamps, which carry no zone (UTC).
func parseTime(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02T15:04:05"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("bad time %q", s)
}

// idString renders an event id or cause, a number or a string; anything
// else gives "".
func idString(raw json.RawMessage) string {
	t := strings.TrimSpace(string(raw))
	if t == "" || t == "null" {
		return ""
	}
	if t[0] == '"' {
		var s string
		if json.Unmarshal([]byte(t), &s) != nil {
			return ""
		}
		return s
	}
	var n json.Number
	if json.Unmarshal([]byte(t), &n) != nil {
		return ""
	}
	return n.String()
}
