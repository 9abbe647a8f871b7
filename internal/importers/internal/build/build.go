// Package build holds what every trace importer shares: the imported Session
// type, a Builder that turns source records into valid events (session id,
// unique item ids, non-decreasing times, a leading session_started) and small
// helpers for locating errors in the source.
package build

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prunesched/prunesched/events"
)

// Session is one imported session in input form: tool outputs are inline in
// ToolResult.Output and token counts are left 0 (the store fills them).
type Session struct {
	// Format is the source format ("claude-code", "opencode", "native").
	Format string
	// Source is the file the session was read from.
	Source string
	// SourceID is the session id the source used.
	SourceID string
	// Events are the session's events in session order, all with the same
	// Session and (for imported traces) an empty Tenant. The first one is a
	// session_started.
	Events []events.Event
}

// maxItemBase bounds a sanitised item id before uniqueness suffixes, so the
// suffixed id stays within the 200 characters events allows.
const maxItemBase = 180

// Builder collects one session's events. It is not safe for concurrent use.
type Builder struct {
	format, source string
	sourceID       string
	started        events.SessionStarted
	startHint      time.Time

	evs   []events.Event
	locs  []string
	items map[string]bool
	ids   map[string]bool
	last  time.Time
}

// New starts a session of the given format read from source (a file name).
func New(format, source string) *Builder {
	return &Builder{
		format:  format,
		source:  source,
		started: events.SessionStarted{Format: format, SourcePath: source},
		items:   map[string]bool{},
		ids:     map[string]bool{},
	}
}

// SetSourceID records the session id the source used; the event session
// name is derived from it. Only the first non-empty id counts.
func (b *Builder) SetSourceID(id string) {
	if b.sourceID == "" && id != "" {
		b.sourceID = id
		b.started.SourceID = id
	}
}

// SourceID returns the recorded source session id.
func (b *Builder) SourceID() string { return b.sourceID }

// Started gives access to the session_started payload so the importer can
// fill in what it learns (agent, cwd, provider, model, title).
func (b *Builder) Started() *events.SessionStarted { return &b.started }

// HintStart records the earliest time the source shows for the session; the
// session_started event uses it when it is not after the first event.
func (b *Builder) HintStart(t time.Time) {
	if t.IsZero() {
		return
	}
	if b.startHint.IsZero() || t.Before(b.startHint) {
		b.startHint = t.UTC()
	}
}

// Item returns a valid item id derived from base that no earlier call
// returned, and reserves it. Invalid characters become '-'; a repeated id
// gets a deterministic ":<n>" suffix.
func (b *Builder) Item(base string) string {
	s := SanitizeID(base)
	id := s
	for n := 2; b.items[id]; n++ {
		id = fmt.Sprintf("%s:%d", s, n)
	}
	b.items[id] = true
	return id
}

// Call returns a unique call id derived from base such that both the call id
// (the result's item) and events.CallInputItem of it (the input's item) are
// free, and reserves both.
func (b *Builder) Call(base string) string {
	s := SanitizeID(base)
	id := s
	for n := 2; b.items[id] || b.items[events.CallInputItem(id)]; n++ {
		id = fmt.Sprintf("%s:%d", s, n)
	}
	b.items[id] = true
	b.items[events.CallInputItem(id)] = true
	return id
}

// Add appends an event. at is the source's timestamp for it, or the zero
// time when the source gives none (the previous event's time is reused);
// times that go backwards are clamped to the previous event's. loc names the
// source position for error messages ("file.jsonl:12").
func (b *Builder) Add(id string, at time.Time, loc string, p events.Payload) {
	at = at.UTC()
	if at.IsZero() || at.Before(b.last) {
		at = b.last
	}
	b.last = at
	base := id
	for n := 2; b.ids[id]; n++ {
		id = fmt.Sprintf("%s.%d", base, n)
	}
	b.ids[id] = true
	b.evs = append(b.evs, events.Event{V: events.SchemaVersion, ID: id, Type: p.EventType(), Time: at, Data: p})
	b.locs = append(b.locs, loc)
}

// Len is the number of events added so far (session_started excluded).
func (b *Builder) Len() int { return len(b.evs) }

// Finish prepends session_started (event id startID), fixes times the
// source did not give, names the session and validates every event. A
// validation failure is reported at the source position of the event.
func (b *Builder) Finish(startID string) (Session, error) {
	session := SanitizeToken(b.sourceID)
	if session == "" {
		base := filepath.Base(b.source)
		session = SanitizeToken(strings.TrimSuffix(base, filepath.Ext(base)))
	}
	if session == "" {
		session = "session"
	}
	first := time.Time{}
	for _, e := range b.evs {
		if !e.Time.IsZero() {
			first = e.Time
			break
		}
	}
	start := b.startHint
	if start.IsZero() || (!first.IsZero() && first.Before(start)) {
		start = first
	}
	if start.IsZero() {
		start = time.Unix(0, 0).UTC()
	}
	st := b.started
	out := make([]events.Event, 0, len(b.evs)+1)
	out = append(out, events.Event{V: events.SchemaVersion, ID: uniqueID(b.ids, startID), Type: events.TypeSessionStarted, Time: start, Data: &st})
	locs := append([]string{b.source}, b.locs...)
	for _, e := range b.evs {
		if e.Time.IsZero() {
			e.Time = start
		}
		out = append(out, e)
	}
	for i := range out {
		out[i].Session = session
		if err := out[i].Validate(); err != nil {
			return Session{}, fmt.Errorf("%s: %w", locs[i], err)
		}
		if y := out[i].Time.Year(); y < 1 || y > 9999 {
			return Session{}, fmt.Errorf("%s: field \"time\": year %d out of range", locs[i], y)
		}
	}
	return Session{Format: b.format, Source: b.source, SourceID: b.sourceID, Events: out}, nil
}

func uniqueID(ids map[string]bool, id string) string {
	base := id
	for n := 2; ids[id]; n++ {
		id = fmt.Sprintf("%s.%d", base, n)
	}
	ids[id] = true
	return id
}

// SanitizeToken maps s to a valid session name: characters outside
// [A-Za-z0-9_-] become '-', and it is cut to 128 bytes. Empty stays empty.
func SanitizeToken(s string) string {
	var sb strings.Builder
	for _, r := range s {
		if sb.Len() >= 128 {
			break
		}
		if r < utf8.RuneSelf && (isAlnum(byte(r)) || r == '_' || r == '-') {
			sb.WriteRune(r)
		} else {
			sb.WriteByte('-')
		}
	}
	return sb.String()
}

// SanitizeID maps s to a valid item or event id: characters outside
// [A-Za-z0-9._:/@+=-] become '-', an id must start with a letter or digit
// (else "x" is prepended), and it is cut to 180 bytes. Empty becomes "item".
func SanitizeID(s string) string {
	if s == "" {
		return "item"
	}
	var sb strings.Builder
	if !isAlnum(s[0]) {
		sb.WriteByte('x')
	}
	for _, r := range s {
		if sb.Len() >= maxItemBase {
			break
		}
		if r < utf8.RuneSelf && (isAlnum(byte(r)) || strings.IndexByte("._:/@+=-", byte(r)) >= 0) {
			sb.WriteRune(r)
		} else {
			sb.WriteByte('-')
		}
	}
	return sb.String()
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// FieldError turns an encoding/json decoding error into one that names the
// field, prefixed with prefix ("message" gives "message.usage.input_tokens").
// Syntax errors are reported as invalid JSON.
func FieldError(err error, prefix string) error {
	join := func(f string) string {
		switch {
		case prefix == "":
			return f
		case f == "":
			return prefix
		}
		return prefix + "." + f
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		f := join(te.Field)
		if f == "" {
			return fmt.Errorf("not a JSON object (found %s)", te.Value)
		}
		return fmt.Errorf("field %q: bad value: %s is not a valid %s", f, te.Value, te.Type)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("invalid JSON at byte %d: %w", se.Offset, err)
	}
	return err
}

// Missing reports a required field that is absent.
func Missing(field string) error { return fmt.Errorf("field %q: missing", field) }

// ErrorSummary shortens a tool's error text for ToolError.Message: the first
// few non-empty lines, at most about 500 bytes, cut at a rune boundary.
func ErrorSummary(s string) string {
	const maxLines, maxBytes = 5, 500
	var lines []string
	for l := range strings.SplitSeq(s, "\n") {
		l = strings.TrimRight(l, " \t\r")
		if strings.TrimSpace(l) == "" {
			continue
		}
		lines = append(lines, l)
		if len(lines) == maxLines {
			break
		}
	}
	out := strings.Join(lines, "\n")
	if len(out) > maxBytes {
		cut := maxBytes
		for cut > 0 && !utf8.RuneStart(out[cut]) {
			cut--
		}
		out = out[:cut] + "..."
	}
	return out
}

// Str reads a string argument from a decoded tool input.
func Str(v any) string {
	s, _ := v.(string)
	return s
}

// InputMap decodes a tool input for reading a few arguments; a non-object
// input gives an empty map.
func InputMap(raw json.RawMessage) map[string]any {
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return map[string]any{}
	}
	return m
}

// Input returns raw as a tool call input, "{}" when absent or null.
func Input(raw json.RawMessage) json.RawMessage {
	t := strings.TrimSpace(string(raw))
	if t == "" || t == "null" {
		return json.RawMessage("{}")
	}
	return json.RawMessage(t)
}

// ReadJSON reads a whole-file JSON trace from r into v: the text must be
// valid UTF-8 without lone surrogates (CheckText), and a decoding error
// names the file and the line and column or field (Locate). It returns
// the bytes read, for the converters that need them again.
func ReadJSON(r io.Reader, name string, v any) ([]byte, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%s: read: %w", name, err)
	}
	if err := CheckText(data); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return nil, Locate(name, data, "", err)
	}
	return data, nil
}

// ImportJSON imports a whole-file JSON trace that holds one session: it
// reads r into a T (ReadJSON), reports the first top-level field that
// missing names (it returns "" when none is missing, nil checks nothing),
// and converts the trace with convert.
func ImportJSON[T any](r io.Reader, name string, missing func(*T) string, convert func(name string, trace *T) (Session, error)) ([]Session, error) {
	var trace T
	if _, err := ReadJSON(r, name, &trace); err != nil {
		return nil, err
	}
	if missing != nil {
		if field := missing(&trace); field != "" {
			return nil, fmt.Errorf("%s: %w", name, Missing(field))
		}
	}
	s, err := convert(name, &trace)
	if err != nil {
		return nil, err
	}
	return []Session{s}, nil
}

// Locate formats a JSON decoding error for a whole-file JSON format: a
// syntax error in the file (path "") by line and column, a type error by
// the JSON path of the element being decoded and the field.
func Locate(name string, data []byte, path string, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) && path == "" {
		line, col := LineCol(data, se.Offset)
		return fmt.Errorf("%s:%d:%d: invalid JSON: %w", name, line, col, err)
	}
	if path == "" {
		return fmt.Errorf("%s: %w", name, FieldError(err, ""))
	}
	return fmt.Errorf("%s: %s: %w", name, path, FieldError(err, ""))
}

// LineCol converts a byte offset in data to a 1-based line and column.
func LineCol(data []byte, off int64) (int, int) {
	off = max(min(off, int64(len(data))), 0)
	before := data[:off]
	line := strings.Count(string(before), "\n") + 1
	col := int(off) - (strings.LastIndexByte(string(before), '\n') + 1)
	return line, col
}

// Text reads a JSON value that should be a string; null or absent gives "",
// and a non-string value is kept as its JSON text.
func Text(raw json.RawMessage) (string, error) {
	c := strings.TrimSpace(string(raw))
	if c == "" || c == "null" {
		return "", nil
	}
	if c[0] == '"' {
		var s string
		if err := json.Unmarshal([]byte(c), &s); err != nil {
			return "", FieldError(err, "")
		}
		return s, nil
	}
	return c, nil
}

// ChatText renders OpenAI-style message content as the model saw it: a
// string, or a list of parts whose text is joined with "\n" (non-text parts
// become "[<type>]").
func ChatText(raw json.RawMessage) (string, error) {
	c := strings.TrimSpace(string(raw))
	if c == "" || c == "null" {
		return "", nil
	}
	switch c[0] {
	case '"':
		var s string
		if err := json.Unmarshal([]byte(c), &s); err != nil {
			return "", FieldError(err, "")
		}
		return s, nil
	case '[':
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal([]byte(c), &parts); err != nil {
			return "", FieldError(err, "")
		}
		out := make([]string, 0, len(parts))
		for _, p := range parts {
			switch {
			case p.Text != "" || p.Type == "text" || p.Type == "input_text" || p.Type == "output_text":
				out = append(out, p.Text)
			case p.Type != "":
				out = append(out, "["+p.Type+"]")
			}
		}
		return strings.Join(out, "\n"), nil
	}
	return "", fmt.Errorf("want a string or an array of parts")
}

// EpochSeconds converts fractional epoch seconds; nil, zero or out of range
// gives the zero time (the builder then reuses the previous event's time).
func EpochSeconds(v *float64) time.Time {
	if v == nil || *v <= 0 || *v > 253402300799 {
		return time.Time{}
	}
	sec := int64(*v)
	return time.Unix(sec, int64((*v-float64(sec))*1e9)).UTC()
}

// CheckText refuses a JSON input whose strings encoding/json would change
// when decoding them (bytes that are not valid UTF-8, escaped lone
// surrogates: both become U+FFFD): prunesched keeps text byte-exact, so an
// importer reports the field instead of importing altered text (see
// events.CheckText).
func CheckText(b []byte) error {
	if err := events.CheckText(b); err != nil {
		return fmt.Errorf("field %w", err)
	}
	return nil
}
