package service

import (
	"strings"
	"testing"
)

// TestAppendConflictIs409: an event id reused with different content is a
// 409 naming the id, and nothing of the batch is stored.
func TestAppendConflictIs409(t *testing.T) {
	svc := startT(t, t.TempDir())
	defer svc.Close()
	base := "http://" + svc.HTTPAddr
	ev := func(id, text string) string {
		return `{"v":1,"id":"` + id + `","type":"message","session":"c","time":"2026-11-30T10:00:00Z","data":{"item":"m-` + id + `","role":"user","text":"` + text + `"}}`
	}
	if code, b := httpDo(t, "POST", base+"/v1/events", []byte(ev("e1", "hi")+"\n"+ev("e2", "there"))); code != 200 {
		t.Fatalf("append %d %s", code, b)
	}
	code, b := httpDo(t, "POST", base+"/v1/events", []byte(ev("e3", "new")+"\n"+ev("e2", "changed")))
	if code != 409 || !strings.Contains(string(b), `\"e2\"`) {
		t.Fatalf("conflicting append: %d %s, want 409 naming e2", code, b)
	}
	evs, err := svc.Store.ReadSession(t.Context(), "", "c")
	if err != nil || len(evs) != 2 {
		t.Fatalf("session holds %d events (%v), want the first 2", len(evs), err)
	}
}
