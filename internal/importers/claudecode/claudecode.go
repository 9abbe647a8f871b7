// Package claudecode imports Claude Code session transcripts (the JSONL files
// under ~/.claude/projects/<dir>/<session>.jsonl) as prunesched events.
//
// Only what the model saw becomes an event: message.content of main-thread
// user and assistant lines, one model_request per API response (message.id),
// and compact_boundary as a host_compaction. The display copy toolUseResult,
// progress lines, sidechains and bookkeeping lines are ignored.
package claudecode

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/importers/internal/build"
	lines "github.com/prunesched/prunesched/internal/importers/internal/jsonl"
)

// Format is the format name of Claude Code transcripts.
const Format = "claude-code"

// syntheticModel is the model Claude Code writes on assistant lines it made
// up itself (no API call was made).
const syntheticModel = "<synthetic>"

type line struct {
	Type             string       `json:"type"`
	Subtype          string       `json:"subtype"`
	UUID             string       `json:"uuid"`
	SessionID        string       `json:"sessionId"`
	Timestamp        string       `json:"timestamp"`
	CWD              string       `json:"cwd"`
	Version          string       `json:"version"`
	IsSidechain      bool         `json:"isSidechain"`
	IsMeta           bool         `json:"isMeta"`
	IsCompactSummary bool         `json:"isCompactSummary"`
	IsAPIError       bool         `json:"isApiErrorMessage"`
	RequestID        string       `json:"requestId"`
	Message          *message     `json:"message"`
	CompactMetadata  *compactMeta `json:"compactMetadata"`
}

type compactMeta struct {
	PreTokens int `json:"preTokens"`
}

type message struct {
	ID      string          `json:"id"`
	Model   string          `json:"model"`
	Content json.RawMessage `json:"content"`
	Usage   *usage          `json:"usage"`
}

type usage struct {
	InputTokens   int `json:"input_tokens"`
	OutputTokens  int `json:"output_tokens"`
	CacheCreation int `json:"cache_creation_input_tokens"`
	CacheRead     int `json:"cache_read_input_tokens"`
	CacheTiers    *struct {
		Ephemeral1h int `json:"ephemeral_1h_input_tokens"`
	} `json:"cache_creation"`
}

type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	Data      string          `json:"data"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

// record is one parsed main-thread line kept for the emit pass.
type record struct {
	n      int // 1-based line number
	l      line
	at     time.Time
	blocks []block // nil when content is a string
	text   string  // string content
	isStr  bool
}

// Import reads one Claude Code transcript. name is used in error messages
// and as the session's source path. A transcript is one session.
func Import(r io.Reader, name string) ([]build.Session, error) {
	recs, info, err := parse(r, name)
	if err != nil {
		return nil, err
	}
	s, err := emit(recs, info, name)
	if err != nil {
		return nil, err
	}
	return []build.Session{s}, nil
}

// fileInfo is what the first pass learns about the whole file.
type fileInfo struct {
	start time.Time
	title string
	// usage per response key, field-wise max over the response's lines:
	// the streamed lines repeat the input and cache counts and grow
	// output_tokens.
	usage map[string]*events.Usage
}

func parse(r io.Reader, name string) ([]record, *fileInfo, error) {
	info := &fileInfo{usage: map[string]*events.Usage{}}
	var recs []record
	err := lines.Each(r, name, func(n int, b []byte) error {
		rec, keep, err := parseLine(b, n, info)
		if err != nil {
			return fmt.Errorf("%s:%d: %w", name, n, err)
		}
		if keep {
			recs = append(recs, rec)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return recs, info, nil
}

func parseLine(b []byte, n int, info *fileInfo) (record, bool, error) {
	var hdr struct {
		Type    string `json:"type"`
		Subtype string `json:"subtype"`
	}
	if err := json.Unmarshal(b, &hdr); err != nil {
		return record{}, false, build.FieldError(err, "")
	}
	switch {
	case hdr.Type == "user" || hdr.Type == "assistant":
	case hdr.Type == "system" && hdr.Subtype == "compact_boundary":
	default:
		// Bookkeeping lines (progress, file-history-snapshot, summary,
		// other system subtypes, ...) and unknown future types: not model
		// context. They still tell when the session started and, for
		// summary lines, its title.
		var loose struct {
			Timestamp string `json:"timestamp"`
			Summary   string `json:"summary"`
		}
		if json.Unmarshal(b, &loose) == nil {
			if t, err := time.Parse(time.RFC3339Nano, loose.Timestamp); err == nil {
				info.start = earliest(info.start, t)
			}
			if hdr.Type == "summary" && info.title == "" {
				info.title = loose.Summary
			}
		}
		return record{}, false, nil
	}
	if err := build.CheckText(b); err != nil {
		return record{}, false, err
	}
	var l line
	if err := json.Unmarshal(b, &l); err != nil {
		return record{}, false, build.FieldError(err, "")
	}
	rec := record{n: n, l: l}
	if l.Timestamp != "" {
		t, err := time.Parse(time.RFC3339Nano, l.Timestamp)
		if err != nil {
			return record{}, false, fmt.Errorf("field %q: %w", "timestamp", err)
		}
		rec.at = t.UTC()
		info.start = earliest(info.start, rec.at)
	}
	if l.IsSidechain {
		// Subagent context, not the main thread's.
		return record{}, false, nil
	}
	if l.Type == "system" {
		return rec, true, nil
	}
	if l.Message == nil {
		return record{}, false, build.Missing("message")
	}
	c := bytes.TrimSpace(l.Message.Content)
	switch {
	case len(c) == 0 || string(c) == "null":
		return record{}, false, build.Missing("message.content")
	case c[0] == '"':
		if err := json.Unmarshal(c, &rec.text); err != nil {
			return record{}, false, build.FieldError(err, "message.content")
		}
		rec.isStr = true
	case c[0] == '[':
		var raws []json.RawMessage
		if err := json.Unmarshal(c, &raws); err != nil {
			return record{}, false, build.FieldError(err, "message.content")
		}
		rec.blocks = make([]block, len(raws))
		for i, raw := range raws {
			if err := json.Unmarshal(raw, &rec.blocks[i]); err != nil {
				return record{}, false, build.FieldError(err, fmt.Sprintf("message.content[%d]", i))
			}
			if f := missingField(rec.blocks[i], l.Type); f != "" {
				return record{}, false, build.Missing(fmt.Sprintf("message.content[%d].%s", i, f))
			}
		}
	default:
		return record{}, false, fmt.Errorf("field %q: want a string or an array of blocks", "message.content")
	}
	if l.Type == "assistant" && l.Message.Model != syntheticModel {
		key := responseKey(rec)
		if u := l.Message.Usage; u != nil {
			var oneHour int
			if u.CacheTiers != nil {
				oneHour = u.CacheTiers.Ephemeral1h
			}
			acc := info.usage[key]
			if acc == nil {
				info.usage[key] = &events.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CacheReadTokens: u.CacheRead, CacheWriteTokens: u.CacheCreation, CacheWrite1hTokens: oneHour}
				return rec, true, nil
			}
			acc.InputTokens = max(acc.InputTokens, u.InputTokens)
			acc.OutputTokens = max(acc.OutputTokens, u.OutputTokens)
			acc.CacheReadTokens = max(acc.CacheReadTokens, u.CacheRead)
			acc.CacheWriteTokens = max(acc.CacheWriteTokens, u.CacheCreation)
			acc.CacheWrite1hTokens = max(acc.CacheWrite1hTokens, oneHour)
		}
	}
	return rec, true, nil
}

// missingField names a field a known block type needs but lacks, or "".
func missingField(b block, lineType string) string {
	switch {
	case b.Type == "tool_use" && lineType == "assistant" && b.ID == "":
		return "id"
	case b.Type == "tool_use" && lineType == "assistant" && b.Name == "":
		return "name"
	case b.Type == "tool_result" && lineType == "user" && b.ToolUseID == "":
		return "tool_use_id"
	}
	return ""
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

// responseKey identifies the API response an assistant line belongs to.
func responseKey(r record) string {
	switch {
	case r.l.Message != nil && r.l.Message.ID != "":
		return r.l.Message.ID
	case r.l.RequestID != "":
		return r.l.RequestID
	case r.l.UUID != "":
		return r.l.UUID
	}
	return fmt.Sprintf("cc-line-%d", r.n)
}

// isMetaText reports whether user text was injected by the harness (a
// reminder, local command output, a hook, an interruption marker) rather
// than typed by the person.
func isMetaText(s string) bool {
	s = strings.TrimLeft(s, " \t\r\n")
	for _, p := range [...]string{
		"<system-reminder>", "<local-command-caveat>", "<local-command-stdout>",
		"<local-command-stderr>", "<bash-stdout>", "<bash-stderr>",
		"<user-prompt-submit-hook>", "[Request interrupted by user",
	} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
