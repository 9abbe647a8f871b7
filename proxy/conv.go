package proxy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/prunesched/prunesched/events"
)

// API names a wire protocol the proxy speaks.
type API string

// The APIs the proxy speaks.
const (
	APIAnthropic       API = "anthropic"
	APIOpenAIChat      API = "openai_chat"
	APIOpenAIResponses API = "openai_responses"
)

// provider returns the provider name recorded on model requests.
func (a API) provider() string {
	if a == APIAnthropic {
		return "anthropic"
	}
	return "openai"
}

// blockKind is what a request block is, as far as the log is concerned.
type blockKind uint8

const (
	bText blockKind = iota + 1
	bThinking
	bToolUse
	bToolResult
)

// block is one unit of a client request that maps to an item, with where
// its replaceable value sits in the request body. A block is immutable once
// parsed: blocks of a messages array are shared with the parse cache and
// later requests that resend them, so they own their bytes (never a slice
// of a request body) and their offsets are relative to the array (rel).
type block struct {
	kind blockKind
	role events.Role
	item string
	// occ is the occurrence number of a text or thinking block's content
	// (the last part of its item id).
	occ int
	// rel is true when the offsets below are relative to the start of the
	// request's messages (input) array, conversation.arrOff.
	rel bool

	// Payload (decoded lazily for items already in the log: see raw).
	text      string
	signature string
	callID    string
	tool      string
	input     json.RawMessage
	// callInput is, on a tool result, the input of its call when the same
	// request holds it.
	callInput json.RawMessage
	isError   bool

	// raw is the undecoded output or text value; decoded only when the item
	// is new (payloadText).
	raw    []byte
	rawArr bool // raw is an array of content blocks (tool_result content)

	// val is the span of the value a prune replaces (tool_result content,
	// tool_use input, text), -1 when absent.
	valStart, valEnd int
	// inputIsString is true when the tool input is a JSON string holding
	// JSON (OpenAI arguments).
	inputIsString bool
	// objEnd is the offset of the closing '}' of the block object, where a
	// cache_control breakpoint can be inserted; -1 when not allowed.
	objEnd int
	// cache is true when the client put a cache_control breakpoint on it;
	// cc is that breakpoint's raw value.
	cache bool
	cc    []byte
}

// conversation is a parsed client request.
type conversation struct {
	api    API
	body   []byte
	model  string
	stream bool
	tools  bool
	blocks []*block
	// arrOff is the offset in body of the messages (input) array that the
	// offsets of rel blocks count from; arrBlocks is the index in blocks of
	// the array's first block (blocks before it, the Responses
	// instructions, are not from the array).
	arrOff    int
	arrBlocks int
	// firstUser is the text of the first user message: the lane key.
	firstUser string
	// system is the system prompt text (for the derived session id).
	system string
	// breakpoints counts the client's cache_control breakpoints (all of
	// system, tools and messages); cacheTTL is "1h" when one asks for the
	// one-hour tier, "5m" when there are breakpoints, else "".
	breakpoints int
	cacheTTL    string
	// pending is the parse of the messages array, cached once the request
	// is forwarded (cacheParse); nil when there is none or it is cached.
	pending *pendingParse
}

// hash12 is the first 12 hex digits of the SHA-256 of s.
func hash12(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:6])
}

// textItemID is the item id of a text or thinking block: role, kind, a
// content hash and the occurrence number of that same content in the
// conversation (the n-th identical text is a different item).
func textItemID(role events.Role, kind blockKind, key string, n int) string {
	k := "text"
	if kind == bThinking {
		k = "thinking"
	}
	return string(role) + "." + k + "." + hash12(key) + "." + itoa(n)
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}

// callItemIDs returns the item ids of a call's input and output: the call
// id (as the importers do), or a hash of it when it is not a valid id.
func callItemIDs(callID string) (input, output string) {
	id := callID
	if !validItemID(id + "/input") {
		id = "call." + hash12(callID)
	}
	return events.CallInputItem(id), id
}

func validItemID(s string) bool {
	if s == "" || len(s) > 200 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if i > 0 {
			ok = ok || strings.IndexByte("._:/@+=-", c) >= 0
		}
		if !ok {
			return false
		}
	}
	return true
}

// span returns the absolute offsets of b's replaceable value in c.body
// (-1 when absent).
func (c *conversation) span(b *block) (start, end int) {
	if b.valStart < 0 || !b.rel {
		return b.valStart, b.valEnd
	}
	return b.valStart + c.arrOff, b.valEnd + c.arrOff
}

// objEndOf returns the absolute offset of b's closing '}' (-1: none).
func (c *conversation) objEndOf(b *block) int {
	if b.objEnd < 0 || !b.rel {
		return b.objEnd
	}
	return b.objEnd + c.arrOff
}

// occKey is what numbers repeated contents: a role for texts ("thinking"
// for thinking blocks) and the text (a thinking block's signature when it
// has one).
type occKey struct{ tag, text string }

const thinkingTag = "thinking"

// occKeyOf returns the occurrence key of a text or thinking block.
func (b *block) occKeyOf() (occKey, bool) {
	switch b.kind {
	case bText:
		return occKey{string(b.role), b.text}, true
	case bThinking:
		if b.signature != "" {
			return occKey{thinkingTag, b.signature}, true
		}
		return occKey{thinkingTag, b.text}, true
	}
	return occKey{}, false
}

// occurrences numbers repeated texts within one request. When the request
// reuses the parse of a prefix, counts come from the prefix's blocks as
// they are needed (a scan back to the last block with the same content)
// instead of being rebuilt for every block of the prefix; pre holds counts
// made before the prefix (the Responses instructions).
type occurrences struct {
	m      map[occKey]int
	prefix []*block
	pre    map[occKey]int
}

func newOccurrences() *occurrences { return &occurrences{m: map[occKey]int{}} }

func (o *occurrences) next(tag, text string) int {
	k := occKey{tag, text}
	n, ok := o.m[k]
	if !ok && (o.prefix != nil || o.pre != nil) {
		n = o.prefixCount(k)
	}
	o.m[k] = n + 1
	return n
}

// prefixCount is the number of occurrences of k before the blocks parsed
// in this request.
func (o *occurrences) prefixCount(k occKey) int {
	for i := len(o.prefix) - 1; i >= 0; i-- {
		b := o.prefix[i]
		if b.kind != bText && b.kind != bThinking {
			continue
		}
		if bk, _ := b.occKeyOf(); bk == k {
			return b.occ + 1
		}
	}
	return o.pre[k]
}

// largeRaw is the size from which a block keeps its raw value in place in
// the request body instead of a copy (ownRaw).
const largeRaw = 1 << 20

// ownRaw returns the raw value a block keeps once its parse is cached
// (pendingParse.put; until then the block's raw value is in place in its
// request's body, which the request holds anyway). A small value is copied, so
// a block that outlives its request (in the parse cache, or as the
// session's last logged blocks) does not keep the request's body alive. A
// value of largeRaw bytes or more is kept in place: a copy would add its
// size to what the request holds (a 200 MB tool output was held three
// times: body, copy, decoded text), while the body it keeps alive instead
// is that value plus the conversation before it, and the body is never
// changed once read.
func ownRaw(val []byte) []byte {
	if len(val) >= largeRaw {
		return val
	}
	return bytes.Clone(val)
}

// spanText is a tool result's output as its fact holds it
// (payloadText), when span references may be spliced into it: false for
// content blocks that are not all text (an image would be lost with the
// array a span reference replaces by a string).
func (b *block) spanText() (string, bool) {
	if b.raw != nil && b.rawArr {
		return textParts(b.raw)
	}
	return b.payloadText(), true
}

// payloadText is the text or output of a block about to be appended,
// decoded from raw.
func (b *block) payloadText() string {
	if b.raw == nil {
		return b.text
	}
	if b.rawArr {
		return flattenContent(b.raw)
	}
	return str(b.raw)
}

// cacheCount counts cache_control breakpoints.
type cacheCount struct {
	n     int
	has1h bool
}

// add records one cache_control value.
func (cc *cacheCount) add(v []byte) {
	if v == nil || string(v) == "null" {
		return
	}
	cc.n++
	if bytes.Contains(v, []byte(`"1h"`)) {
		cc.has1h = true
	}
}

// setCache sets the conversation's breakpoint count and TTL tier from the
// counts of its parts.
func (c *conversation) setCache(parts ...cacheCount) {
	for _, p := range parts {
		c.breakpoints += p.n
		switch {
		case p.has1h:
			c.cacheTTL = "1h"
		case p.n > 0 && c.cacheTTL == "":
			c.cacheTTL = "5m"
		}
	}
}

// flattenContent turns an array of content blocks into text: the text
// blocks joined with newlines when all are text, else the raw JSON (an
// image's bytes are not text, but their identity is what L0 compares).
func flattenContent(raw []byte) string {
	if s, ok := textParts(raw); ok {
		return s
	}
	return string(raw)
}

// textParts is the text of an array of content blocks that are all text,
// joined by newlines; false when raw is not such an array (an image, a
// part of another type, or not an array).
func textParts(raw []byte) (string, bool) {
	els, err := scanArray(raw, 0)
	if err != nil {
		return "", false
	}
	var parts []string
	for _, e := range els {
		ms, err := scanObject(e.val, 0)
		if err != nil {
			return "", false
		}
		switch str(get(ms, "type")) {
		case "text", "input_text", "output_text":
			parts = append(parts, str(get(ms, "text")))
		default:
			return "", false
		}
	}
	return strings.Join(parts, "\n"), true
}

// toolInput returns args as a JSON value for ToolCall.Input: the raw JSON
// when valid, else the string encoded.
func toolInput(args string) json.RawMessage {
	if strings.TrimSpace(args) == "" {
		return json.RawMessage("{}")
	}
	if json.Valid([]byte(args)) {
		return json.RawMessage(args)
	}
	return json.RawMessage(quote(args))
}
