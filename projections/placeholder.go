package projections

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/prunesched/prunesched/internal/toolspec"
	"github.com/prunesched/prunesched/placeholder"
)

// HostPlaceholder is what the host itself shows for an output it cleared
// (OpenCode's compacted tool results); such items render with it and count
// as host-pruned, not as ours.
const HostPlaceholder = "[Old tool result content cleared]"

// Placeholder limits: how much of an item's arguments or residue a
// placeholder or a pruned input's residue object may quote. Arguments are
// summarised to keys and short values first, then cut at ArgsSummaryBytes.
const (
	ArgsSummaryBytes = 120
	argValueBytes    = 48
	argKeyBytes      = 32
	residueMsgBytes  = placeholder.ResidueMsgBytes
	residueSkelBytes = placeholder.ResidueSkelBytes
)

// PlaceholderSpec is what a placeholder may say about a removed item:
// identity, never content. It is placeholder.Spec, the one definition.
type PlaceholderSpec = placeholder.Spec

// Placeholder returns the mechanical placeholder text for a pruned item
// (placeholder.Render): tool, source, rung and reason, the count the
// certificate records, the surviving item and the recovery handle.
func Placeholder(p PlaceholderSpec) string { return placeholder.Render(p) }

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
	v, err := toolspec.DecodeJSON(raw)
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

// canonicalArgs is a call's arguments as a request shows them: canonical
// JSON (toolspec.CanonicalJSON: sorted keys, compact, numbers as written,
// no HTML escaping), or the input as it is when it is not JSON.
func canonicalArgs(raw json.RawMessage) string {
	if c, _, ok := toolspec.CanonicalJSON(raw); ok {
		return c
	}
	return string(raw)
}
