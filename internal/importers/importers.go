// Package importers turns agent session traces into prunesched events in
// input form. It detects the format and hands the input to the importer for
// it: claudecode (Claude Code JSONL transcripts), opencode (OpenCode
// exports), sweagent (SWE-agent .traj), miniswe (mini-swe-agent .traj.json),
// openhands (OpenHands V0 event lists), aider (Aider chat histories), codex
// (Codex CLI rollouts) or the native prunesched JSONL (events.DecodeJSONL).
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
	"github.com/prunesched/prunesched/internal/importers/aider"
	"github.com/prunesched/prunesched/internal/importers/claudecode"
	"github.com/prunesched/prunesched/internal/importers/codex"
	"github.com/prunesched/prunesched/internal/importers/internal/build"
	"github.com/prunesched/prunesched/internal/importers/miniswe"
	"github.com/prunesched/prunesched/internal/importers/opencode"
	"github.com/prunesched/prunesched/internal/importers/openhands"
	"github.com/prunesched/prunesched/internal/importers/sweagent"
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
	FormatSWEAgent   = sweagent.Format
	FormatMiniSWE    = miniswe.Format
	FormatOpenHands  = openhands.Format
	FormatAider      = aider.Format
	FormatCodex      = codex.Format
)

// Formats lists the supported format names; FormatAuto (or "") in Import
// detects the format instead.
func Formats() []string {
	return []string{FormatNative, FormatClaudeCode, FormatOpenCode, FormatSWEAgent, FormatMiniSWE, FormatOpenHands, FormatAider, FormatCodex}
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
	case FormatSWEAgent:
		return sweagent.Import(br, name)
	case FormatMiniSWE:
		return miniswe.Import(br, name)
	case FormatOpenHands:
		return openhands.Import(br, name)
	case FormatAider:
		return aider.Import(br, name)
	case FormatCodex:
		return codex.Import(br, name)
	}
	return nil, fmt.Errorf("%s: unknown format %q (want %s or %s)", name, format, strings.Join(Formats(), ", "), FormatAuto)
}

// Detect sniffs the format from the first bytes of the input (head) and the
// file name. An Aider history starts with "# aider chat started at" (or is
// named *.aider.chat.history.md). Otherwise it reads the keys of the first
// JSON record, even when head cuts it off: a native event has "v", "type",
// "session" and "data"; a Claude Code line has "type" and Claude Code's line
// fields (sessionId, uuid, ...); a Codex rollout line has "timestamp",
// "type" and "payload"; an OpenCode export is one object with "info" and
// "messages"; a mini-swe-agent trajectory has "trajectory_format" (or
// "messages" and "instance_id"); a SWE-agent trajectory has "trajectory" or
// "history"; an OpenHands event list is an array of events with "action" or
// "observation". The extension decides when the keys do not (.traj,
// .traj.json, .json).
func Detect(head []byte, name string) (string, error) {
	head = bytes.TrimPrefix(head, []byte("\xef\xbb\xbf"))
	base := strings.ToLower(filepath.Base(name))
	if start := bytes.TrimLeft(head, " \t\r\n"); bytes.HasPrefix(start, []byte(aider.RunPrefix)) || strings.HasSuffix(base, ".aider.chat.history.md") {
		return FormatAider, nil
	}
	first := firstRecord(head)
	if len(first) == 0 {
		return "", fmt.Errorf("%s: cannot detect format: empty input", name)
	}
	if first[0] != '{' && first[0] != '[' {
		return "", fmt.Errorf("%s: cannot detect format: input does not start with a JSON object or array", name)
	}
	// The record starts at first and may run past head (a long line, or a
	// pretty-printed file): read its keys as far as head goes.
	rec := head[bytes.Index(head, first):]
	keys, array := topKeys(rec)
	compact := strings.Join(strings.Fields(string(rec[:min(len(rec), 4096)])), "")
	if keys["info"] && (strings.HasSuffix(base, ".traj.json") || bytes.Contains(rec, []byte(`"mini_version"`)) || bytes.Contains(rec, []byte(`"trajectory_format"`))) {
		// mini-swe-agent writes info and messages before trajectory_format.
		return FormatMiniSWE, nil
	}
	if f := classify(keys, array); f != "" {
		return f, nil
	}
	if strings.HasPrefix(compact, `{"info":{"id":"ses_`) {
		return FormatOpenCode, nil
	}
	switch {
	case strings.HasSuffix(base, ".traj.json"):
		return FormatMiniSWE, nil
	case strings.HasSuffix(base, ".traj"):
		return FormatSWEAgent, nil
	case strings.HasSuffix(base, ".json") && !array:
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

// topKeys reads the keys of the first JSON value in b (an object; for an
// array, its first element) up to where b ends or stops being valid JSON.
func topKeys(b []byte) (map[string]bool, bool) {
	keys := map[string]bool{}
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return keys, false
	}
	array := tok == json.Delim('[')
	want := 1 // depth of the object whose keys count
	if array {
		want = 2
	}
	depth := 1
	expectKey := !array
	for {
		tok, err := dec.Token()
		if err != nil {
			return keys, array
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				depth++
				if array && depth == want {
					expectKey = d == '{' // entering the first element
				}
			default:
				depth--
				if depth < want {
					return keys, array
				}
				if depth == want {
					expectKey = true // a nested value ended
				}
			}
			continue
		}
		if depth != want {
			continue
		}
		if expectKey {
			if k, ok := tok.(string); ok {
				keys[k] = true
			}
			expectKey = false
		} else {
			expectKey = true // a scalar value ended
		}
	}
}

func classify(keys map[string]bool, array bool) string {
	has := func(k string) bool { return keys[k] }
	switch {
	case array && (has("action") || has("observation")) && (has("id") || has("source") || has("timestamp")):
		return FormatOpenHands
	case array:
		return ""
	case has("v") && has("type") && has("session") && has("data"):
		return FormatNative
	case has("info") && has("messages") && !has("trajectory_format") && !has("instance_id"):
		return FormatOpenCode
	case has("trajectory_format") || has("messages") && has("instance_id"):
		return FormatMiniSWE
	case has("trajectory") || has("history") && (has("info") || has("environment")):
		return FormatSWEAgent
	case has("timestamp") && has("type") && has("payload"):
		return FormatCodex
	case has("type") && (has("sessionId") || has("uuid") || has("parentUuid") || has("leafUuid") || has("messageId")):
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
