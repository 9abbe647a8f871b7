package projections

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/prunesched/prunesched/events"
)

// HostPlaceholder is what the host itself shows for an output it cleared
// (OpenCode's compacted tool results); such items render with it and count
// as host-pruned, not as ours.
const HostPlaceholder = "[Old tool result content cleared]"

// Placeholder limits: how much of an item's arguments or residue a
// placeholder may quote. Arguments are summarised to keys and short values
// first, then cut at ArgsSummaryBytes.
const (
	ArgsSummaryBytes  = 120
	argValueBytes     = 48
	argKeyBytes       = 32
	residueMsgBytes   = 240
	residueSkelBytes  = 120
	shortHashHexBytes = 12
)

// PlaceholderSpec is what a placeholder may say about a removed item:
// identity, never content.
type PlaceholderSpec struct {
	// Session and Item name the original for the recover command.
	Session string
	Item    string
	// Part is "output", "input" or "" (a message's text).
	Part string
	// Role is the author of a message item.
	Role events.Role
	// Tool and Args describe the call; Args is summarised to at most
	// ArgsSummaryBytes of keys and short values.
	Tool string
	Args json.RawMessage
	// Rung and Reason say why it left.
	Rung   events.Rung
	Reason events.Reason
	// Tokens is the stored token count of the removed payload.
	Tokens int
	// Survivor is the item still holding the surviving copy, if any.
	Survivor string
	// SurvivorRemoved, when set, says the survivor was itself removed since
	// (its rung and reason), and SurvivorNext names what it deferred to.
	SurvivorRemoved string
	SurvivorNext    string
	// Original is the content address of the payload, or the id of the event
	// that holds it in the log.
	Original string
	// Source is "path@version" when the observed source is known.
	Source string
	// Residue is what survives of an errored call whose input was removed.
	Residue *events.Residue
}

// Placeholder returns the mechanical placeholder text for a pruned item:
// what kind of thing, which source or version, why (rung and reason), which
// copy survives and how to recover it. It is deterministic and copies no
// payload beyond the bounded argument summary and the residue.
func Placeholder(p PlaceholderSpec) string {
	var b strings.Builder
	b.WriteString("[prunesched: ")
	switch p.Part {
	case partOutput, partInput:
		b.WriteString(p.Part)
		b.WriteString(" of ")
		b.WriteString(orDash(p.Tool))
		if len(p.Args) > 0 {
			b.WriteByte(' ')
			b.WriteString(ArgsSummary(p.Args, ArgsSummaryBytes))
		}
	default:
		b.WriteString(string(p.Role))
		b.WriteString(" text")
	}
	b.WriteString(" removed (")
	if p.Rung != events.RungNone {
		b.WriteString(string(p.Rung))
		b.WriteByte(' ')
	}
	b.WriteString(string(p.Reason))
	fmt.Fprintf(&b, ", %d tokens).", p.Tokens)
	switch {
	case p.Survivor != "" && p.SurvivorRemoved != "":
		b.WriteByte(' ')
		b.WriteString(survivorNoun(p.Rung))
		b.WriteString(": ")
		b.WriteString(p.Survivor)
		b.WriteString(", since removed too (")
		b.WriteString(p.SurvivorRemoved)
		if p.SurvivorNext != "" {
			b.WriteString(", deferring to ")
			b.WriteString(p.SurvivorNext)
		}
		b.WriteString(").")
	case p.Survivor != "":
		b.WriteByte(' ')
		b.WriteString(survivorLabel(p.Rung))
		b.WriteString(": ")
		b.WriteString(p.Survivor)
		b.WriteByte('.')
	}
	if p.Source != "" {
		b.WriteString(" Source: ")
		b.WriteString(truncUTF8(p.Source, ArgsSummaryBytes))
		b.WriteByte('.')
	}
	if r := p.Residue; r != nil {
		b.WriteString(" Residue: tool ")
		b.WriteString(orDash(r.Tool))
		b.WriteString(", error ")
		if r.ErrorType != "" {
			b.WriteString(r.ErrorType)
			b.WriteByte(' ')
		}
		b.WriteString(quoteJSON(truncUTF8(r.ErrorMessage, residueMsgBytes)))
		if r.Skeleton != "" {
			b.WriteString(", skeleton ")
			b.WriteString(truncUTF8(r.Skeleton, residueSkelBytes))
		}
		b.WriteByte('.')
	}
	if p.Original != "" {
		b.WriteString(" Original: ")
		if strings.HasPrefix(p.Original, "sha256:") {
			b.WriteString(shortHash(p.Original))
		} else {
			b.WriteString("event ")
			b.WriteString(p.Original)
		}
		b.WriteString(" in the session log.")
	}
	b.WriteString(" Recover: prunesched item ")
	b.WriteString(p.Session)
	b.WriteByte(' ')
	b.WriteString(p.Item)
	b.WriteByte(']')
	return b.String()
}

// shortHash cuts a content address to its first 12 hex digits.
func shortHash(h string) string {
	if n := len("sha256:") + shortHashHexBytes; len(h) > n {
		return h[:n]
	}
	return h
}

// survivorNoun names the survivor's relation without claiming it is kept.
func survivorNoun(r events.Rung) string {
	switch r {
	case events.L0:
		return "Identical copy"
	case events.L1:
		return "Same source version"
	case events.L2:
		return "Superseded by"
	}
	return "Deferred to"
}

func survivorLabel(r events.Rung) string {
	switch r {
	case events.L0:
		return "Identical copy kept"
	case events.L1:
		return "Same source version kept"
	case events.L2:
		return "Superseded by"
	}
	return "Kept"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// ArgsSummary summarises a tool call's arguments for a placeholder: the
// canonical JSON (sorted keys) of an object with short scalar values kept,
// long strings replaced by "<N bytes>", nested values by their size, cut at
// limit bytes on a member boundary ("…" marks the cut). It never copies more
// than limit bytes of the arguments.
func ArgsSummary(raw json.RawMessage, limit int) string {
	v, err := decodeJSON(raw)
	if err != nil {
		return fmt.Sprintf("<%d bytes>", len(raw))
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return truncUTF8(summariseValue(v), limit)
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		member := quoteJSON(truncUTF8(k, argKeyBytes)) + ":" + summariseValue(obj[k])
		sep := ""
		if i > 0 {
			sep = ","
		}
		if b.Len()+len(sep)+len(member)+1 > limit {
			b.WriteString(sep)
			b.WriteString("…")
			break
		}
		b.WriteString(sep)
		b.WriteString(member)
	}
	b.WriteByte('}')
	return b.String()
}

func summariseValue(v any) string {
	switch x := v.(type) {
	case string:
		if len(x) <= argValueBytes && !strings.ContainsAny(x, "\n\r") {
			return quoteJSON(x)
		}
		return quoteJSON(fmt.Sprintf("<%d bytes>", len(x)))
	case json.Number:
		return truncUTF8(x.String(), argValueBytes)
	case bool:
		return strconv.FormatBool(x)
	case nil:
		return "null"
	case map[string]any:
		return quoteJSON(fmt.Sprintf("<object, %d keys>", len(x)))
	case []any:
		return quoteJSON(fmt.Sprintf("<array, %d items>", len(x)))
	}
	return `"?"`
}

// truncUTF8 cuts s to at most n bytes on a rune boundary, marking a cut
// with "…" (counted in n when n allows).
func truncUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ell = "…"
	cut := n - len(ell)
	if cut < 0 {
		cut = 0
	}
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ell
}

// decodeJSON decodes one JSON value keeping numbers as written.
func decodeJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// quoteJSON returns s as a JSON string without HTML escaping.
func quoteJSON(s string) string {
	b, _ := marshalJSON(s)
	return string(b)
}

// marshalJSON encodes v compactly without HTML escaping (the model sees
// "<" and "&" as written) and without a trailing newline. Struct fields
// encode in declaration order and map keys sorted, so it is deterministic.
func marshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// canonicalJSON re-encodes a JSON value with sorted keys, compact, without
// HTML escaping; invalid input is returned as is.
func canonicalJSON(raw json.RawMessage) string {
	v, err := decodeJSON(raw)
	if err != nil {
		return string(raw)
	}
	b, err := marshalJSON(v)
	if err != nil {
		return string(raw)
	}
	return string(b)
}
