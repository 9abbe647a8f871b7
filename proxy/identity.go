package proxy

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
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

// credentialHeaders carry the request's credential: Anthropic API keys
// (x-api-key), OpenAI keys and OAuth bearer tokens (Authorization), Azure
// OpenAI keys (api-key). The proxy forwards them untouched and never
// stores or logs them; it only keys a session by their HMAC.
var credentialHeaders = []string{"X-Api-Key", "Authorization", "Api-Key"}

// IdentityKeySize is the size of a generated identity key in bytes.
const IdentityKeySize = 32

// credentialTag is the session suffix of a request's credential: "-k" + 12
// hex digits of HMAC-SHA256(IdentityKey, the credential headers' names and
// values), or "" when the request sends no credential (a local model). The
// key is secret, so the tag reveals nothing about the credential and no one
// without the key can choose a credential that lands in someone else's
// session.
func (p *Proxy) credentialTag(h http.Header) string {
	mac := hmac.New(sha256.New, p.cfg.IdentityKey)
	found := false
	for _, name := range credentialHeaders {
		for _, v := range h.Values(name) {
			if v == "" {
				continue
			}
			found = true
			mac.Write([]byte(name))
			mac.Write([]byte{0})
			mac.Write([]byte(v))
			mac.Write([]byte{0})
		}
	}
	if !found {
		return ""
	}
	return "-k" + hex.EncodeToString(mac.Sum(nil)[:6])
}

// identity returns the tenant and the base session of a request.
//
// The rule: the tenant is the X-Prunesched-Tenant header when it is a valid
// token, else the configured tenant. The session is a name followed by the
// credential tag. The name is, in order, the X-Prunesched-Session header;
// the client's session header (X-Claude-Code-Session-Id for Claude Code,
// session-id for Codex, x-session-id for OpenCode); else the derived id
// "derived-" + the first 12 hex digits of SHA-256(api, system prompt, first
// user message), which is stable for a conversation because clients resend
// the history unchanged. A header value is used as is when it is a valid
// token, else its invalid characters become '_' (and a long value is cut
// and suffixed with a hash).
//
// The credential tag is "-k" + 12 hex digits of HMAC-SHA256 keyed with
// Config.IdentityKey over the request's credential headers (x-api-key,
// Authorization, api-key), always appended when the request sends one and
// never when it sends none (local models). So a session never spans two
// credentials: the same session header (or the same opening) sent with
// another API key or token is another session, and one user with one key
// keeps one stable id, e.g. "7ef78460-70fe-4c7e-8941-73dc3d823a80-k1f2e3d4c5b6a".
// The tag is deterministic for a key and a credential; with a random key
// (Config.IdentityKey nil) it changes at every restart. A credential that
// rotates (an OAuth token refreshed mid-session) starts a new session,
// which receives the whole history again as its first request: safe, but
// the decisions of the old session do not carry over.
//
// A base session holds one conversation (a "lane"). A request whose first
// user message is not in the base session's log (a Claude Code subagent, a
// restarted conversation under the same header) goes to the session
// base + "-" + 8 hex digits of its first user message's item id instead;
// see Proxy.lane.
func (p *Proxy) identity(h http.Header, c *conversation) (tenant, base, source string) {
	tenant, base, source, ok := p.headerIdentity(h, true)
	if ok {
		return tenant, base, source
	}
	return tenant, p.derivedSession(h, c), ""
}

// derivedSession is the base session of a request whose headers name
// none (identity): "derived-", a hash of its opening, the credential tag.
func (p *Proxy) derivedSession(h http.Header, c *conversation) string {
	return "derived-" + hash12(string(c.api)+"\x00"+c.system+"\x00"+c.firstUser) + p.credentialTag(h)
}

// headerIdentity is identity's tenant, and its base session when the
// request's headers name one (ok): known before the body is read. warn
// logs an invalid tenant header (once per request: identity does).
func (p *Proxy) headerIdentity(h http.Header, warn bool) (tenant, base, source string, ok bool) {
	tenant = p.cfg.Tenant
	if t := h.Get(TenantHeader); t != "" {
		if events.ValidToken(t) {
			tenant = t
		} else if warn {
			p.log.Warn("proxy: ignoring invalid tenant header", "tenant_len", len(t))
		}
	}
	if s := h.Get(SessionHeader); s != "" {
		return tenant, sanitizeSession(s) + p.credentialTag(h), s, true
	}
	for _, name := range sessionHeaders {
		if s := h.Get(name); s != "" {
			return tenant, sanitizeSession(s) + p.credentialTag(h), s, true
		}
	}
	return tenant, "", "", false
}

// NewIdentityKey returns a random identity key (IdentityKeySize bytes).
func NewIdentityKey() ([]byte, error) {
	k := make([]byte, IdentityKeySize)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("generate identity key: %w", err)
	}
	return k, nil
}

// LoadOrCreateIdentityKey returns the identity key kept in the file at
// path, creating the file (mode 0600, 64 hex digits) with a random key the
// first time. Keeping the key lets sessions continue across restarts. A
// file that others can read or write, or that does not hold a key, is an
// error naming the file.
func LoadOrCreateIdentityKey(path string) ([]byte, error) {
	k, err := readIdentityKey(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return k, err
	}
	k, err = NewIdentityKey()
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("identity key: %w", err)
	}
	// Write a temporary file whole, then link it into place: a concurrent
	// process never reads a partial key, and the first one to link wins.
	tmp, err := os.CreateTemp(dir, ".proxy-identity-*.tmp")
	if err != nil {
		return nil, fmt.Errorf("identity key: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("identity key %s: %w", tmp.Name(), err)
	}
	if _, err := tmp.WriteString(hex.EncodeToString(k) + "\n"); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("identity key %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("identity key %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return nil, fmt.Errorf("identity key %s: %w", tmp.Name(), err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return readIdentityKey(path)
		}
		return nil, fmt.Errorf("identity key %s: %w", path, err)
	}
	return k, nil
}

func readIdentityKey(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("identity key %s: %w", path, err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("identity key %s: mode %v lets others read it; run chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("identity key %s: %w", path, err)
	}
	k, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(k) < 16 {
		return nil, fmt.Errorf("identity key %s: want at least 32 hex digits", path)
	}
	return k, nil
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
