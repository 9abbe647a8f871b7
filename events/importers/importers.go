// Package importers turns agent session traces into prunesched events in
// input form. It detects the format and hands the input to the importer for
// it: claudecode (Claude Code JSONL transcripts), opencode (OpenCode exports)
// or the native prunesched JSONL (events.DecodeJSONL).
//
// Importers keep only what the model saw: display copies, progress and
// bookkeeping records are dropped. Every event an importer returns passes
// events.Event.Validate; errors name the file and the line (JSONL) or the
// JSON path and field (JSON).
package importers

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/importers/claudecode"
	"github.com/prunesched/prunesched/events/importers/internal/build"
	"github.com/prunesched/prunesched/events/importers/opencode"
)

// Session is one imported session in input form: Format, Source (file
// path), SourceID (the session id the source used) and Events (in session
// order, all with the same Session; tool outputs inline in
// ToolResult.Output; token counts 0, the store fills them).
type Session = build.Session

// Format names.
const (
	FormatAuto       = "auto"
	FormatNative     = "native"
	FormatClaudeCode = claudecode.Format
	FormatOpenCode   = opencode.Format
)

// Formats lists the supported format names; FormatAuto (or "") in Import
// detects the format instead.
func Formats() []string {
	return []string{FormatNative, FormatClaudeCode, FormatOpenCode}
}

// headBytes is how much of the input Detect is given by ImportReader.
const headBytes = 64 << 10

// Import opens the file at path and imports it (see ImportReader).
func Import(path, format string) ([]Session, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	defer f.Close()
	return ImportReader(f, path, format)
}

// ImportReader imports the sessions in r. name is the file name used in
// error messages and as each session's Source. format is one of Formats,
// or FormatAuto / "" to detect it from the first bytes and the name.
func ImportReader(r io.Reader, name, format string) ([]Session, error) {
	br := bufio.NewReaderSize(r, headBytes)
	if format == "" || format == FormatAuto {
		head, err := br.Peek(headBytes)
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
			return nil, fmt.Errorf("%s: read: %w", name, err)
		}
		format, err = Detect(head, name)
		if err != nil {
			return nil, err
		}
	}
	switch format {
	case FormatNative:
		return importNative(br, name)
	case FormatClaudeCode:
		return claudecode.Import(br, name)
	case FormatOpenCode:
		return opencode.Import(br, name)
	}
	return nil, fmt.Errorf("%s: unknown format %q (want %s or %s)", name, format, strings.Join(Formats(), ", "), FormatAuto)
}

// Detect sniffs the format from the first bytes of the input (head) and the
// file name. It looks at the first record: a native event has "v", "type",
// "session" and "data"; a Claude Code line has "type" and Claude Code's
// line fields (sessionId, uuid, ...); an OpenCode export is one object
// starting with "info" and holding "messages".
func Detect(head []byte, name string) (string, error) {
	head = bytes.TrimPrefix(head, []byte("\xef\xbb\xbf"))
	first := firstRecord(head)
	if len(first) == 0 {
		return "", fmt.Errorf("%s: cannot detect format: empty input", name)
	}
	if first[0] != '{' {
		return "", fmt.Errorf("%s: cannot detect format: input does not start with a JSON object", name)
	}
	var keys map[string]json.RawMessage
	if json.Unmarshal(first, &keys) == nil {
		if f := classify(keys); f != "" {
			return f, nil
		}
	} else if f := classifyPrefix(head); f != "" {
		// The first record is cut off (a long line, or a pretty-printed
		// export): judge by the keys it starts with.
		return f, nil
	}
	switch strings.ToLower(filepath.Ext(name)) {
	case ".json":
		return FormatOpenCode, nil
	}
	return "", fmt.Errorf("%s: cannot detect format (give one of %s)", name, strings.Join(Formats(), ", "))
}

// firstRecord returns the first non-blank line that is not a '#' comment.
func firstRecord(head []byte) []byte {
	for len(head) > 0 {
		line, rest, _ := bytes.Cut(head, []byte("\n"))
		head = rest
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		return line
	}
	return nil
}

func classify(keys map[string]json.RawMessage) string {
	has := func(k string) bool { _, ok := keys[k]; return ok }
	switch {
	case has("v") && has("type") && has("session") && has("data"):
		return FormatNative
	case has("info") && has("messages"):
		return FormatOpenCode
	case has("type") && (has("sessionId") || has("uuid") || has("parentUuid") || has("leafUuid") || has("messageId")):
		return FormatClaudeCode
	}
	return ""
}

// classifyPrefix judges a cut-off first record by the keys near its start.
func classifyPrefix(head []byte) string {
	s := string(head)
	if len(s) > 4096 {
		s = s[:4096]
	}
	compact := strings.Join(strings.Fields(s), "")
	switch {
	case strings.HasPrefix(compact, `{"info":`) && strings.Contains(s, `"messages"`) || strings.HasPrefix(compact, `{"info":{"id":"ses_`):
		return FormatOpenCode
	case strings.HasPrefix(compact, `{"v":`) && strings.Contains(compact, `"session":`):
		return FormatNative
	case strings.Contains(compact, `"sessionId":`) || strings.Contains(compact, `"parentUuid":`):
		return FormatClaudeCode
	}
	return ""
}

// importNative decodes the native JSONL format and groups the events by
// tenant and session, in order of first appearance, keeping each session's
// events in file order.
func importNative(r io.Reader, name string) ([]Session, error) {
	evs, err := events.DecodeJSONL(r, name)
	if err != nil {
		return nil, err
	}
	var out []Session
	index := map[string]int{}
	for _, e := range evs {
		key := e.Tenant + "/" + e.Session
		i, ok := index[key]
		if !ok {
			i = len(out)
			index[key] = i
			out = append(out, Session{Format: FormatNative, Source: name, SourceID: e.Session})
		}
		if st, ok := e.Data.(*events.SessionStarted); ok && st.SourceID != "" && len(out[i].Events) == 0 {
			out[i].SourceID = st.SourceID
		}
		out[i].Events = append(out[i].Events, e)
	}
	return out, nil
}
