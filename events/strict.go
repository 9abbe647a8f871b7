package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// strictUnmarshal decodes b into v rejecting unknown fields and trailing
// data, and turns encoding/json errors into FieldErrors where it can.
func strictUnmarshal(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonToFieldError(err)
	}
	if dec.More() {
		return errors.New("trailing data after JSON value")
	}
	return nil
}

func jsonToFieldError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		f := te.Field
		if f == "" {
			f = "(value)"
		}
		return fieldErr(f, "bad value: %s is not a valid %s", te.Value, te.Type)
	}
	var fe *FieldError
	if errors.As(err, &fe) {
		return fe
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return fieldErr(strings.Trim(name, `"`), "unknown field")
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("invalid JSON at byte %d: %w", se.Offset, err)
	}
	return err
}

func asFieldError(err error, target **FieldError) bool { return errors.As(err, target) }

// strictUnmarshalWhole is strictUnmarshal that also requires nothing but
// white space after the value (what json.Unmarshal checks first).
func strictUnmarshalWhole(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	for _, c := range b[dec.InputOffset():] {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return errors.New("trailing data after JSON value")
		}
	}
	return nil
}
