// Package configtest checks, for the table tests of the Config.Validate
// methods (api, pipeline, service), that an error says what it must: a
// valid config is accepted, an invalid one refused with every field it
// names.
package configtest

import (
	"strings"
	"testing"
)

// Check fails t unless err matches want: nil when want is empty, otherwise
// an error containing every string of want.
func Check(t testing.TB, err error, want ...string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("valid config refused: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("invalid config accepted (want an error saying %q)", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
}
