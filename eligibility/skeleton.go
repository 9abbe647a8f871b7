package eligibility

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/prunesched/prunesched/internal/toolspec"
)

// skeleton renders the argument skeleton of a failed call's input for its
// residue: object keys, sizes in bytes of bulky values, paths and short
// scalars verbatim, never the bulk itself.
func skeleton(v any, raw []byte) string {
	var b strings.Builder
	writeSkeleton(&b, "", v, 0)
	s := b.String()
	if v == nil {
		s = fmt.Sprintf("<%d bytes>", len(raw))
	}
	if len(s) > 1024 {
		s = s[:1021] + "..."
	}
	return s
}

func writeSkeleton(b *strings.Builder, key string, v any, depth int) {
	switch x := v.(type) {
	case map[string]any:
		if depth > 3 {
			fmt.Fprintf(b, "{<%d keys>}", len(x))
			return
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Quote(k))
			b.WriteByte(':')
			writeSkeleton(b, k, x[k], depth+1)
		}
		b.WriteByte('}')
	case []any:
		n, _ := json.Marshal(x)
		fmt.Fprintf(b, "[<%d items, %d bytes>]", len(x), len(n))
	case string:
		if toolspec.IsPathKey(key) && len(x) <= 512 || len(x) <= 64 && !strings.ContainsAny(x, "\n") && looksLikePath(x) {
			b.WriteString(strconv.Quote(x))
		} else {
			fmt.Fprintf(b, "<%d bytes>", len(x))
		}
	case json.Number:
		b.WriteString(x.String())
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case nil:
		b.WriteString("null")
	}
}

func looksLikePath(s string) bool {
	return s != "" && !strings.ContainsAny(s, " \t\"'") && (strings.Contains(s, "/") || strings.Contains(s, "."))
}

// leafStrings calls f on every string value of v that is not under a path key.
func leafStrings(key string, v any, f func(string)) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			leafStrings(k, x[k], f)
		}
	case []any:
		for _, e := range x {
			leafStrings(key, e, f)
		}
	case string:
		if !toolspec.IsPathKey(key) {
			f(x)
		}
	}
}
