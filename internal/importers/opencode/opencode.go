// Package opencode imports OpenCode session exports (the JSON object
// `opencode export <sessionID>` prints: {info, messages[]}) as prunesched
// events.
//
// Each assistant message is one model step: it becomes one model_request
// (usage from the message's tokens) followed by its reasoning, text and tool
// calls, then the results of those calls. Tool parts OpenCode had already
// pruned itself (state.time.compacted) are marked HostPruned.
package opencode

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

// Format is the format name of OpenCode exports.
const Format = "opencode"

type export struct {
	Info     *sessionInfo      `json:"info"`
	Messages []json.RawMessage `json:"messages"`
}

type sessionInfo struct {
	ID        string `json:"id"`
	Directory string `json:"directory"`
	Title     string `json:"title"`
	Version   string `json:"version"`
	Time      struct {
		Created *int64 `json:"created"`
	} `json:"time"`
	Model *struct {
		ID         string `json:"id"`
		ProviderID string `json:"providerID"`
	} `json:"model"`
}

type message struct {
	Info  *messageInfo      `json:"info"`
	Parts []json.RawMessage `json:"parts"`
}

type messageInfo struct {
	ID   string `json:"id"`
	Role string `json:"role"`
	Time struct {
		Created *int64 `json:"created"`
	} `json:"time"`
	ModelID    string `json:"modelID"`
	ProviderID string `json:"providerID"`
	Model      *struct {
		ProviderID string `json:"providerID"`
		ModelID    string `json:"modelID"`
	} `json:"model"`
	Path *struct {
		CWD string `json:"cwd"`
	} `json:"path"`
	Tokens *struct {
		Input  int `json:"input"`
		Output int `json:"output"`
		Cache  *struct {
			Read  int `json:"read"`
			Write int `json:"write"`
		} `json:"cache"`
	} `json:"tokens"`
}

type part struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Text      string `json:"text"`
	Synthetic bool   `json:"synthetic"`
	Time      *struct {
		Start *int64 `json:"start"`
	} `json:"time"`
	CallID string `json:"callID"`
	Tool   string `json:"tool"`
	State  *state `json:"state"`
}

type state struct {
	Status   string          `json:"status"`
	Input    json.RawMessage `json:"input"`
	Output   json.RawMessage `json:"output"`
	Error    json.RawMessage `json:"error"`
	Metadata json.RawMessage `json:"metadata"`
	Time     *struct {
		Start     *int64 `json:"start"`
		End       *int64 `json:"end"`
		Compacted *int64 `json:"compacted"`
	} `json:"time"`
}

// Import reads one OpenCode export. name is used in error messages and as
// the session's source path. An export is one session.
func Import(r io.Reader, name string) ([]build.Session, error) {
	return build.ImportJSON(r, name, func(ex *export) string {
		switch {
		case ex.Info == nil:
			return "info"
		case ex.Messages == nil:
			return "messages"
		}
		return ""
	}, convert)
}

// ms converts epoch milliseconds; nil gives the zero time (the builder then
// reuses the previous event's time).
func ms(v *int64) time.Time {
	if v == nil {
		return time.Time{}
	}
	return time.UnixMilli(*v).UTC()
}

// pendingResult is a tool result held back until the end of its message:
// the model sees all of a step's results after the step.
type pendingResult struct {
	id  string
	at  time.Time
	loc string
	res *events.ToolResult
}

func convert(name string, ex *export) (build.Session, error) {
	b := build.New(Format, name)
	info := ex.Info
	b.SetSourceID(info.ID)
	b.HintStart(ms(info.Time.Created))
	st := b.Started()
	st.CWD = info.Directory
	st.Title = info.Title
	st.Agent = "opencode"
	if info.Version != "" {
		st.Agent = "opencode/" + info.Version
	}
	if info.Model != nil {
		st.Provider, st.Model = info.Model.ProviderID, info.Model.ID
	}
	for mi, raw := range ex.Messages {
		path := fmt.Sprintf("messages[%d]", mi)
		var m message
		if err := json.Unmarshal(raw, &m); err != nil {
			return build.Session{}, build.Locate(name, nil, path, err)
		}
		if m.Info == nil {
			return build.Session{}, fmt.Errorf("%s: %s: %w", name, path, build.Missing("info"))
		}
		if err := convertMessage(b, name, path, mi, &m); err != nil {
			return build.Session{}, err
		}
	}
	return b.Finish("oc-start")
}

func convertMessage(b *build.Builder, name, path string, mi int, m *message) error {
	mInfo := m.Info
	st := b.Started()
	var role events.Role
	switch mInfo.Role {
	case "user":
		role = events.RoleUser
		if st.Model == "" && mInfo.Model != nil {
			st.Provider, st.Model = mInfo.Model.ProviderID, mInfo.Model.ModelID
		}
	case "assistant":
		role = events.RoleAssistant
		if st.Model == "" {
			st.Provider, st.Model = mInfo.ProviderID, mInfo.ModelID
		}
		if st.CWD == "" && mInfo.Path != nil {
			st.CWD = mInfo.Path.CWD
		}
	case "":
		return fmt.Errorf("%s: %s: %w", name, path, build.Missing("info.role"))
	default:
		return fmt.Errorf("%s: %s: field %q: bad value %q (want user or assistant)", name, path, "info.role", mInfo.Role)
	}
	created := ms(mInfo.Time.Created)
	loc := name + ": " + path
	if role == events.RoleAssistant {
		b.Add(fmt.Sprintf("oc-%d-req", mi), created, loc, request(mInfo, mi))
	}
	cwd := st.CWD
	if mInfo.Path != nil && mInfo.Path.CWD != "" {
		cwd = mInfo.Path.CWD
	}
	var results []pendingResult
	for pi, raw := range m.Parts {
		ppath := fmt.Sprintf("%s.parts[%d]", path, pi)
		ploc := name + ": " + ppath
		var p part
		if err := json.Unmarshal(raw, &p); err != nil {
			return build.Locate(name, nil, ppath, err)
		}
		id := func(n int) string { return fmt.Sprintf("oc-%d-%d-%d", mi, pi, n) }
		itemBase := p.ID
		if itemBase == "" {
			itemBase = fmt.Sprintf("oc-%d-%d", mi, pi)
		}
		at := created
		if p.Time != nil && p.Time.Start != nil {
			at = ms(p.Time.Start)
		}
		switch p.Type {
		case "":
			return fmt.Errorf("%s: %w", ploc, build.Missing("type"))
		case "text":
			if p.Text == "" {
				continue
			}
			b.Add(id(0), at, ploc, &events.Message{Item: b.Item(itemBase), Role: role, Kind: events.KindText, Text: p.Text, Meta: p.Synthetic})
		case "reasoning":
			if p.Text == "" || role != events.RoleAssistant {
				continue
			}
			b.Add(id(0), at, ploc, &events.Message{Item: b.Item(itemBase), Role: role, Kind: events.KindThinking, Text: p.Text})
		case "tool":
			pr, err := toolPart(b, &p, ploc, id, cwd)
			if err != nil {
				return fmt.Errorf("%s: %w", ploc, err)
			}
			if pr != nil {
				results = append(results, *pr)
			}
		default:
			// step-start, step-finish, patch, file, agent, compaction and
			// future part types carry no model context of their own.
		}
	}
	for _, r := range results {
		b.Add(r.id, r.at, r.loc, r.res)
	}
	return nil
}

// request is the model_request of one assistant message (one model step).
func request(mInfo *messageInfo, mi int) *events.ModelRequest {
	req := mInfo.ID
	if req == "" {
		req = fmt.Sprintf("oc-msg-%d", mi)
	}
	mr := &events.ModelRequest{Request: build.SanitizeID(req), Provider: mInfo.ProviderID, Model: mInfo.ModelID, SourceID: mInfo.ID}
	if t := mInfo.Tokens; t != nil {
		u := &events.Usage{InputTokens: t.Input, OutputTokens: t.Output}
		if t.Cache != nil {
			u.CacheReadTokens, u.CacheWriteTokens = t.Cache.Read, t.Cache.Write
		}
		mr.Usage = u
		if mInfo.ProviderID == "anthropic" && u.CacheWriteTokens > 0 {
			mr.CacheTTL = "5m"
		}
	}
	return mr
}

// toolPart emits the tool call now and returns its result (if the call has
// finished) to be emitted after the message's other parts.
func toolPart(b *build.Builder, p *part, loc string, id func(int) string, cwd string) (*pendingResult, error) {
	if p.CallID == "" {
		return nil, build.Missing("callID")
	}
	if p.Tool == "" {
		return nil, build.Missing("tool")
	}
	if p.State == nil {
		return nil, build.Missing("state")
	}
	s := p.State
	var start, end time.Time
	if s.Time != nil {
		start, end = ms(s.Time.Start), ms(s.Time.End)
	}
	cid := b.Call(p.CallID)
	input := build.Input(s.Input)
	b.Add(id(0), start, loc, &events.ToolCall{Item: events.CallInputItem(cid), CallID: cid, Tool: p.Tool, Input: input})

	res := &events.ToolResult{Item: cid, CallID: cid, Tool: p.Tool, Source: toolspec.ToolSource(p.Tool, input, cwd), HostPruned: s.Time != nil && s.Time.Compacted != nil}
	switch s.Status {
	case "completed":
		out, err := text(s.Output)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", "state.output", err)
		}
		res.Output = &out
		if p.Tool == "bash" {
			if code, ok := exitCode(s.Metadata); ok {
				res.ExitCode = &code
				if code != 0 {
					res.IsError = true
					msg := build.ErrorSummary(out)
					if msg == "" {
						msg = fmt.Sprintf("exit code %d", code)
					}
					res.Error = &events.ToolError{Type: "exit_code", Message: msg}
				}
			}
		}
	case "error":
		msg, err := text(s.Error)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", "state.error", err)
		}
		res.Output = &msg
		res.IsError = true
		res.Error = &events.ToolError{Type: errorType(msg), Message: build.ErrorSummary(msg)}
	default:
		// pending, running (live exports) or unknown: the call has no
		// result yet.
		return nil, nil
	}
	if end.IsZero() {
		end = start
	}
	return &pendingResult{id: id(1), at: end, loc: loc, res: res}, nil
}

// text reads a string field; a non-string value is kept as its JSON text.
func text(raw json.RawMessage) (string, error) {
	c := bytes.TrimSpace(raw)
	if len(c) == 0 || string(c) == "null" {
		return "", nil
	}
	if c[0] == '"' {
		var s string
		if err := json.Unmarshal(c, &s); err != nil {
			return "", build.FieldError(err, "")
		}
		return s, nil
	}
	return string(c), nil
}

// exitCode reads bash's metadata.exit, if it is an integer.
func exitCode(meta json.RawMessage) (int, bool) {
	var m struct {
		Exit *float64 `json:"exit"`
	}
	if json.Unmarshal(meta, &m) != nil || m.Exit == nil {
		return 0, false
	}
	f := *m.Exit
	if f != float64(int32(f)) {
		return 0, false
	}
	return int(f), true
}

func errorType(msg string) string {
	switch {
	case strings.HasPrefix(msg, "Tool execution aborted"):
		return "aborted"
	case strings.Contains(msg, "File not found") || strings.Contains(msg, "No such file or directory"):
		return "not_found"
	}
	return "tool_error"
}
