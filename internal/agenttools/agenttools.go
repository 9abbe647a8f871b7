// Package agenttools is the one definition of the context tools the model
// calls through prunesched's MCP server: their names, their byte-stable
// descriptions and input schemas, the result the MCP server itself returns
// (a stub the proxy replaces with the real answer), and how a tool name as
// an agent exposes it (mcp__prunesched__context_list, prunesched_...) maps
// back to one of them. The MCP server (cmd) and the proxy both use it, so
// the tool the model sees and the tool the proxy answers are the same.
//
// It must not import any other prunesched package: the placeholder names
// the recovery tool from here.
package agenttools

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Kind is one of the three context tools.
type Kind string

// The context tools.
const (
	List    Kind = "context_list"
	Prune   Kind = "context_prune"
	Recover Kind = "context_recover"
)

// Kinds lists the tools in a stable order.
var Kinds = []Kind{List, Prune, Recover}

// Server is the MCP server's name, as setup registers it in each agent.
const Server = "prunesched"

// Description is a tool's description: short, and byte-stable across
// versions of one release so the tool list the agent sends (part of the
// cached prefix) does not change under it.
func Description(k Kind) string {
	switch k {
	case List:
		return "List this session's largest context items with their handles (#N), tool, source, tokens, age in requests and status (kept, protected and why, pending removal, removed)."
	case Prune:
		return "Ask to remove context items you no longer need, by handle (#N), with a short reason. Each is judged: protected items are refused with the reason; accepted ones are removed at the next cache-safe point. Removed items stay recoverable with context_recover."
	case Recover:
		return "Get back the original content of a removed item by its handle (#N), as shown in its placeholder. The content is appended here; the placeholder stays."
	}
	return ""
}

// Schema is a tool's JSON input schema.
func Schema(k Kind) json.RawMessage {
	switch k {
	case List:
		return json.RawMessage(`{"type":"object","properties":{"limit":{"type":"integer","minimum":1,"maximum":200,"description":"how many items, largest first (default 30)"}},"additionalProperties":false}`)
	case Prune:
		return json.RawMessage(`{"type":"object","properties":{"handles":{"type":"array","items":{"type":"string"},"maxItems":100,"description":"item handles such as #12"},"reason":{"type":"string","description":"why these items are no longer needed"}},"required":["handles"],"additionalProperties":false}`)
	case Recover:
		return json.RawMessage(`{"type":"object","properties":{"handle":{"type":"string","description":"the handle in the placeholder, such as #12"}},"required":["handle"],"additionalProperties":false}`)
	}
	return nil
}

// Stub is what the MCP server answers by itself. The prunesched proxy on
// the session's model traffic replaces it with the real answer before the
// model sees it; a model that reads the stub is told why.
func Stub(k Kind) string {
	return "prunesched: " + string(k) + " is answered by the prunesched proxy, which is not on this session's model traffic. Point the agent at `prunesched proxy` (see `prunesched setup`) to use it."
}

// Match returns the context tool an agent's tool name stands for: the bare
// name, or the name behind an MCP prefix naming the prunesched server
// (Claude Code's mcp__prunesched__context_list, Codex's
// mcp__prunesched__context_list or prunesched__context_list, OpenCode's
// prunesched_context_list).
func Match(tool string) (Kind, bool) {
	for _, k := range Kinds {
		if tool == string(k) {
			return k, true
		}
		rest, ok := strings.CutSuffix(tool, string(k))
		if !ok || !strings.HasSuffix(rest, "_") {
			continue
		}
		if strings.Contains(strings.ToLower(rest), Server) {
			return k, true
		}
	}
	return "", false
}

// handleRe finds handles in what the model wrote: "#12", "12", "# 12".
var handleRe = regexp.MustCompile(`^\s*#?\s*([0-9]{1,9})\s*$`)

// ParseHandle reads one handle as the model wrote it (#12, 12, " #12 ").
// Anything else ("#12\">", "#x", "") is an error that quotes it.
func ParseHandle(s string) (int, error) {
	m := handleRe.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("%q is not a handle (want #N, as in a placeholder or context_list)", clip(s, 40))
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		return 0, fmt.Errorf("%q is not a handle: %w", clip(s, 40), err)
	}
	return n, nil
}

// MaxHandles bounds one context_prune call.
const MaxHandles = 100

// PruneArgs are context_prune's arguments.
type PruneArgs struct {
	Handles []string `json:"handles"`
	Reason  string   `json:"reason,omitempty"`
}

// RecoverArgs are context_recover's arguments.
type RecoverArgs struct {
	Handle string `json:"handle"`
}

// ListArgs are context_list's arguments.
type ListArgs struct {
	Limit int `json:"limit,omitempty"`
}

// DecodeArgs decodes a tool call's arguments into v, tolerating what models
// send: an empty input, a JSON string holding the object, a bare handle
// where a list was asked. The error says which field is wrong.
func DecodeArgs(k Kind, raw []byte, v any) error {
	raw = []byte(strings.TrimSpace(string(raw)))
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	if raw[0] == '"' {
		var inner string
		if err := json.Unmarshal(raw, &inner); err == nil {
			raw = []byte(inner)
		}
	}
	if k == Prune {
		// "handles": "#3" instead of ["#3"].
		var loose struct {
			Handles json.RawMessage `json:"handles"`
			Reason  string          `json:"reason"`
		}
		if err := json.Unmarshal(raw, &loose); err != nil {
			return fmt.Errorf("%s arguments: %w", k, err)
		}
		pa, ok := v.(*PruneArgs)
		if !ok {
			return fmt.Errorf("%s arguments: want *PruneArgs", k)
		}
		pa.Reason = loose.Reason
		h := strings.TrimSpace(string(loose.Handles))
		switch {
		case h == "" || h == "null":
			return fmt.Errorf("%s arguments: field \"handles\" missing", k)
		case h[0] == '"':
			var one string
			if err := json.Unmarshal(loose.Handles, &one); err != nil {
				return fmt.Errorf("%s arguments: field \"handles\": %w", k, err)
			}
			pa.Handles = []string{one}
		default:
			var many []json.RawMessage
			if err := json.Unmarshal(loose.Handles, &many); err != nil {
				return fmt.Errorf("%s arguments: field \"handles\": want a list of handles such as [\"#12\"]", k)
			}
			for _, m := range many {
				var s string
				if json.Unmarshal(m, &s) != nil {
					s = string(m) // a bare number: 12
				}
				pa.Handles = append(pa.Handles, s)
			}
		}
		return nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("%s arguments: %w", k, err)
	}
	return nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
