// Package jsonl is the line reader the JSONL importers share: it reads a
// transcript line by line (the 1-based line number goes into every error),
// drops a leading byte-order mark and blank lines, and splits a line that
// holds several JSON values written back to back (`{...}{...}`, seen in
// real Claude Code transcripts when two writers raced on the file) into
// one value each, so each is imported instead of the whole file failing.
package jsonl

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/prunesched/prunesched/events"
)

// Each calls fn with every JSON value of r and the line it is on. A line
// that is not valid JSON as a whole but is a sequence of valid JSON values
// is split (see Split); any other line is passed whole, so fn reports its
// error. fn's error stops the reading and is returned as is; a read error
// is returned naming name and the line.
func Each(r io.Reader, name string, fn func(line int, value []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), events.MaxLineBytes)
	n := 0
	for sc.Scan() {
		n++
		b := bytes.TrimSpace(sc.Bytes())
		if n == 1 {
			b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
		}
		if len(b) == 0 {
			continue
		}
		for _, v := range Split(b) {
			if err := fn(n, v); err != nil {
				return err
			}
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			err = &events.LineTooLongError{What: "line"}
		}
		return fmt.Errorf("%s:%d: %w", name, n+1, err)
	}
	return nil
}

// Split returns the JSON values of one line: the line itself when it is
// valid JSON or when it cannot be read as a sequence of JSON values (the
// caller's decoder then reports the error), else each value of the
// sequence, trimmed. Only objects and arrays are split: a line like `1 2`
// stays whole.
func Split(line []byte) [][]byte {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || json.Valid(line) || (line[0] != '{' && line[0] != '[') {
		return [][]byte{line}
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	var out [][]byte
	for {
		start := dec.InputOffset()
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil || len(raw) == 0 || (raw[0] != '{' && raw[0] != '[') {
			return [][]byte{line}
		}
		out = append(out, bytes.TrimSpace(line[start:dec.InputOffset()]))
	}
	if len(out) < 2 {
		return [][]byte{line}
	}
	return out
}
