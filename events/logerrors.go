package events

import (
	"errors"
	"fmt"
)

// The errors an append to the log reports. They are defined here, with the
// events, so every log implementation (events/store) and every caller
// behind an interface (the proxy's Backend) match the same values without
// importing the store.

// ErrIDConflict is returned (wrapped, inside an *EventError naming the
// event) when a fact's id is already stored in its session with different
// content. Nothing of the batch is stored. Match it with errors.Is.
var ErrIDConflict = errors.New("event id already stored with different content")

// ErrConflict is returned (wrapped) by a guarded append when the session's
// last fact is not the one the caller expected: another event landed since
// the caller's decision point. Match it with errors.Is.
var ErrConflict = errors.New("conflict: session changed since the expected sequence")

// EventError says which event of a batch was rejected and why. Err is often
// a *FieldError naming the field.
type EventError struct {
	// Index is the event's position in the batch passed to Append.
	Index int
	// ID is the event id (may be empty when the id itself is missing).
	ID string
	// Err is the cause.
	Err error
}

// Error names the event by position and id, then the cause.
func (e *EventError) Error() string {
	return fmt.Sprintf("event %d (id %q): %v", e.Index, e.ID, e.Err)
}

// Unwrap returns the underlying error.
func (e *EventError) Unwrap() error { return e.Err }
