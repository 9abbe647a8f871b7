package proxy

import (
	"net/http"
	"strings"

	"github.com/prunesched/prunesched/events"
)

// Headers the proxy reads. They are removed before the request goes
// upstream.
const (
	// TenantHeader names the request's tenant (overrides Config.Tenant).
	TenantHeader = "X-Prunesched-Tenant"
	// SessionHeader names the request's session (overrides every other
	// rule).
	SessionHeader = "X-Prunesched-Session"
)

// sessionHeaders are the clients' own session headers, in the order they
// are consulted: Claude Code, Codex, OpenCode.
var sessionHeaders = []string{
	"X-Claude-Code-Session-Id",
	"Session-Id",
	"X-Session-Id",
	"Thread-Id",
	"X-Session-Affinity",
}

// identity returns the tenant and the base session of a request.
//
// The rule: the tenant is the X-Prunesched-Tenant header when it is a valid
// token, else the configured tenant. The session is, in order, the
// X-Prunesched-Session header; the client's session header
// (X-Claude-Code-Session-Id for Claude Code, session-id for Codex,
// x-session-id for OpenCode); else the derived id "derived-" + the first 12
// hex digits of SHA-256(api, system prompt, first user message), which is
// stable for a conversation because clients resend the history unchanged.
// A header value is used as is when it is a valid token, else its invalid
// characters become '_' (and a long value is cut and suffixed with a hash).
//
// A base session holds one conversation (a "lane"). A request whose first
// user message is not in the base session's log (a Claude Code subagent, a
// restarted conversation under the same header) goes to the session
// base + "-" + 8 hex digits of its first user message's item id instead;
// see Proxy.lane.
func (p *Proxy) identity(h http.Header, c *conversation) (tenant, base, source string) {
	tenant = p.cfg.Tenant
	if t := h.Get(TenantHeader); t != "" {
		if events.ValidToken(t) {
			tenant = t
		} else {
			p.log.Warn("proxy: ignoring invalid tenant header", "tenant_len", len(t))
		}
	}
	if s := h.Get(SessionHeader); s != "" {
		return tenant, sanitizeSession(s), s
	}
	for _, name := range sessionHeaders {
		if s := h.Get(name); s != "" {
			return tenant, sanitizeSession(s), s
		}
	}
	return tenant, "derived-" + hash12(string(c.api)+"\x00"+c.system+"\x00"+c.firstUser), ""
}

// sanitizeSession makes a header value a valid session token.
func sanitizeSession(s string) string {
	if events.ValidToken(s) && len(s) <= 100 {
		return s
	}
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	out := string(b)
	if len(out) > 100 {
		out = out[:80] + "_" + hash12(s)
	}
	if out = strings.Trim(out, "_"); out == "" {
		out = "session-" + hash12(s)
	}
	return out
}
