package proxy

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"

	"github.com/prunesched/prunesched/events"
)

// capture reads a response as it streams to the client: the usage the
// upstream reports and the assistant's content. It never changes a byte.
type capture struct {
	api  API
	sse  bool
	buf  bytes.Buffer // non-streamed body, or the partial SSE line
	over bool         // non-streamed body exceeded DefaultMaxCaptureBytes
	eof  bool         // the body was read to its end (io.EOF)
	// terminal is set once the stream's last event has been read
	// (message_stop, [DONE], response.completed, response.incomplete,
	// response.failed): the client may act on it before the connection
	// ends.
	terminal bool
	// finished is set once the event that says the answer is whole has
	// been read: message_stop (Anthropic); a finish_reason or [DONE]
	// (Chat Completions); response.completed (Responses). A stream cut
	// before it, or ended by an error event, is incomplete (whole).
	finished bool

	id    string
	model string
	usage *events.Usage
	// blocks are the assistant's content blocks in order.
	blocks []*respBlock
	// byIndex finds a streamed block by its index (Anthropic content
	// index, Chat Completions tool call index).
	byIndex map[int]*respBlock
	text    *respBlock // Chat Completions streamed text
	done    time.Time
}

type respBlock struct {
	kind      blockKind
	text      strings.Builder
	signature string
	callID    string
	tool      string
	input     strings.Builder
}

func newCapture(api API, sse bool) *capture {
	return &capture{api: api, sse: sse, byIndex: map[int]*respBlock{}}
}

// write feeds response bytes.
func (c *capture) write(p []byte) {
	if !c.sse {
		if c.buf.Len()+len(p) > DefaultMaxCaptureBytes {
			c.over = true
			return
		}
		c.buf.Write(p)
		return
	}
	c.buf.Write(p)
	for {
		b := c.buf.Bytes()
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return
		}
		line := bytes.TrimRight(b[:i], "\r")
		if data, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			c.event(bytes.TrimSpace(data))
		}
		c.buf.Next(i + 1)
	}
}

// whole reports whether the answer arrived whole: a stream whose
// terminal event of success was read (finished), or a body that is not a
// stream read to its end and kept whole. Only a whole answer's content is
// recorded as the assistant's items (recordLocked): a partial answer is
// not what the model said, and eligibility must not take it as evidence.
func (c *capture) whole() bool {
	if c.sse {
		return c.finished
	}
	return c.eof && !c.over
}

// finish parses a non-streamed body.
func (c *capture) finish() {
	if c.sse || c.over {
		return
	}
	switch c.api {
	case APIAnthropic:
		var m anthMessage
		if json.Unmarshal(c.buf.Bytes(), &m) == nil {
			c.id, c.model, c.usage = m.ID, m.Model, m.Usage.usage()
			for _, cb := range m.Content {
				c.anthBlock(cb)
			}
		}
	case APIOpenAIChat:
		var r struct {
			ID      string `json:"id"`
			Model   string `json:"model"`
			Choices []struct {
				Message struct {
					Content   *string        `json:"content"`
					ToolCalls []chatToolCall `json:"tool_calls"`
				} `json:"message"`
			} `json:"choices"`
			Usage *oaUsage `json:"usage"`
		}
		if json.Unmarshal(c.buf.Bytes(), &r) == nil {
			c.id, c.model, c.usage = r.ID, r.Model, r.Usage.usage()
			if len(r.Choices) > 0 {
				m := r.Choices[0].Message
				if m.Content != nil && *m.Content != "" {
					b := &respBlock{kind: bText}
					b.text.WriteString(*m.Content)
					c.blocks = append(c.blocks, b)
				}
				for _, tc := range m.ToolCalls {
					b := &respBlock{kind: bToolUse, callID: tc.ID, tool: tc.Function.Name}
					b.input.WriteString(tc.Function.Arguments)
					c.blocks = append(c.blocks, b)
				}
			}
		}
	case APIOpenAIResponses:
		var r respResponse
		if json.Unmarshal(c.buf.Bytes(), &r) == nil {
			c.respCompleted(&r)
		}
	}
}

type anthUsage struct {
	InputTokens   int `json:"input_tokens"`
	CacheCreation int `json:"cache_creation_input_tokens"`
	CacheRead     int `json:"cache_read_input_tokens"`
	OutputTokens  int `json:"output_tokens"`
	CacheTiers    *struct {
		Ephemeral5m int `json:"ephemeral_5m_input_tokens"`
		Ephemeral1h int `json:"ephemeral_1h_input_tokens"`
	} `json:"cache_creation"`
}

func (u *anthUsage) usage() *events.Usage {
	if u == nil {
		return nil
	}
	out := &events.Usage{InputTokens: u.InputTokens, CacheReadTokens: u.CacheRead, CacheWriteTokens: u.CacheCreation, OutputTokens: u.OutputTokens}
	if u.CacheTiers != nil {
		out.CacheWrite1hTokens = u.CacheTiers.Ephemeral1h
		if w := u.CacheTiers.Ephemeral5m + u.CacheTiers.Ephemeral1h; w > out.CacheWriteTokens {
			out.CacheWriteTokens = w
		}
	}
	return out
}

type anthContent struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
}

type anthMessage struct {
	ID      string        `json:"id"`
	Model   string        `json:"model"`
	Content []anthContent `json:"content"`
	Usage   *anthUsage    `json:"usage"`
}

func (c *capture) anthBlock(cb anthContent) *respBlock {
	var b *respBlock
	switch cb.Type {
	case "text":
		b = &respBlock{kind: bText}
		b.text.WriteString(cb.Text)
	case "thinking":
		b = &respBlock{kind: bThinking, signature: cb.Signature}
		b.text.WriteString(cb.Thinking)
	case "tool_use":
		b = &respBlock{kind: bToolUse, callID: cb.ID, tool: cb.Name}
		if len(cb.Input) > 0 && string(cb.Input) != "{}" {
			b.input.Write(cb.Input)
		}
	default:
		return nil
	}
	c.blocks = append(c.blocks, b)
	return b
}

type oaUsage struct {
	PromptTokens       int `json:"prompt_tokens"`
	CompletionTokens   int `json:"completion_tokens"`
	InputTokens        int `json:"input_tokens"`
	OutputTokens       int `json:"output_tokens"`
	PromptTokensDetail *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	InputTokensDetail *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
}

// usage maps OpenAI usage to ours: input is the uncached part, cache read
// the cached part; OpenAI bills no cache writes.
func (u *oaUsage) usage() *events.Usage {
	if u == nil {
		return nil
	}
	in, out, cached := u.PromptTokens+u.InputTokens, u.CompletionTokens+u.OutputTokens, 0
	if u.PromptTokensDetail != nil {
		cached += u.PromptTokensDetail.CachedTokens
	}
	if u.InputTokensDetail != nil {
		cached += u.InputTokensDetail.CachedTokens
	}
	return events.OpenAIUsage(in, out, cached, 0)
}

type chatToolCall struct {
	Index    int    `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type respItem struct {
	Type      string `json:"type"`
	Role      string `json:"role"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Input     string `json:"input"`
	Content   []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

type respResponse struct {
	ID     string     `json:"id"`
	Model  string     `json:"model"`
	Output []respItem `json:"output"`
	Usage  *oaUsage   `json:"usage"`
}

func (c *capture) respItem(it respItem) {
	switch it.Type {
	case "message":
		for _, p := range it.Content {
			if p.Type == "output_text" && p.Text != "" {
				b := &respBlock{kind: bText}
				b.text.WriteString(p.Text)
				c.blocks = append(c.blocks, b)
			}
		}
	case "function_call":
		b := &respBlock{kind: bToolUse, callID: it.CallID, tool: it.Name}
		b.input.WriteString(it.Arguments)
		c.blocks = append(c.blocks, b)
	case "custom_tool_call":
		b := &respBlock{kind: bToolUse, callID: it.CallID, tool: it.Name}
		b.input.Write(quote(it.Input))
		c.blocks = append(c.blocks, b)
	}
}

func (c *capture) respCompleted(r *respResponse) {
	c.id, c.model, c.usage = r.ID, r.Model, r.Usage.usage()
	if len(c.blocks) == 0 {
		for _, it := range r.Output {
			c.respItem(it)
		}
	}
}

// event handles one SSE data payload.
func (c *capture) event(data []byte) {
	if string(data) == "[DONE]" {
		c.terminal = true
		c.finished = true
		return
	}
	if len(data) == 0 || data[0] != '{' {
		return // keep-alives
	}
	switch c.api {
	case APIAnthropic:
		var e struct {
			Type         string       `json:"type"`
			Index        int          `json:"index"`
			Message      *anthMessage `json:"message"`
			ContentBlock *anthContent `json:"content_block"`
			Delta        *struct {
				Type        string `json:"type"`
				Text        string `json:"text"`
				Thinking    string `json:"thinking"`
				Signature   string `json:"signature"`
				PartialJSON string `json:"partial_json"`
			} `json:"delta"`
			Usage *anthUsage `json:"usage"`
		}
		if json.Unmarshal(data, &e) != nil {
			return
		}
		switch e.Type {
		case "message_start":
			if e.Message != nil {
				c.id, c.model, c.usage = e.Message.ID, e.Message.Model, e.Message.Usage.usage()
			}
		case "content_block_start":
			if e.ContentBlock != nil {
				if b := c.anthBlock(*e.ContentBlock); b != nil {
					c.byIndex[e.Index] = b
				}
			}
		case "content_block_delta":
			b := c.byIndex[e.Index]
			if b == nil || e.Delta == nil {
				return
			}
			switch e.Delta.Type {
			case "text_delta":
				b.text.WriteString(e.Delta.Text)
			case "thinking_delta":
				b.text.WriteString(e.Delta.Thinking)
			case "signature_delta":
				b.signature += e.Delta.Signature
			case "input_json_delta":
				b.input.WriteString(e.Delta.PartialJSON)
			}
		case "message_stop":
			c.terminal = true
			c.finished = true
		case "message_delta":
			if u := e.Usage.usage(); u != nil {
				if c.usage == nil {
					c.usage = u
				} else {
					// message_delta carries cumulative counts; zero means
					// not reported.
					c.usage.OutputTokens = u.OutputTokens
					if u.InputTokens > 0 {
						c.usage.InputTokens = u.InputTokens
					}
					if u.CacheReadTokens > 0 {
						c.usage.CacheReadTokens = u.CacheReadTokens
					}
					if u.CacheWriteTokens > 0 {
						c.usage.CacheWriteTokens = u.CacheWriteTokens
						c.usage.CacheWrite1hTokens = u.CacheWrite1hTokens
					}
				}
			}
		}
	case APIOpenAIChat:
		var e struct {
			ID      string `json:"id"`
			Model   string `json:"model"`
			Choices []struct {
				Delta struct {
					Content   *string        `json:"content"`
					ToolCalls []chatToolCall `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *oaUsage `json:"usage"`
		}
		if json.Unmarshal(data, &e) != nil {
			return
		}
		if e.ID != "" {
			c.id = e.ID
		}
		if e.Model != "" {
			c.model = e.Model
		}
		if u := e.Usage.usage(); u != nil {
			c.usage = u
		}
		for _, ch := range e.Choices {
			if ch.FinishReason != nil && *ch.FinishReason != "" {
				// The answer is whole; a usage chunk and [DONE] may
				// follow (terminal waits for [DONE]).
				c.finished = true
			}
			if d := ch.Delta.Content; d != nil && *d != "" {
				if c.text == nil {
					c.text = &respBlock{kind: bText}
					c.blocks = append(c.blocks, c.text)
				}
				c.text.text.WriteString(*d)
			}
			for _, tc := range ch.Delta.ToolCalls {
				b := c.byIndex[tc.Index]
				if b == nil {
					b = &respBlock{kind: bToolUse}
					c.byIndex[tc.Index] = b
					c.blocks = append(c.blocks, b)
				}
				if tc.ID != "" {
					b.callID = tc.ID
				}
				if tc.Function.Name != "" {
					b.tool = tc.Function.Name
				}
				b.input.WriteString(tc.Function.Arguments)
			}
		}
	case APIOpenAIResponses:
		var e struct {
			Type     string        `json:"type"`
			Item     *respItem     `json:"item"`
			Response *respResponse `json:"response"`
		}
		if json.Unmarshal(data, &e) != nil {
			return
		}
		switch e.Type {
		case "response.output_item.done":
			if e.Item != nil {
				c.respItem(*e.Item)
			}
		case "response.completed", "response.incomplete":
			if e.Response != nil {
				c.respCompleted(e.Response)
			}
			c.terminal = true
			// response.incomplete (max_output_tokens, content filter)
			// ends the stream, but the answer is cut short.
			c.finished = e.Type == "response.completed"
		case "response.failed":
			c.terminal = true
		}
	}
}
