package api

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prunesched/prunesched/events"
)

func TestDecodeBody(t *testing.T) {
	line := `{"v":1,"id":"e1","type":"message","session":"s","time":"2026-11-30T10:00:00Z","data":{"item":"m","role":"user","text":"hi"}}`
	cases := []struct {
		name, body, wantErr string
		n                   int
	}{
		{"jsonl", line + "\n" + strings.Replace(line, `"e1"`, `"e2"`, 1), "", 2},
		{"array", "[" + line + "]", "", 1},
		{"bad array element", `[` + line + `,{"v":1}]`, "event[1]", 0},
		{"bad line", line + "\n{\"v\":1,\"id\":\"e2\",\"type\":\"nope\"}", "request body:2", 0},
		{"not json array", `[1,`, "body", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			evs, err := decodeBody([]byte(tc.body), 0)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || len(evs) != tc.n {
				t.Fatalf("got %d events, %v", len(evs), err)
			}
		})
	}
}

func TestScopeTenant(t *testing.T) {
	mk := func(tenant string) []events.Event {
		return []events.Event{{ID: "e1", Tenant: tenant}}
	}
	evs := mk("")
	if err := scopeTenant(evs, "acme"); err != nil || evs[0].Tenant != "acme" {
		t.Errorf("untenanted event not scoped: %v %q", err, evs[0].Tenant)
	}
	evs = mk("")
	if err := scopeTenant(evs, events.DefaultTenant); err != nil || evs[0].Tenant != "" {
		t.Errorf("default tenant must stay implicit: %v %q", err, evs[0].Tenant)
	}
	if err := scopeTenant(mk("other"), "acme"); err == nil {
		t.Error("an event naming another tenant was accepted")
	}
}

func TestTenantOf(t *testing.T) {
	r := httptest.NewRequest("GET", "/v1/sessions?tenant=acme", nil)
	if got, err := tenantOf(r); err != nil || got != "acme" {
		t.Errorf("query tenant: %q %v", got, err)
	}
	r = httptest.NewRequest("GET", "/v1/sessions", nil)
	r.Header.Set(TenantHeader, "a.b")
	if _, err := tenantOf(r); err == nil {
		t.Error("a tenant with a dot (a NATS token separator) was accepted")
	}
	r = httptest.NewRequest("GET", "/v1/sessions", nil)
	if got, _ := tenantOf(r); got != events.DefaultTenant {
		t.Errorf("default tenant: %q", got)
	}
}
