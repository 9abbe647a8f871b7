package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/prunesched/prunesched/events"
)

// parseAnthropic reads a Messages API request body: the model, the system
// prompt, whether tools are offered, the client's cache_control
// breakpoints, and every message block that maps to an item.
func parseAnthropic(body []byte) (*conversation, error) {
	top, err := scanObject(body, 0)
	if err != nil {
		return nil, fmt.Errorf("anthropic request: %w", err)
	}
	c := &conversation{api: APIAnthropic, body: body}
	c.model = str(get(top, "model"))
	c.stream = isTrue(get(top, "stream"))
	if t := get(top, "tools"); len(t) > 2 && t[0] == '[' {
		c.tools = true
		if els, err := scanArray(t, 0); err == nil {
			for _, e := range els {
				if bytes.Contains(e.val, []byte(`"cache_control"`)) {
					if ms, err := scanObject(e.val, 0); err == nil {
						c.countCache(get(ms, "cache_control"))
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
				c.countCache(get(ms, "cache_control"))
			}
			c.system = strings.Join(parts, "\n")
		}
	}
	msgs := getMember(top, "messages")
	if msgs == nil {
		return nil, fmt.Errorf("anthropic request: no messages")
	}
	els, err := scanArray(msgs.val, msgs.off)
	if err != nil {
		return nil, fmt.Errorf("anthropic request: messages: %w", err)
	}
	occ := occurrences{}
	firstUserSeen := false
	for mi, e := range els {
		ms, err := scanObject(e.val, e.off)
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
			continue
		}
		var userText []string
		if cm.val[0] == '"' {
			b := &block{kind: bText, role: role, text: str(cm.val), valStart: cm.off, valEnd: cm.off + len(cm.val), objEnd: -1}
			b.item = textItemID(role, bText, b.text, occ.next(string(role)+"t"+b.text))
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
				b, err := anthropicBlock(role, bm, be, occ)
				if err != nil {
					return nil, fmt.Errorf("anthropic request: messages[%d].content[%d]: %w", mi, bi, err)
				}
				if cc := get(bm, "cache_control"); cc != nil {
					c.countCache(cc)
					if b != nil {
						b.cache, b.cc = true, cc
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
		if role == events.RoleUser && !firstUserSeen {
			firstUserSeen = true
			c.firstUser = strings.Join(userText, "\n")
		}
	}
	return c, nil
}

// anthropicBlock maps one content block to an item block, or nil for
// blocks that are not items (images, documents, redacted thinking).
func anthropicBlock(role events.Role, bm []member, be elem, occ occurrences) (*block, error) {
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
		b := &block{kind: bText, role: role, text: text, valStart: tm.off, valEnd: tm.off + len(tm.val), objEnd: objEnd}
		b.item = textItemID(role, bText, text, occ.next(string(role)+"t"+text))
		return b, nil
	case "thinking":
		if role != events.RoleAssistant {
			return nil, nil
		}
		b := &block{kind: bThinking, role: role, text: str(get(bm, "thinking")), signature: str(get(bm, "signature")), valStart: -1, valEnd: -1, objEnd: -1}
		key := b.signature
		if key == "" {
			key = b.text
		}
		b.item = textItemID(role, bThinking, key, occ.next("thinking"+key))
		return b, nil
	case "tool_use":
		id := str(get(bm, "id"))
		if id == "" {
			return nil, fmt.Errorf("tool_use without id")
		}
		in := getMember(bm, "input")
		b := &block{kind: bToolUse, role: events.RoleAssistant, callID: id, tool: str(get(bm, "name")), valStart: -1, valEnd: -1, objEnd: objEnd}
		b.item, _ = callItemIDs(id)
		if in != nil {
			b.input = json.RawMessage(in.val)
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
		b := &block{kind: bToolResult, role: events.RoleUser, callID: id, isError: isTrue(get(bm, "is_error")), valStart: -1, valEnd: -1, objEnd: objEnd}
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

// countCache records one cache_control breakpoint.
func (c *conversation) countCache(cc []byte) {
	if cc == nil || string(cc) == "null" {
		return
	}
	c.breakpoints++
	if bytes.Contains(cc, []byte(`"1h"`)) {
		c.cacheTTL = "1h"
	} else if c.cacheTTL == "" {
		c.cacheTTL = "5m"
	}
}
