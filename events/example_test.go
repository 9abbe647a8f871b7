package events_test

import (
	"errors"
	"fmt"

	"github.com/prunesched/prunesched/events"
)

// ExampleDecode decodes one native JSONL line strictly, and shows that a
// line with an unknown field is refused with the field named.
func ExampleDecode() {
	ev, err := events.Decode([]byte(`{"v":1,"id":"e01","type":"session_started","session":"sample","time":"2026-11-30T09:00:00Z","data":{"format":"native","agent":"example","provider":"anthropic","model":"claude-sonnet-4-5"}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(ev.Type, ev.Session, ev.ID)

	_, err = events.Decode([]byte(`{"v":1,"id":"e02","type":"session_started","session":"sample","time":"2026-11-30T09:00:00Z","colour":"red","data":{}}`))
	var fe *events.FieldError
	fmt.Println(errors.As(err, &fe))
	// Output:
	// session_started sample e01
	// true
}
