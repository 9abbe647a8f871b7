package proxy

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/prunesched/prunesched/events"
)

// openaiRole maps a Chat Completions or Responses role to ours.
func openaiRole(r string) (events.Role, bool) {
	switch r {
	case "system", "developer":
		return events.RoleSystem, true
	case "user":
		return events.RoleUser, true
	case "assistant":
		return events.RoleAssistant, true
	}
	return "", false
}

// textBlocks maps a content value (a string, or an array of text parts)
// to text blocks. Parts that are not text (images, audio, refusals) are not
// items. rel says cm's offsets are relative to the messages (input) array.
func textBlocks(role events.Role, cm *member, occ *occurrences, rel bool) ([]*block, error) {
	if cm == nil || len(cm.val) == 0 {
		return nil, nil
	}
	switch cm.val[0] {
	case '"':
		t := str(cm.val)
		if t == "" {
			return nil, nil
		}
		b := &block{kind: bText, role: role, rel: rel, text: t, valStart: cm.off, valEnd: cm.off + len(cm.val), objEnd: -1}
		b.occ = occ.next(string(role), t)
		b.item = textItemID(role, bText, t, b.occ)
		return []*block{b}, nil
	case '[':
		parts, err := scanArray(cm.val, cm.off)
		if err != nil {
			return nil, err
		}
		var out []*block
		for _, p := range parts {
			pm, err := scanObject(p.val, p.off)
			if err != nil {
				return nil, err
			}
			switch str(get(pm, "type")) {
			case "text", "input_text", "output_text":
			default:
				continue
			}
			tm := getMember(pm, "text")
			if tm == nil {
				continue
			}
			t := str(tm.val)
			if t == "" {
				continue
			}
			b := &block{kind: bText, role: role, rel: rel, text: t, valStart: tm.off, valEnd: tm.off + len(tm.val), objEnd: -1}
			b.occ = occ.next(string(role), t)
			b.item = textItemID(role, bText, t, b.occ)
			out = append(out, b)
		}
		return out, nil
	}
	return nil, nil
}

func joinTexts(bs []*block) string {
	parts := make([]string, 0, len(bs))
	for _, b := range bs {
		parts = append(parts, b.text)
	}
	return strings.Join(parts, "\n")
}

func hasTools(t []byte) bool { return len(t) > 2 && t[0] == '[' }

// parseOpenAIChatScan reads a Chat Completions request body (a.body),
// reusing (and feeding) a.pc (nil: no cache).
func parseOpenAIChatScan(a *arrScan) (*conversation, error) {
	body := a.body
	top, err := scanObjectHook(body, 0, "messages", a.hook)
	if err != nil {
		return nil, fmt.Errorf("chat completions request: %w", err)
	}
	c := &conversation{api: APIOpenAIChat, body: body, model: str(get(top, "model")), stream: isTrue(get(top, "stream")), tools: hasTools(get(top, "tools"))}
	msgs := getMember(top, "messages")
	if msgs == nil {
		return nil, fmt.Errorf("chat completions request: no messages")
	}
	ap, els, first, err := a.start(c, msgs, newOccurrences(), nil)
	if err != nil {
		return nil, fmt.Errorf("chat completions request: messages: %w", err)
	}
	for j, e := range els {
		mi := first + j
		ms, err := scanObject(e.val, e.off-ap.a.off)
		if err != nil {
			return nil, fmt.Errorf("chat completions request: messages[%d]: %w", mi, err)
		}
		r := str(get(ms, "role"))
		if r == "tool" {
			id := str(get(ms, "tool_call_id"))
			if id == "" {
				return nil, fmt.Errorf("chat completions request: messages[%d]: tool message without tool_call_id", mi)
			}
			b := &block{kind: bToolResult, role: events.RoleUser, rel: true, callID: id, valStart: -1, valEnd: -1, objEnd: -1}
			if call := ap.toolCall(id); call != nil {
				b.tool = call.tool
			}
			_, b.item = callItemIDs(id)
			if cm := getMember(ms, "content"); cm != nil && cm.val[0] != 'n' {
				b.raw, b.rawArr = cm.val, cm.val[0] == '['
				b.valStart, b.valEnd = cm.off, cm.off+len(cm.val)
			} else {
				b.raw = []byte(`""`)
			}
			c.blocks = append(c.blocks, b)
			ap.endElem(e)
			continue
		}
		role, ok := openaiRole(r)
		if !ok {
			return nil, fmt.Errorf("chat completions request: messages[%d]: role %q", mi, r)
		}
		tbs, err := textBlocks(role, getMember(ms, "content"), ap.occ, true)
		if err != nil {
			return nil, fmt.Errorf("chat completions request: messages[%d].content: %w", mi, err)
		}
		c.blocks = append(c.blocks, tbs...)
		switch {
		case role == events.RoleSystem && c.system == "":
			ap.setSystem(mi, joinTexts(tbs))
		case role == events.RoleUser && !ap.firstUserSeen():
			ap.setFirstUser(mi, joinTexts(tbs))
		}
		tc := getMember(ms, "tool_calls")
		if tc == nil || tc.val[0] != '[' {
			ap.endElem(e)
			continue
		}
		calls, err := scanArray(tc.val, tc.off)
		if err != nil {
			return nil, fmt.Errorf("chat completions request: messages[%d].tool_calls: %w", mi, err)
		}
		for _, ce := range calls {
			cm, err := scanObject(ce.val, ce.off)
			if err != nil {
				return nil, fmt.Errorf("chat completions request: messages[%d].tool_calls: %w", mi, err)
			}
			id := str(get(cm, "id"))
			fn := getMember(cm, "function")
			if id == "" || fn == nil {
				continue
			}
			fm, err := scanObject(fn.val, fn.off)
			if err != nil {
				return nil, fmt.Errorf("chat completions request: messages[%d].tool_calls.function: %w", mi, err)
			}
			b := &block{kind: bToolUse, role: events.RoleAssistant, rel: true, callID: id, tool: str(get(fm, "name")), valStart: -1, valEnd: -1, objEnd: -1, inputIsString: true}
			b.item, _ = callItemIDs(id)
			am := getMember(fm, "arguments")
			if am != nil {
				b.input = toolInput(str(am.val))
				b.valStart, b.valEnd = am.off, am.off+len(am.val)
			} else {
				b.input = toolInput("")
			}
			ap.addCall(b)
			c.blocks = append(c.blocks, b)
		}
		ap.endElem(e)
	}
	ap.finish(nil)
	return c, nil
}

// parseOpenAIResponsesScan reads a Responses API request body (a.body, as
// Codex sends it: the full input every time, store false), reusing (and
// feeding) a.pc (nil: no cache).
func parseOpenAIResponsesScan(a *arrScan) (*conversation, error) {
	body := a.body
	top, err := scanObjectHook(body, 0, "input", a.hook)
	if err != nil {
		return nil, fmt.Errorf("responses request: %w", err)
	}
	c := &conversation{api: APIOpenAIResponses, body: body, model: str(get(top, "model")), stream: isTrue(get(top, "stream")), tools: hasTools(get(top, "tools"))}
	occ := newOccurrences()
	var pre []byte
	if im := getMember(top, "instructions"); im != nil {
		pre = im.val
		tbs, _ := textBlocks(events.RoleSystem, im, occ, false)
		c.blocks = append(c.blocks, tbs...)
		c.system = joinTexts(tbs)
	}
	in := getMember(top, "input")
	if in == nil {
		return nil, fmt.Errorf("responses request: no input")
	}
	if in.val[0] == '"' {
		tbs, _ := textBlocks(events.RoleUser, in, occ, false)
		c.blocks = append(c.blocks, tbs...)
		c.firstUser = joinTexts(tbs)
		return c, nil
	}
	ap, els, first, err := a.start(c, in, occ, pre)
	if err != nil {
		return nil, fmt.Errorf("responses request: input: %w", err)
	}
	for j, e := range els {
		ii := first + j
		im, err := scanObject(e.val, e.off-ap.a.off)
		if err != nil {
			return nil, fmt.Errorf("responses request: input[%d]: %w", ii, err)
		}
		typ := str(get(im, "type"))
		switch typ {
		case "", "message":
			role, ok := openaiRole(str(get(im, "role")))
			if !ok {
				break
			}
			tbs, err := textBlocks(role, getMember(im, "content"), ap.occ, true)
			if err != nil {
				return nil, fmt.Errorf("responses request: input[%d].content: %w", ii, err)
			}
			c.blocks = append(c.blocks, tbs...)
			switch {
			case role == events.RoleSystem && c.system == "":
				ap.setSystem(ii, joinTexts(tbs))
			case role == events.RoleUser && !ap.firstUserSeen():
				ap.setFirstUser(ii, joinTexts(tbs))
			}
		case "function_call", "custom_tool_call":
			id := str(get(im, "call_id"))
			if id == "" {
				break
			}
			b := &block{kind: bToolUse, role: events.RoleAssistant, rel: true, callID: id, tool: str(get(im, "name")), valStart: -1, valEnd: -1, objEnd: -1}
			// Codex offers an MCP server's tools in a namespace
			// (mcp__SERVER) and calls them by their bare name in it: the
			// tool is the qualified name Codex itself uses
			// (mcp__SERVER__TOOL), so a context tool is known by its
			// server (agenttools.Match) and another server's tool of the
			// same bare name is not taken for it.
			if ns := str(get(im, "namespace")); ns != "" {
				b.tool = ns + "__" + b.tool
			}
			b.item, _ = callItemIDs(id)
			if typ == "function_call" {
				b.inputIsString = true
				if am := getMember(im, "arguments"); am != nil {
					b.input = toolInput(str(am.val))
					b.valStart, b.valEnd = am.off, am.off+len(am.val)
				} else {
					b.input = toolInput("")
				}
			} else {
				b.input = quote(str(get(im, "input")))
			}
			ap.addCall(b)
			c.blocks = append(c.blocks, b)
		case "function_call_output", "custom_tool_call_output":
			id := str(get(im, "call_id"))
			if id == "" {
				break
			}
			b := &block{kind: bToolResult, role: events.RoleUser, rel: true, callID: id, valStart: -1, valEnd: -1, objEnd: -1}
			if call := ap.toolCall(id); call != nil {
				b.tool, b.callInput = call.tool, call.input
			}
			_, b.item = callItemIDs(id)
			if om := getMember(im, "output"); om != nil {
				b.raw, b.rawArr = om.val, om.val[0] == '['
				b.valStart, b.valEnd = om.off, om.off+len(om.val)
			} else {
				b.raw = []byte(`""`)
			}
			c.blocks = append(c.blocks, b)
		}
		ap.endElem(e)
	}
	ap.finish(pre)
	return c, nil
}

// codexExitCode reads the exit code from Codex's exec_command output
// header ("Process exited with code N").
func codexExitCode(out string) (int, bool) {
	const marker = "Process exited with code "
	head := out
	if len(head) > 512 {
		head = head[:512]
	}
	i := strings.Index(head, marker)
	if i < 0 || (i > 0 && head[i-1] != '\n') {
		return 0, false
	}
	return atoiPrefix(head[i+len(marker):])
}

// catRe matches a shell command that prints exactly one file.
var catRe = regexp.MustCompile(`^cat\s+([A-Za-z0-9_./@+=:-]+)$`)

// codexCatSource names the file a Codex exec_command "cat PATH" observed,
// with the hash of the bytes it printed (the part after "Output:"). Codex
// wraps every output in a header with a random chunk id and the wall time,
// so two reads of one unchanged file are never byte-identical; the content
// hash of what the command printed is what proves them the same
// observation (L1 by source content hash).
func codexCatSource(tool string, input json.RawMessage, out string) *events.SourceIdentity {
	if tool != "exec_command" && tool != "shell" && tool != "shell_command" {
		return nil
	}
	var in struct {
		Cmd string `json:"cmd"`
	}
	if json.Unmarshal(input, &in) != nil {
		return nil
	}
	m := catRe.FindStringSubmatch(strings.TrimSpace(in.Cmd))
	if m == nil {
		return nil
	}
	code, ok := codexExitCode(out)
	if !ok || code != 0 || strings.Contains(out, "tokens truncated") {
		return nil
	}
	_, body, ok := strings.Cut(out, "\nOutput:\n")
	if !ok {
		return nil
	}
	return &events.SourceIdentity{Kind: "file", Path: m[1], ContentHash: events.HashBytes([]byte(body))}
}
