package claudecode

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/importers/internal/build"
	"github.com/prunesched/prunesched/internal/toolspec"
)

// call is a tool_use seen on the main thread, waiting for its result.
type call struct {
	id       string // unique call id in the session
	tool     string
	input    json.RawMessage
	cwd      string
	resolved bool
}

// emitter turns the parsed main-thread lines into events.
type emitter struct {
	name  string
	b     *build.Builder
	info  *fileInfo
	calls map[string][]*call // by source tool_use id, in order
	resp  map[string]bool    // responses already given a model_request
}

func emit(recs []record, info *fileInfo, name string) (build.Session, error) {
	e := &emitter{name: name, b: build.New(Format, name), info: info, calls: map[string][]*call{}, resp: map[string]bool{}}
	e.b.HintStart(info.start)
	st := e.b.Started()
	st.Title = info.title
	st.Provider = "anthropic"
	for _, r := range recs {
		if err := e.record(r); err != nil {
			return build.Session{}, fmt.Errorf("%s:%d: %w", name, r.n, err)
		}
	}
	if st.Agent == "" {
		st.Agent = "claude-code"
	}
	return e.b.Finish("cc-0-0")
}

func (e *emitter) record(r record) error {
	st := e.b.Started()
	e.b.SetSourceID(r.l.SessionID)
	if st.CWD == "" {
		st.CWD = r.l.CWD
	}
	if st.Agent == "" && r.l.Version != "" {
		st.Agent = "claude-code/" + r.l.Version
	}
	loc := fmt.Sprintf("%s:%d", e.name, r.n)
	k := 0
	add := func(p events.Payload) {
		e.b.Add(fmt.Sprintf("cc-%d-%d", r.n, k), r.at, loc, p)
		k++
	}
	switch r.l.Type {
	case "system":
		hc := &events.HostCompaction{Host: Format, SourceID: r.l.UUID}
		if m := r.l.CompactMetadata; m != nil && m.PreTokens > 0 {
			hc.PreTokens = m.PreTokens
		}
		add(hc)
		return nil
	case "assistant":
		return e.assistant(r, add)
	case "user":
		return e.user(r, add)
	}
	return nil
}

func (e *emitter) assistant(r record, add func(events.Payload)) error {
	msg := r.l.Message
	if msg.Model != syntheticModel {
		key := responseKey(r)
		if !e.resp[key] {
			e.resp[key] = true
			mr := &events.ModelRequest{Request: build.SanitizeID(key), Provider: "anthropic", Model: msg.Model, SourceID: r.l.RequestID}
			if u := e.info.usage[key]; u != nil {
				cp := *u
				mr.Usage = &cp
				switch {
				case u.CacheWrite1hTokens > 0:
					mr.CacheTTL = "1h"
				case u.CacheWriteTokens > 0:
					mr.CacheTTL = "5m"
				}
			}
			add(mr)
		}
		if st := e.b.Started(); st.Model == "" {
			st.Model = msg.Model
		}
	}
	meta := r.l.IsAPIError
	if r.isStr {
		add(&events.Message{Item: e.b.Item(itemBase(r)), Role: events.RoleAssistant, Kind: events.KindText, Text: r.text, Meta: meta})
		return nil
	}
	several := countMessageBlocks(r.blocks) > 1
	for i, bl := range r.blocks {
		item := func() string { return e.b.Item(blockItem(r, i, several)) }
		switch bl.Type {
		case "text":
			add(&events.Message{Item: item(), Role: events.RoleAssistant, Kind: events.KindText, Text: bl.Text, Meta: meta})
		case "thinking":
			add(&events.Message{Item: item(), Role: events.RoleAssistant, Kind: events.KindThinking, Text: bl.Thinking, Signature: bl.Signature})
		case "redacted_thinking":
			// The encrypted payload is what the API wants back; the schema
			// has no redacted flag, so it travels as the signature.
			add(&events.Message{Item: item(), Role: events.RoleAssistant, Kind: events.KindThinking, Signature: bl.Data})
		case "tool_use":
			c := &call{id: e.b.Call(bl.ID), tool: bl.Name, input: build.Input(bl.Input), cwd: r.l.CWD}
			e.calls[bl.ID] = append(e.calls[bl.ID], c)
			add(&events.ToolCall{Item: events.CallInputItem(c.id), CallID: c.id, Tool: c.tool, Input: c.input})
		}
	}
	return nil
}

func (e *emitter) user(r record, add func(events.Payload)) error {
	lineMeta := r.l.IsMeta || r.l.IsCompactSummary
	if r.isStr {
		add(&events.Message{Item: e.b.Item(itemBase(r)), Role: events.RoleUser, Kind: events.KindText, Text: r.text, Meta: lineMeta || isMetaText(r.text)})
		return nil
	}
	several := countMessageBlocks(r.blocks) > 1
	for i, bl := range r.blocks {
		switch bl.Type {
		case "text":
			add(&events.Message{Item: e.b.Item(blockItem(r, i, several)), Role: events.RoleUser, Kind: events.KindText, Text: bl.Text, Meta: lineMeta || isMetaText(bl.Text)})
		case "image", "document":
			add(&events.Message{Item: e.b.Item(blockItem(r, i, several)), Role: events.RoleUser, Kind: events.KindText, Text: "[" + bl.Type + "]", Meta: lineMeta})
		case "tool_result":
			res, err := e.result(bl)
			if err != nil {
				return fmt.Errorf("field \"message.content[%d].content\": %w", i, err)
			}
			add(res)
		}
	}
	return nil
}

// result builds the tool_result for a tool_result block: its content is the
// text the model saw (toolUseResult is a display copy and never used).
func (e *emitter) result(bl block) (*events.ToolResult, error) {
	out, err := resultText(bl.Content)
	if err != nil {
		return nil, err
	}
	var c *call
	for _, cand := range e.calls[bl.ToolUseID] {
		if !cand.resolved {
			c = cand
			break
		}
	}
	res := &events.ToolResult{Output: &out}
	switch {
	case c != nil:
		c.resolved = true
		res.Item, res.CallID, res.Tool = c.id, c.id, c.tool
		res.Source = toolspec.ToolSource(c.tool, c.input, c.cwd)
	default:
		// A result whose call is not on the main thread (or repeated):
		// keep it, under an id of its own.
		prev := e.calls[bl.ToolUseID]
		if len(prev) > 0 {
			last := prev[len(prev)-1]
			res.CallID, res.Tool = last.id, last.tool
			res.Source = toolspec.ToolSource(last.tool, last.input, last.cwd)
		} else {
			res.CallID = build.SanitizeID(bl.ToolUseID)
		}
		res.Item = e.b.Item(res.CallID)
	}
	if bl.IsError {
		res.IsError = true
		res.Error, res.ExitCode = classify(out)
	}
	return res, nil
}

// resultText renders tool_result content as the model saw it: a string, or
// a list of blocks whose text is joined with "\n" (images become "[image]").
func resultText(raw json.RawMessage) (string, error) {
	c := bytes.TrimSpace(raw)
	if len(c) == 0 || string(c) == "null" {
		return "", nil
	}
	switch c[0] {
	case '"':
		var s string
		if err := json.Unmarshal(c, &s); err != nil {
			return "", build.FieldError(err, "")
		}
		return s, nil
	case '[':
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(c, &parts); err != nil {
			return "", build.FieldError(err, "")
		}
		var out []string
		for _, p := range parts {
			switch p.Type {
			case "text":
				out = append(out, p.Text)
			case "image", "document":
				out = append(out, "["+p.Type+"]")
			}
		}
		return strings.Join(out, "\n"), nil
	}
	return "", fmt.Errorf("want a string or an array of blocks")
}

var exitCodeRe = regexp.MustCompile(`^Exit code (-?\d+)\s*\n?`)

// classify derives the error type, message and exit code of an errored
// result from the text Claude Code returned.
func classify(out string) (*events.ToolError, *int) {
	t := strings.TrimSpace(out)
	if m := exitCodeRe.FindStringSubmatch(t); m != nil {
		var code *int
		if n, err := strconv.Atoi(m[1]); err == nil {
			code = &n
		}
		msg := build.ErrorSummary(t[len(m[0]):])
		if msg == "" {
			msg = strings.TrimSpace(m[0])
		}
		return &events.ToolError{Type: "exit_code", Message: msg}, code
	}
	if strings.HasPrefix(t, "The user doesn't want to") {
		return &events.ToolError{Type: "rejected", Message: build.ErrorSummary(t)}, nil
	}
	if inner, ok := strings.CutPrefix(t, "<tool_use_error>"); ok {
		inner, _, _ = strings.Cut(inner, "</tool_use_error>")
		typ := "tool_use_error"
		switch {
		case strings.Contains(inner, "does not exist"):
			typ = "not_found"
		case strings.HasPrefix(inner, "Sibling tool call errored"):
			typ = "sibling_error"
		}
		return &events.ToolError{Type: typ, Message: build.ErrorSummary(inner)}, nil
	}
	return &events.ToolError{Type: "tool_error", Message: build.ErrorSummary(t)}, nil
}

func countMessageBlocks(bs []block) int {
	n := 0
	for _, b := range bs {
		switch b.Type {
		case "text", "thinking", "redacted_thinking", "image", "document":
			n++
		}
	}
	return n
}

func itemBase(r record) string {
	if r.l.UUID != "" {
		return r.l.UUID
	}
	return fmt.Sprintf("cc-line-%d", r.n)
}

// blockItem is the item id of a text-like block: the line's uuid, suffixed
// with "/<block index>" when the line has several such blocks.
func blockItem(r record, i int, several bool) string {
	if several {
		return fmt.Sprintf("%s/%d", itemBase(r), i)
	}
	return itemBase(r)
}
