package events

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// MaxLineBytes bounds one JSONL line, and one element of a JSON array of
// events (a tool output inline can be large); past it the input is refused
// with a *LineTooLongError (HTTP 413) before it is decoded.
const MaxLineBytes = 64 << 20

// LineLimit is a bound on one JSONL line, and one element of a JSON array
// of events, in bytes: its methods decode as the package's functions do,
// which use MaxLineBytes, under that bound instead. It lets a server take
// a smaller bound from its configuration, and tests check the rule without
// 64 MiB inputs. Zero or less is MaxLineBytes.
type LineLimit int

// bytes is the bound in bytes.
func (l LineLimit) bytes() int {
	if l <= 0 {
		return MaxLineBytes
	}
	return int(l)
}

// LineError locates a decoding error in a JSONL input.
type LineError struct {
	File string
	Line int
	Err  error
}

func (e *LineError) Error() string {
	if e.File == "" {
		return fmt.Sprintf("line %d: %v", e.Line, e.Err)
	}
	return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
}

func (e *LineError) Unwrap() error { return e.Err }

// Decode decodes one event strictly.
//
// Input in the exact form Encode writes (what the log holds) is decoded
// by a hand-written parser (decodeFast) that accepts only input the strict
// decoder accepts, with the same result; anything else, and every error,
// goes through the strict decoder.
func Decode(b []byte) (Event, error) {
	if e, ok := decodeFast(b); ok {
		return e, nil
	}
	return decodeSlow(b)
}

// Decoder decodes events as Decode does, to the same results, reusing
// its parser from one event to the next (Decode allocates one per event)
// and sharing equal short strings between the events it decodes (see
// strCache: fewer allocations, and one copy of a session's, tool's or
// policy version's name in what keeps the events). Keep one for a
// stream of events rather than one per event.
// The zero value is ready; a Decoder is not safe for concurrent use.
type Decoder struct {
	p fastParser
}

// Decode decodes one event strictly, as the function Decode does.
func (d *Decoder) Decode(b []byte) (Event, error) {
	if d.p.shared == nil {
		d.p.shared = new(strCache)
	}
	if e, ok := d.p.event(b); ok {
		return e, nil
	}
	return decodeSlow(b)
}

// decodeSlow is Decode without the fast path.
//
// The input is scanned once by the strict envelope decoder (unknown fields
// rejected) instead of first by json.Unmarshal and then again by it: an
// input is accepted exactly when it is one JSON value (plus white space)
// that the strict decoder accepts, which is what json.Unmarshal required.
// Any failure is decoded again the original way, so errors are unchanged.
func decodeSlow(b []byte) (Event, error) {
	var e Event
	if err := e.decodeStrict(b); err == nil {
		return e, nil
	}
	e = Event{}
	if err := json.Unmarshal(b, &e); err != nil {
		var fe *FieldError
		if errors.As(err, &fe) {
			return Event{}, fe
		}
		return Event{}, jsonToFieldError(err)
	}
	return e, nil
}

// Encode encodes one event as compact JSON (no trailing newline). The
// encoding is deterministic: the same event gives the same bytes.
func Encode(e Event) ([]byte, error) {
	if err := e.Validate(); err != nil {
		return nil, fmt.Errorf("encode event %s: %w", e.ID, err)
	}
	return EncodeValidated(e)
}

// LineTooLongError reports a JSONL line, or an element of a JSON array of
// events, over MaxLineBytes. Servers answer it with 413.
type LineTooLongError struct {
	// Bytes is the line's length; 0 when only known to be over the limit
	// (read from a stream).
	Bytes int64
	// Limit is the bound it went over (zero: MaxLineBytes).
	Limit LineLimit
	// What names the unit: "line" or "element".
	What string
}

// Error names the length (when known), the limit and the unit; a
// LineError or the array decoder adds the line or element.
func (e *LineTooLongError) Error() string {
	if e.Bytes > 0 {
		return fmt.Sprintf("%d bytes over the %s %s limit", e.Bytes, e.Limit, e.What)
	}
	return fmt.Sprintf("over the %s %s limit", e.Limit, e.What)
}

// String names the bound as the errors do: "64 MiB", or "1000-byte" when
// it is not a whole number of MiB.
func (l LineLimit) String() string {
	n := l.bytes()
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d-byte", n)
}

// DecodeJSONL reads the native session format: one event per line, blank
// lines and lines starting with '#' ignored. The first bad line stops
// decoding with a *LineError naming the file, line and field; a line over
// MaxLineBytes is a *LineError wrapping a *LineTooLongError. Event ids must
// be unique within a session.
func DecodeJSONL(r io.Reader, file string) ([]Event, error) {
	return LineLimit(MaxLineBytes).DecodeJSONL(r, file)
}

// DecodeJSONL is the function DecodeJSONL under the bound l.
func (l LineLimit) DecodeJSONL(r io.Reader, file string) ([]Event, error) {
	sc := bufio.NewScanner(r)
	// The scanner's buffer holds a line and its newline: a line of
	// exactly the bound fits, as it does in DecodeJSONLBytes.
	sc.Buffer(make([]byte, 0, min(64*1024, l.bytes()+1)), l.bytes()+1)
	d := lineDecoder{file: file, seen: map[string]int{}}
	for sc.Scan() {
		// The buffer's room for the newline lets a last line without
		// one reach a byte past the bound.
		if n := len(sc.Bytes()); n > l.bytes() {
			return nil, &LineError{File: file, Line: d.n + 1, Err: &LineTooLongError{Bytes: int64(n), Limit: l, What: "line"}}
		}
		if err := d.line(sc.Bytes()); err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			err = &LineTooLongError{Limit: l, What: "line"}
		}
		return nil, &LineError{File: file, Line: d.n + 1, Err: err}
	}
	return d.out, nil
}

// DecodeJSONLBytes is DecodeJSONL for input held in memory: lines are
// decoded where they lie, never copied, and a line over MaxLineBytes is
// refused with its length before it is decoded.
func DecodeJSONLBytes(b []byte, file string) ([]Event, error) {
	return LineLimit(MaxLineBytes).DecodeJSONLBytes(b, file)
}

// DecodeJSONLBytes is the function DecodeJSONLBytes under the bound l.
func (l LineLimit) DecodeJSONLBytes(b []byte, file string) ([]Event, error) {
	d := lineDecoder{file: file, seen: map[string]int{}}
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if len(line) > l.bytes() {
			return nil, &LineError{File: file, Line: d.n + 1, Err: &LineTooLongError{Bytes: int64(len(line)), Limit: l, What: "line"}}
		}
		if err := d.line(line); err != nil {
			return nil, err
		}
	}
	return d.out, nil
}

// lineDecoder decodes JSONL one line at a time.
type lineDecoder struct {
	file string
	n    int // lines read
	seen map[string]int
	out  []Event
}

// line decodes the next line.
func (d *lineDecoder) line(raw []byte) error {
	d.n++
	b := bytes.TrimSpace(raw)
	if len(b) == 0 || b[0] == '#' {
		return nil
	}
	e, err := DecodeInput(b)
	if err != nil {
		return &LineError{File: d.file, Line: d.n, Err: err}
	}
	key := e.TenantOrDefault() + "/" + e.Session + "/" + e.ID
	if prev, dup := d.seen[key]; dup {
		return &LineError{File: d.file, Line: d.n, Err: fieldErr("id", "duplicate id %q (first on line %d)", e.ID, prev)}
	}
	d.seen[key] = d.n
	d.out = append(d.out, e)
	return nil
}

// DecodeJSONArray reads events from a JSON array of event objects held in
// memory. The array's structure is checked first ("body: ..." errors, as
// for any JSON that does not parse), and an element over MaxLineBytes (the
// JSONL line limit) is refused with a *LineTooLongError, before any element
// is decoded; elements are decoded where they lie, never copied. Errors
// name the element: "event[3]: ...".
func DecodeJSONArray(b []byte) ([]Event, error) {
	return LineLimit(MaxLineBytes).DecodeJSONArray(b)
}

// DecodeJSONArray is the function DecodeJSONArray under the bound l on
// each element.
func (l LineLimit) DecodeJSONArray(b []byte) ([]Event, error) {
	spans, err := arraySpans(b, l)
	if err != nil {
		return nil, err
	}
	out := make([]Event, 0, len(spans))
	for n, sp := range spans {
		e, err := DecodeInput(b[sp[0]:sp[1]])
		if err != nil {
			return nil, fmt.Errorf("event[%d]: %w", n, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// arraySpans returns the spans of the elements of the JSON array b,
// refusing an element over limit.
func arraySpans(b []byte, limit LineLimit) ([][2]int, error) {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '[' {
		return nil, fmt.Errorf("body: invalid JSON at byte %d: want an array of events", i)
	}
	var spans [][2]int
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == ']' {
		return spans, trailing(b, i+1)
	}
	for n := 0; ; n++ {
		end := skipValue(b, i)
		if end < 0 {
			return nil, fmt.Errorf("body: invalid JSON at byte %d: event[%d] does not end", i, n)
		}
		if end-i > limit.bytes() {
			return nil, fmt.Errorf("event[%d]: %w", n, &LineTooLongError{Bytes: int64(end - i), Limit: limit, What: "element"})
		}
		spans = append(spans, [2]int{i, end})
		i = skipWS(b, end)
		if i >= len(b) {
			return nil, fmt.Errorf("body: invalid JSON at byte %d: the array does not end", i)
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case ']':
			return spans, trailing(b, i+1)
		default:
			return nil, fmt.Errorf("body: invalid JSON at byte %d: want ',' or ']' after event[%d]", i, n)
		}
	}
}

// trailing refuses anything but white space after the array ending at i.
func trailing(b []byte, i int) error {
	if j := skipWS(b, i); j < len(b) {
		return fmt.Errorf("body: invalid JSON at byte %d: data after the array", j)
	}
	return nil
}

// EncodeJSONL writes events one per line.
func EncodeJSONL(w io.Writer, evs []Event) error {
	for _, e := range evs {
		b, err := Encode(e)
		if err != nil {
			return err
		}
		b = append(b, '\n')
		if _, err := w.Write(b); err != nil {
			return fmt.Errorf("write event %s: %w", e.ID, err)
		}
	}
	return nil
}
