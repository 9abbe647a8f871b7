// Package replay rebuilds the request sequence an agent sent from a real
// session trace, in the wire shapes the proxy handles: Anthropic Messages,
// OpenAI Chat Completions and OpenAI Responses, each streamed (SSE) or not,
// with the answer a fake upstream gives to each request (the assistant
// output the trace recorded for that step). It is what `prunesched bench
// --only proxy-replay` sends.
//
// The rebuild is from the imported session (importers.Session): one
// request per model_request event, holding every conversation item before
// it; the answer is the assistant items that follow it. A host compaction
// starts the conversation over, as the agent did. The system prompt and
// the tool schemas are not in the traces: a fixed system text and one
// function per tool name seen stand in for them.
package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/prunesched/prunesched/events"
)

// API is a wire shape.
type API string

// The shapes Build produces.
const (
	Anthropic API = "anthropic"
	Chat      API = "chat"
	Responses API = "responses"
)

// Path is the request path of the API.
func (a API) Path() string {
	switch a {
	case Chat:
		return "/v1/chat/completions"
	case Responses:
		return "/v1/responses"
	}
	return "/v1/messages"
}

// SessionHeader is the header the API's usual client names its session
// with (Claude Code, OpenCode, Codex).
func (a API) SessionHeader() string {
	switch a {
	case Chat:
		return "X-Session-Affinity"
	case Responses:
		return "Session-Id"
	}
	return "X-Claude-Code-Session-Id"
}

// Turn is one request and the upstream's answer to it.
type Turn struct {
	// Body is the request body.
	Body []byte
	// Answer is the response body; ContentType its type (application/json
	// or text/event-stream).
	Answer      []byte
	ContentType string
	// At is when the recorded session made this request (its model
	// request event's time; zero when the trace has none): the gaps
	// between a sequence's turns are the agent's recorded cadence.
	At time.Time
}

// item is one conversation element.
type item struct {
	role     events.Role
	thinking bool
	text     string
	sig      string
	callID   string
	tool     string
	input    json.RawMessage
	result   bool
	isError  bool
}

// step is one model request: the conversation before it (conv[:n]) and
// its answer (conv[n:end]), with the conversation it belongs to.
type step struct {
	conv   []item
	n, end int
	model  string
	at     time.Time
}

// Sequence is a session's model requests, ready to be built in any shape.
type Sequence struct {
	steps []step
	tools []string
}

// Len is the number of requests.
func (s *Sequence) Len() int { return len(s.steps) }

// FromEvents rebuilds the sequence of a session's events (in session
// order). Steps without a request before them (no user turn yet) are
// dropped.
func FromEvents(evs []events.Event) *Sequence {
	seq := &Sequence{}
	tools := map[string]bool{}
	var conv []item
	cur := -1 // index in seq.steps of the step whose answer is being read
	closeStep := func() {
		if cur >= 0 {
			seq.steps[cur].end = len(conv)
			seq.steps[cur].conv = conv
			cur = -1
		}
	}
	for _, e := range evs {
		switch p := e.Data.(type) {
		case *events.HostCompaction:
			closeStep()
			conv = nil
		case *events.ModelRequest:
			closeStep()
			if len(conv) == 0 {
				continue
			}
			seq.steps = append(seq.steps, step{n: len(conv), model: p.Model, at: e.Time})
			cur = len(seq.steps) - 1
		case *events.Message:
			if p.Role != events.RoleAssistant {
				closeStep()
			}
			if p.Kind == events.KindThinking && p.Signature == "" {
				continue // not sendable back
			}
			conv = append(conv, item{role: p.Role, thinking: p.Kind == events.KindThinking, text: p.Text, sig: p.Signature})
		case *events.ToolCall:
			tools[p.Tool] = true
			conv = append(conv, item{role: events.RoleAssistant, callID: p.CallID, tool: p.Tool, input: p.Input})
		case *events.ToolResult:
			closeStep()
			out := ""
			if p.Output != nil {
				out = *p.Output
			}
			conv = append(conv, item{role: events.RoleUser, result: true, callID: p.CallID, tool: p.Tool, text: out, isError: p.IsError})
		}
	}
	closeStep()
	for t := range tools {
		seq.tools = append(seq.tools, t)
	}
	sort.Strings(seq.tools)
	return seq
}

// systemText stands in for the agent's system prompt (the traces do not
// hold it): about the size of a coding agent's.
var systemText = func() string {
	var b bytes.Buffer
	for i := 0; b.Len() < 12<<10; i++ {
		fmt.Fprintf(&b, "Rule %d: read the files before editing them, run the tests after, and keep the answer short. ", i)
	}
	return b.String()
}()

// Build returns the turns of the sequence in the given shape.
func (s *Sequence) Build(api API, stream bool) []Turn {
	out := make([]Turn, 0, len(s.steps))
	for i, st := range s.steps {
		var t Turn
		switch api {
		case Anthropic:
			t = s.anthropic(i, st, stream)
		case Chat:
			t = s.chat(i, st, stream)
		case Responses:
			t = s.responses(i, st, stream)
		}
		t.At = st.at
		out = append(out, t)
	}
	return out
}

func js(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("replay: marshal: %v", err)) // only maps, strings and raw JSON
	}
	return b
}

func inputOf(it item) json.RawMessage {
	if len(it.input) == 0 || !json.Valid(it.input) {
		return json.RawMessage("{}")
	}
	return it.input
}

// chunks splits s into pieces of at most n bytes (on byte boundaries the
// JSON encoder makes safe: invalid UTF-8 halves become U+FFFD only in
// the delta, never in the recorded whole, which the fake upstream never
// checks).
func chunks(s string, n int) []string {
	var out []string
	for len(s) > n {
		cut := n
		for cut > 0 && s[cut]&0xC0 == 0x80 {
			cut--
		}
		if cut == 0 {
			cut = n
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

// deltaBytes is the size of a streamed text or arguments delta.
const deltaBytes = 64

type sse struct{ bytes.Buffer }

func (w *sse) event(name string, v any) {
	if name != "" {
		w.WriteString("event: " + name + "\n")
	}
	w.WriteString("data: ")
	w.Write(js(v))
	w.WriteString("\n\n")
}

func usageTokens(st step) (in, out int) {
	for _, it := range st.conv[:st.n] {
		in += len(it.text)/4 + len(it.input)/4
	}
	for _, it := range st.conv[st.n:st.end] {
		out += len(it.text)/4 + len(it.input)/4
	}
	return in, out
}

// --- Anthropic Messages ---

func (s *Sequence) anthropic(i int, st step, stream bool) Turn {
	type msg struct {
		Role    string `json:"role"`
		Content []any  `json:"content"`
	}
	var msgs []msg
	for _, it := range st.conv[:st.n] {
		role := string(it.role)
		if role != "assistant" {
			role = "user"
		}
		var blk map[string]any
		switch {
		case it.result:
			blk = map[string]any{"type": "tool_result", "tool_use_id": it.callID, "content": it.text}
			if it.isError {
				blk["is_error"] = true
			}
		case it.tool != "":
			blk = map[string]any{"type": "tool_use", "id": it.callID, "name": it.tool, "input": inputOf(it)}
		case it.thinking:
			blk = map[string]any{"type": "thinking", "thinking": it.text, "signature": it.sig}
		default:
			blk = map[string]any{"type": "text", "text": it.text}
		}
		if len(msgs) == 0 || msgs[len(msgs)-1].Role != role {
			msgs = append(msgs, msg{Role: role})
		}
		m := &msgs[len(msgs)-1]
		m.Content = append(m.Content, blk)
	}
	// Claude Code marks the last block of the last message for caching.
	if n := len(msgs); n > 0 {
		c := msgs[n-1].Content
		c[len(c)-1].(map[string]any)["cache_control"] = map[string]string{"type": "ephemeral"}
	}
	tools := make([]any, 0, len(s.tools))
	for _, t := range s.tools {
		tools = append(tools, map[string]any{"name": t, "description": "The " + t + " tool.", "input_schema": map[string]string{"type": "object"}})
	}
	req := map[string]any{
		"model": st.model, "max_tokens": 32000,
		"system":   []any{map[string]any{"type": "text", "text": systemText, "cache_control": map[string]string{"type": "ephemeral"}}},
		"tools":    tools,
		"messages": msgs,
	}
	if stream {
		req["stream"] = true
	}
	inTok, outTok := usageTokens(st)
	id := "msg_replay" + strconv.Itoa(i)
	stop := "end_turn"
	var content []any
	for _, it := range st.conv[st.n:st.end] {
		switch {
		case it.tool != "":
			stop = "tool_use"
			content = append(content, map[string]any{"type": "tool_use", "id": it.callID, "name": it.tool, "input": inputOf(it)})
		case it.thinking:
			content = append(content, map[string]any{"type": "thinking", "thinking": it.text, "signature": it.sig})
		default:
			content = append(content, map[string]any{"type": "text", "text": it.text})
		}
	}
	usage := map[string]int{"input_tokens": 3, "cache_read_input_tokens": inTok, "cache_creation_input_tokens": 0, "output_tokens": outTok}
	if !stream {
		if content == nil {
			content = []any{}
		}
		return Turn{Body: js(req), ContentType: "application/json", Answer: js(map[string]any{
			"id": id, "type": "message", "role": "assistant", "model": st.model, "content": content,
			"stop_reason": stop, "stop_sequence": nil, "usage": usage,
		})}
	}
	var w sse
	w.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": st.model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": map[string]int{"input_tokens": 3, "cache_read_input_tokens": inTok, "output_tokens": 1},
	}})
	w.event("ping", map[string]string{"type": "ping"})
	for idx, it := range st.conv[st.n:st.end] {
		delta := func(d map[string]any) {
			w.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": d})
		}
		switch {
		case it.tool != "":
			w.event("content_block_start", map[string]any{"type": "content_block_start", "index": idx, "content_block": map[string]any{"type": "tool_use", "id": it.callID, "name": it.tool, "input": map[string]any{}}})
			for _, c := range chunks(string(inputOf(it)), deltaBytes) {
				delta(map[string]any{"type": "input_json_delta", "partial_json": c})
			}
		case it.thinking:
			w.event("content_block_start", map[string]any{"type": "content_block_start", "index": idx, "content_block": map[string]any{"type": "thinking", "thinking": ""}})
			for _, c := range chunks(it.text, deltaBytes) {
				delta(map[string]any{"type": "thinking_delta", "thinking": c})
			}
			delta(map[string]any{"type": "signature_delta", "signature": it.sig})
		default:
			w.event("content_block_start", map[string]any{"type": "content_block_start", "index": idx, "content_block": map[string]any{"type": "text", "text": ""}})
			for _, c := range chunks(it.text, deltaBytes) {
				delta(map[string]any{"type": "text_delta", "text": c})
			}
		}
		w.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
	}
	w.event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]int{"output_tokens": outTok}})
	w.event("message_stop", map[string]string{"type": "message_stop"})
	return Turn{Body: js(req), ContentType: "text/event-stream", Answer: w.Bytes()}
}

// --- OpenAI Chat Completions ---

func (s *Sequence) openAITools(responses bool) []any {
	tools := make([]any, 0, len(s.tools))
	for _, t := range s.tools {
		params := map[string]string{"type": "object"}
		if responses {
			tools = append(tools, map[string]any{"type": "function", "name": t, "description": "The " + t + " tool.", "parameters": params})
		} else {
			tools = append(tools, map[string]any{"type": "function", "function": map[string]any{"name": t, "description": "The " + t + " tool.", "parameters": params}})
		}
	}
	return tools
}

func (s *Sequence) chat(i int, st step, stream bool) Turn {
	msgs := []any{map[string]any{"role": "system", "content": systemText}}
	var asst map[string]any // the assistant message being filled
	for _, it := range st.conv[:st.n] {
		switch {
		case it.result:
			asst = nil
			msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": it.callID, "content": it.text})
		case it.role == events.RoleAssistant:
			if it.thinking {
				continue // Chat Completions does not send reasoning back
			}
			if asst == nil {
				asst = map[string]any{"role": "assistant", "content": nil}
				msgs = append(msgs, asst)
			}
			if it.tool != "" {
				calls, _ := asst["tool_calls"].([]any)
				asst["tool_calls"] = append(calls, map[string]any{"id": it.callID, "type": "function", "function": map[string]any{"name": it.tool, "arguments": string(inputOf(it))}})
			} else {
				prev, _ := asst["content"].(string)
				asst["content"] = prev + it.text
			}
		default:
			asst = nil
			msgs = append(msgs, map[string]any{"role": "user", "content": it.text})
		}
	}
	req := map[string]any{"model": st.model, "messages": msgs, "tools": s.openAITools(false)}
	if stream {
		req["stream"] = true
		req["stream_options"] = map[string]bool{"include_usage": true}
	}
	inTok, outTok := usageTokens(st)
	id := "chatcmpl-replay" + strconv.Itoa(i)
	usage := map[string]any{"prompt_tokens": inTok, "completion_tokens": outTok, "total_tokens": inTok + outTok, "prompt_tokens_details": map[string]int{"cached_tokens": inTok}}
	var text string
	var calls []map[string]any
	for _, it := range st.conv[st.n:st.end] {
		switch {
		case it.tool != "":
			calls = append(calls, map[string]any{"id": it.callID, "type": "function", "function": map[string]any{"name": it.tool, "arguments": string(inputOf(it))}})
		case !it.thinking:
			text += it.text
		}
	}
	finish := "stop"
	if len(calls) > 0 {
		finish = "tool_calls"
	}
	if !stream {
		m := map[string]any{"role": "assistant", "content": nil}
		if text != "" {
			m["content"] = text
		}
		if len(calls) > 0 {
			m["tool_calls"] = calls
		}
		return Turn{Body: js(req), ContentType: "application/json", Answer: js(map[string]any{
			"id": id, "object": "chat.completion", "model": st.model,
			"choices": []any{map[string]any{"index": 0, "message": m, "finish_reason": finish}}, "usage": usage,
		})}
	}
	var w sse
	chunk := func(delta map[string]any, fin any) {
		w.event("", map[string]any{"id": id, "object": "chat.completion.chunk", "model": st.model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": fin}}})
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil)
	for _, c := range chunks(text, deltaBytes) {
		chunk(map[string]any{"content": c}, nil)
	}
	for k, c := range calls {
		fn := c["function"].(map[string]any)
		chunk(map[string]any{"tool_calls": []any{map[string]any{"index": k, "id": c["id"], "type": "function", "function": map[string]any{"name": fn["name"], "arguments": ""}}}}, nil)
		for _, a := range chunks(fn["arguments"].(string), deltaBytes) {
			chunk(map[string]any{"tool_calls": []any{map[string]any{"index": k, "function": map[string]any{"arguments": a}}}}, nil)
		}
	}
	chunk(map[string]any{}, finish)
	w.event("", map[string]any{"id": id, "object": "chat.completion.chunk", "model": st.model, "choices": []any{}, "usage": usage})
	w.WriteString("data: [DONE]\n\n")
	return Turn{Body: js(req), ContentType: "text/event-stream", Answer: w.Bytes()}
}

// --- OpenAI Responses ---

func (s *Sequence) responses(i int, st step, stream bool) Turn {
	var input []any
	for _, it := range st.conv[:st.n] {
		switch {
		case it.result:
			input = append(input, map[string]any{"type": "function_call_output", "call_id": it.callID, "output": it.text})
		case it.tool != "":
			input = append(input, map[string]any{"type": "function_call", "call_id": it.callID, "name": it.tool, "arguments": string(inputOf(it))})
		case it.thinking:
			continue // encrypted reasoning is not in the traces
		case it.role == events.RoleAssistant:
			input = append(input, map[string]any{"type": "message", "role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": it.text}}})
		default:
			input = append(input, map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": it.text}}})
		}
	}
	req := map[string]any{"model": st.model, "instructions": systemText, "input": input, "tools": s.openAITools(true), "store": false}
	if stream {
		req["stream"] = true
	}
	inTok, outTok := usageTokens(st)
	id := "resp_replay" + strconv.Itoa(i)
	usage := map[string]any{"input_tokens": inTok, "output_tokens": outTok, "total_tokens": inTok + outTok, "input_tokens_details": map[string]int{"cached_tokens": inTok}}
	var output []map[string]any
	for k, it := range st.conv[st.n:st.end] {
		switch {
		case it.tool != "":
			output = append(output, map[string]any{"type": "function_call", "id": "fc_" + strconv.Itoa(k), "call_id": it.callID, "name": it.tool, "arguments": string(inputOf(it)), "status": "completed"})
		case it.thinking:
		default:
			output = append(output, map[string]any{"type": "message", "id": "msg_" + strconv.Itoa(k), "role": "assistant", "status": "completed", "content": []any{map[string]any{"type": "output_text", "text": it.text}}})
		}
	}
	if output == nil {
		output = []map[string]any{}
	}
	resp := map[string]any{"id": id, "object": "response", "status": "completed", "model": st.model, "output": output, "usage": usage}
	if !stream {
		return Turn{Body: js(req), ContentType: "application/json", Answer: js(resp)}
	}
	var w sse
	seqNo := 0
	ev := func(typ string, v map[string]any) {
		v["type"] = typ
		v["sequence_number"] = seqNo
		seqNo++
		w.event(typ, v)
	}
	ev("response.created", map[string]any{"response": map[string]any{"id": id, "object": "response", "status": "in_progress", "model": st.model, "output": []any{}}})
	for k, o := range output {
		added := map[string]any{}
		for kk, vv := range o {
			added[kk] = vv
		}
		added["status"] = "in_progress"
		if o["type"] == "function_call" {
			added["arguments"] = ""
			ev("response.output_item.added", map[string]any{"output_index": k, "item": added})
			for _, c := range chunks(o["arguments"].(string), deltaBytes) {
				ev("response.function_call_arguments.delta", map[string]any{"output_index": k, "item_id": o["id"], "delta": c})
			}
		} else {
			added["content"] = []any{}
			ev("response.output_item.added", map[string]any{"output_index": k, "item": added})
			text := o["content"].([]any)[0].(map[string]any)["text"].(string)
			for _, c := range chunks(text, deltaBytes) {
				ev("response.output_text.delta", map[string]any{"output_index": k, "content_index": 0, "item_id": o["id"], "delta": c})
			}
		}
		ev("response.output_item.done", map[string]any{"output_index": k, "item": o})
	}
	ev("response.completed", map[string]any{"response": resp})
	return Turn{Body: js(req), ContentType: "text/event-stream", Answer: w.Bytes()}
}

// Head returns the sequence's first n requests (all of them when n <= 0
// or n >= Len): its Build is the first n turns of s.Build, byte for byte
// (the tools offered stay the whole session's), without building the
// later, larger requests.
func (s *Sequence) Head(n int) *Sequence {
	if n <= 0 || n >= len(s.steps) {
		return s
	}
	return &Sequence{steps: s.steps[:n:n], tools: s.tools}
}
