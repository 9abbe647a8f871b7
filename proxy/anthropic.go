package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/prunesched/prunesched/events"
)

// parseAnthropicScan reads a Messages API request body (a.body): the
// model, the system prompt, whether tools are offered, the client's
// cache_control breakpoints, and every message block that maps to an
// item, reusing (and feeding) a.pc (nil: no cache).
func parseAnthropicScan(a *arrScan) (*conversation, error) {
	body := a.body
	top, err := scanObjectHook(body, 0, "messages", a.hook)
	if err != nil {
		return nil, fmt.Errorf("anthropic request: %w", err)
	}
	c := &conversation{api: APIAnthropic, body: body}
	c.model = str(get(top, "model"))
	c.stream = isTrue(get(top, "stream"))
	var toolsBP, sysBP cacheCount
	if t := get(top, "tools"); len(t) > 2 && t[0] == '[' {
		c.tools = true
		if els, err := scanArray(t, 0); err == nil {
			for _, e := range els {
				if bytes.Contains(e.val, []byte(`"cache_control"`)) {
					if ms, err := scanObject(e.val, 0); err == nil {
						toolsBP.add(get(ms, "cache_control"))
					}
				}
			}
		}
	}
	if sys := get(top, "system"); sys != nil {
		switch sys[0] {
		case '"':
			c.system = str(sys)
		case '[':
			els, err := scanArray(sys, 0)
			if err != nil {
				return nil, fmt.Errorf("anthropic request: system: %w", err)
			}
			var parts []string
			for _, e := range els {
				ms, err := scanObject(e.val, 0)
				if err != nil {
					return nil, fmt.Errorf("anthropic request: system: %w", err)
				}
				parts = append(parts, str(get(ms, "text")))
				sysBP.add(get(ms, "cache_control"))
			}
			c.system = strings.Join(parts, "\n")
		}
	}
	msgs := getMember(top, "messages")
	if msgs == nil {
		return nil, fmt.Errorf("anthropic request: no messages")
	}
	ap, els, first, err := a.start(c, msgs, newOccurrences(), nil)
	if err != nil {
		return nil, fmt.Errorf("anthropic request: messages: %w", err)
	}
	for j, e := range els {
		mi := first + j
		ms, err := scanObject(e.val, e.off-ap.a.off)
		if err != nil {
			return nil, fmt.Errorf("anthropic request: messages[%d]: %w", mi, err)
		}
		role := events.Role(str(get(ms, "role")))
		switch role {
		case events.RoleUser, events.RoleAssistant, events.RoleSystem:
		default:
			return nil, fmt.Errorf("anthropic request: messages[%d]: role %q", mi, role)
		}
		cm := getMember(ms, "content")
		if cm == nil {
			ap.endElem(e)
			continue
		}
		var userText []string
		if cm.val[0] == '"' {
			b := &block{kind: bText, role: role, rel: true, text: str(cm.val), valStart: cm.off, valEnd: cm.off + len(cm.val), objEnd: -1}
			b.occ = ap.occ.next(string(role), b.text)
			b.item = textItemID(role, bText, b.text, b.occ)
			c.blocks = append(c.blocks, b)
			userText = append(userText, b.text)
		} else {
			blocks, err := scanArray(cm.val, cm.off)
			if err != nil {
				return nil, fmt.Errorf("anthropic request: messages[%d].content: %w", mi, err)
			}
			for bi, be := range blocks {
				bm, err := scanObject(be.val, be.off)
				if err != nil {
					return nil, fmt.Errorf("anthropic request: messages[%d].content[%d]: %w", mi, bi, err)
				}
				b, err := anthropicBlock(role, bm, be, ap.occ)
				if err != nil {
					return nil, fmt.Errorf("anthropic request: messages[%d].content[%d]: %w", mi, bi, err)
				}
				if cc := get(bm, "cache_control"); cc != nil {
					ap.bp.add(cc)
					if b != nil {
						b.cache, b.cc = true, bytes.Clone(cc)
					}
				}
				if b != nil {
					c.blocks = append(c.blocks, b)
					if b.kind == bText {
						userText = append(userText, b.text)
					}
				}
			}
		}
		if role == events.RoleUser && !ap.firstUserSeen() {
			ap.setFirstUser(mi, strings.Join(userText, "\n"))
		}
		ap.endElem(e)
	}
	c.setCache(toolsBP, sysBP, ap.bp)
	ap.finish(nil)
	return c, nil
}

// anthropicBlock maps one content block to an item block, or nil for
// blocks that are not items (images, documents, redacted thinking). The
// offsets of be and bm are relative to the messages array.
func anthropicBlock(role events.Role, bm []member, be elem, occ *occurrences) (*block, error) {
	objEnd := be.off + len(be.val) - 1
	switch str(get(bm, "type")) {
	case "text":
		tm := getMember(bm, "text")
		if tm == nil {
			return nil, nil
		}
		text, err := unquote(tm.val)
		if err != nil {
			return nil, err
		}
		b := &block{kind: bText, role: role, rel: true, text: text, valStart: tm.off, valEnd: tm.off + len(tm.val), objEnd: objEnd}
		b.occ = occ.next(string(role), text)
		b.item = textItemID(role, bText, text, b.occ)
		return b, nil
	case "thinking":
		if role != events.RoleAssistant {
			return nil, nil
		}
		b := &block{kind: bThinking, role: role, rel: true, text: str(get(bm, "thinking")), signature: str(get(bm, "signature")), valStart: -1, valEnd: -1, objEnd: -1}
		key := b.signature
		if key == "" {
			key = b.text
		}
		b.occ = occ.next(thinkingTag, key)
		b.item = textItemID(role, bThinking, key, b.occ)
		return b, nil
	case "tool_use":
		id := str(get(bm, "id"))
		if id == "" {
			return nil, fmt.Errorf("tool_use without id")
		}
		in := getMember(bm, "input")
		b := &block{kind: bToolUse, role: events.RoleAssistant, rel: true, callID: id, tool: str(get(bm, "name")), valStart: -1, valEnd: -1, objEnd: objEnd}
		b.item, _ = callItemIDs(id)
		if in != nil {
			b.input = json.RawMessage(bytes.Clone(in.val))
			b.valStart, b.valEnd = in.off, in.off+len(in.val)
		} else {
			b.input = json.RawMessage("{}")
		}
		return b, nil
	case "tool_result":
		id := str(get(bm, "tool_use_id"))
		if id == "" {
			return nil, fmt.Errorf("tool_result without tool_use_id")
		}
		b := &block{kind: bToolResult, role: events.RoleUser, rel: true, callID: id, isError: isTrue(get(bm, "is_error")), valStart: -1, valEnd: -1, objEnd: objEnd}
		_, b.item = callItemIDs(id)
		if cm := getMember(bm, "content"); cm != nil {
			b.raw = cm.val
			b.rawArr = cm.val[0] == '['
			b.valStart, b.valEnd = cm.off, cm.off+len(cm.val)
		} else {
			b.raw = []byte(`""`)
		}
		return b, nil
	}
	return nil, nil
}
