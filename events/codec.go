package events

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// MaxLineBytes bounds one JSONL line (a tool output inline can be large).
const MaxLineBytes = 64 << 20

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

// DecodeJSONL reads the native session format: one event per line, blank
// lines and lines starting with '#' ignored. The first bad line stops
// decoding with a *LineError naming the file, line and field. Event ids must
// be unique within a session.
func DecodeJSONL(r io.Reader, file string) ([]Event, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), MaxLineBytes)
	var out []Event
	seen := map[string]int{}
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 || b[0] == '#' {
			continue
		}
		e, err := DecodeInput(b)
		if err != nil {
			return nil, &LineError{File: file, Line: line, Err: err}
		}
		key := e.TenantOrDefault() + "/" + e.Session + "/" + e.ID
		if prev, dup := seen[key]; dup {
			return nil, &LineError{File: file, Line: line, Err: fieldErr("id", "duplicate id %q (first on line %d)", e.ID, prev)}
		}
		seen[key] = line
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, &LineError{File: file, Line: line + 1, Err: err}
	}
	return out, nil
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
