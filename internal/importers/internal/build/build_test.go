package build

import (
	"strings"
	"testing"
	"time"

	"github.com/prunesched/prunesched/events"
)

func TestSanitize(t *testing.T) {
	for _, tc := range []struct{ in, token, id string }{
		{"ses_abc-1", "ses_abc-1", "ses_abc-1"},
		{"a b/c:ü", "a-b-c--", "a-b/c:-"},
		{"", "", "item"},
		{"-x", "-x", "x-x"},
		{".hidden", "-hidden", "x.hidden"},
	} {
		if got := SanitizeToken(tc.in); got != tc.token {
			t.Errorf("SanitizeToken(%q) = %q, want %q", tc.in, got, tc.token)
		}
		if got := SanitizeID(tc.in); got != tc.id {
			t.Errorf("SanitizeID(%q) = %q, want %q", tc.in, got, tc.id)
		}
	}
	if got := SanitizeToken(strings.Repeat("a", 300)); len(got) != 128 {
		t.Errorf("token length %d", len(got))
	}
	if got := SanitizeID(strings.Repeat("a", 300)); len(got) != maxItemBase {
		t.Errorf("id length %d", len(got))
	}
}

func TestBuilder(t *testing.T) {
	b := New("test", "dir/my file.jsonl")
	if a, c := b.Item("x"), b.Item("x"); a != "x" || c != "x:2" {
		t.Errorf("items %q %q", a, c)
	}
	// "x" is taken as an item, so a call "x" moves to "x:2"... also taken.
	if c := b.Call("x"); c != "x:3" {
		t.Errorf("call %q", c)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	b.Add("e", time.Time{}, "l1", &events.Message{Item: "m0", Role: events.RoleUser})
	b.Add("e", t0, "l2", &events.Message{Item: "m1", Role: events.RoleUser})
	b.Add("e", t0.Add(-time.Second), "l3", &events.Message{Item: "m2", Role: events.RoleUser})
	b.HintStart(t0.Add(-time.Minute))
	s, err := b.Finish("start")
	if err != nil {
		t.Fatal(err)
	}
	if s.Events[0].Session != "my-file" || s.Events[0].ID != "start" {
		t.Errorf("session %q id %q", s.Events[0].Session, s.Events[0].ID)
	}
	wantTimes := []time.Time{t0.Add(-time.Minute), t0.Add(-time.Minute), t0, t0}
	for i, e := range s.Events {
		if !e.Time.Equal(wantTimes[i]) {
			t.Errorf("event %d at %v, want %v", i, e.Time, wantTimes[i])
		}
	}
	if s.Events[2].ID != "e.2" || s.Events[3].ID != "e.3" {
		t.Errorf("ids %s %s", s.Events[2].ID, s.Events[3].ID)
	}

	bad := New("test", "f")
	bad.Add("e", t0, "f:7", &events.Message{Item: "m", Role: "robot"})
	if _, err := bad.Finish("s"); err == nil || !strings.HasPrefix(err.Error(), `f:7: field "data.role"`) {
		t.Errorf("error %v", err)
	}
}

func TestErrorSummary(t *testing.T) {
	if got := ErrorSummary("\n a\n\nb\nc\nd\ne\nf\n"); got != " a\nb\nc\nd\ne" {
		t.Errorf("got %q", got)
	}
	long := ErrorSummary(strings.Repeat("é", 400))
	if len(long) > 503 || !strings.HasSuffix(long, "...") || !strings.HasPrefix(long, "é") {
		t.Errorf("long summary %d bytes", len(long))
	}
}
