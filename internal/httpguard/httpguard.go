// Package httpguard is the middleware in front of every prunesched HTTP
// listener (the API and inspector of serve, worker and proxy --api-listen,
// and the proxy's agent listener). It holds one definition of each rule a
// browser-facing server needs whatever its routes:
//
//   - Host: a request must name this server (its bind address, a loopback
//     name on a loopback bind, Config.AllowedHosts, Config.PublicURL's
//     host), else 421. A page on another site that rebinds its DNS name to
//     127.0.0.1 reaches the port, but with its own name in Host.
//   - Origin: a request that changes something (any method but GET and
//     HEAD) is refused (403) when the browser says it comes from another
//     origin: an Origin header naming a host the Host rule refuses, or
//     Sec-Fetch-Site cross-site or same-site. A request with neither
//     header is not from a browser (the CLI, adapters, agents): browsers
//     send Origin with every cross-origin POST.
//   - Headers: every response says X-Content-Type-Options: nosniff,
//     X-Frame-Options: DENY and the Content-Security-Policy CSP.
//   - Cookies: Secure reports whether a cookie set for a request must be
//     Secure (TLS, or an https Config.PublicURL behind a reverse proxy).
//
// It must not authenticate, read bodies or know routes: that is the API's.
package httpguard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// CSP is the Content-Security-Policy of every response: scripts and style
// sheets from this server only (the inspector's app.js and style.css; no
// inline script), inline style attributes allowed (the inspector sizes its
// strip's blocks with them), nothing framed, nothing framing it.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; style-src-attr 'unsafe-inline'; " +
	"img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Config says which hosts a listener answers for. Listen is required.
type Config struct {
	// Listen is the listener's address as configured ("127.0.0.1:7070",
	// "localhost:7070", "0.0.0.0:7070", ":7070").
	Listen string
	// Addr is the address it is bound to (its real port when Listen's is
	// 0); empty: Listen.
	Addr string
	// AllowedHosts are further names clients may address the server by (a
	// container's service name, a host name on the network): "name" at any
	// port, or "name:port".
	AllowedHosts []string
	// PublicURL is where browsers reach the server (a TLS reverse proxy in
	// front, say https://prunesched.example.com): its host is allowed, and
	// an https URL makes cookies Secure.
	PublicURL string
	// Logger receives a debug line per refused request; nil discards.
	Logger *slog.Logger
}

// Validate reports the invalid fields, each named.
func (c Config) Validate() error {
	_, err := build(c)
	return err
}

// Guard is a built Config.
type Guard struct {
	// anyIP allows any IP literal at a bind port (an unspecified bind:
	// an IP literal cannot be rebound to this server by a foreign name).
	anyIP  bool
	ports  []string            // the bind's ports: its port, and "" when that is the scheme's default
	hosts  map[string][]string // host -> ports allowed (nil: any)
	secure bool
	logger *slog.Logger
}

// New builds the guard of c (see Validate).
func New(c Config) (*Guard, error) { return build(c) }

func build(c Config) (*Guard, error) {
	g := &Guard{hosts: map[string][]string{}, logger: c.Logger}
	if g.logger == nil {
		g.logger = slog.New(slog.DiscardHandler)
	}
	var errs []error
	lhost, lport, err := net.SplitHostPort(c.Listen)
	if err != nil {
		errs = append(errs, fmt.Errorf("listen address %q: %w", c.Listen, err))
	}
	addr := c.Addr
	if addr == "" {
		addr = c.Listen
	}
	ahost, aport, err := net.SplitHostPort(addr)
	if err != nil {
		errs = append(errs, fmt.Errorf("bound address %q: %w", addr, err))
	}
	if aport == "" || aport == "0" {
		aport = lport
	}
	g.ports = []string{aport}
	if aport == "80" || aport == "443" {
		g.ports = append(g.ports, "")
	}
	lhost = canonHost(lhost)
	lip := net.ParseIP(lhost)
	switch {
	case lhost == "localhost" || (lip != nil && lip.IsLoopback()):
		for _, h := range []string{"localhost", "127.0.0.1", "::1", lhost} {
			g.hosts[h] = g.ports
		}
	case lhost == "" || (lip != nil && lip.IsUnspecified()):
		g.anyIP = true
		g.hosts["localhost"] = g.ports
	default:
		g.hosts[lhost] = g.ports
	}
	if ip := net.ParseIP(canonHost(ahost)); ip != nil && !ip.IsUnspecified() {
		g.hosts[ip.String()] = g.ports
	}
	for _, h := range c.AllowedHosts {
		name, port, err := parseAllowed(h)
		if err != nil {
			errs = append(errs, fmt.Errorf("allowed host %q: %w", h, err))
			continue
		}
		if port == "" {
			g.hosts[name] = nil
		} else if ps, ok := g.hosts[name]; !ok || ps != nil {
			g.hosts[name] = append(slices.Clip(ps), port)
		}
	}
	if c.PublicURL != "" {
		if err := g.addPublic(c.PublicURL); err != nil {
			errs = append(errs, fmt.Errorf("public URL %q: %w", c.PublicURL, err))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return g, nil
}

// addPublic allows the host of the public URL u, at its port (or at no
// port and the scheme's default).
func (g *Guard) addPublic(u string) error {
	pu, err := url.Parse(u)
	if err != nil {
		return errors.New("not a URL")
	}
	if pu.Scheme != "http" && pu.Scheme != "https" {
		return errors.New("want an http:// or https:// URL")
	}
	if pu.Hostname() == "" || pu.User != nil {
		return errors.New("want a host and no user")
	}
	port := pu.Port()
	ports := []string{port}
	if port == "" {
		ports = []string{"", map[string]string{"http": "80", "https": "443"}[pu.Scheme]}
	}
	name := canonHost(pu.Hostname())
	if ps, ok := g.hosts[name]; !ok || ps != nil {
		g.hosts[name] = append(slices.Clip(ps), ports...)
	}
	g.secure = pu.Scheme == "https"
	return nil
}

// parseAllowed parses an AllowedHosts entry: a host name or IP, with an
// optional port.
func parseAllowed(h string) (name, port string, err error) {
	if h == "" || strings.ContainsAny(h, "/@?# \t") {
		return "", "", errors.New("want a host name or host:port, not a URL")
	}
	name = h
	if n, p, err := net.SplitHostPort(h); err == nil {
		if v, err := strconv.Atoi(p); err != nil || v < 1 || v > 65535 {
			return "", "", fmt.Errorf("port %q: want 1-65535", p)
		}
		name, port = n, p
	}
	name = canonHost(name)
	if name == "" || strings.ContainsAny(name, "[]") {
		return "", "", errors.New("want a host name or host:port")
	}
	return name, port, nil
}

// canonHost lower-cases a host and drops IPv6 brackets and a trailing dot.
func canonHost(h string) string {
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if ip := net.ParseIP(h); ip != nil {
		return ip.String()
	}
	return h
}

// Allowed reports whether hostport (a Host header, or an Origin's host)
// names this server.
func (g *Guard) Allowed(hostport string) bool {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = hostport, ""
	}
	host = canonHost(host)
	if g.anyIP && net.ParseIP(host) != nil && slices.Contains(g.ports, port) {
		return true
	}
	ps, ok := g.hosts[host]
	return ok && (ps == nil || slices.Contains(ps, port))
}

type secureKey struct{}

// Secure reports whether a cookie set in answer to r must be Secure: r
// came over TLS, or the guard in front has an https public URL.
func Secure(r *http.Request) bool {
	v, _ := r.Context().Value(secureKey{}).(bool)
	return v || r.TLS != nil
}

// Handler returns next behind the guard's rules.
func (g *Guard) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Content-Security-Policy", CSP)
		if !g.Allowed(r.Host) {
			g.logger.Debug("refused a request for another host", "host", r.Host, "method", r.Method, "path", r.URL.Path)
			refuse(w, http.StatusMisdirectedRequest, fmt.Sprintf("host %q is not this server's: use its address, or name the host with --allowed-host or --public-url (see docs/security.md)", r.Host))
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if why := g.foreign(r); why != "" {
				g.logger.Debug("refused a cross-origin request", "why", why, "method", r.Method, "path", r.URL.Path)
				refuse(w, http.StatusForbidden, "cross-origin request refused ("+why+"): changes must come from this server's own pages or from a non-browser client")
				return
			}
		}
		if g.secure {
			r = r.WithContext(context.WithValue(r.Context(), secureKey{}, true))
		}
		next.ServeHTTP(w, r)
	})
}

// foreign says why a browser's request comes from another origin, or "".
func (g *Guard) foreign(r *http.Request) string {
	switch s := r.Header.Get("Sec-Fetch-Site"); s {
	case "cross-site", "same-site":
		return "Sec-Fetch-Site: " + s
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return ""
	}
	u, err := url.Parse(o)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || !g.Allowed(u.Host) {
		return "Origin: " + o
	}
	return ""
}

// refuse answers an error the way the API does: JSON {"error": msg}.
func refuse(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
