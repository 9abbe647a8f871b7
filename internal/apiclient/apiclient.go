// Package apiclient is a client of prunesched's HTTP API (package api): the
// requests the CLI's client commands send to a running `serve` or `proxy`,
// with the tenant and bearer token every request carries, and the API's
// error messages returned as errors. It holds no state beyond its
// configuration and never prints or logs the token.
package apiclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DefaultTimeout bounds one request of a Client made by New.
const DefaultTimeout = 2 * time.Minute

// Client sends requests to one API base URL as one tenant.
type Client struct {
	// Base is the API's URL without a trailing slash
	// ("http://127.0.0.1:7070").
	Base string
	// Tenant, when set, is sent as the tenant query parameter; with a
	// token the server takes the token's tenant and refuses another.
	Tenant string
	// Token, when set, is sent as "Authorization: Bearer TOKEN".
	Token string
	HTTP  *http.Client
}

// New returns a client of the API at base.
func New(base, tenant, token string) *Client {
	return &Client{Base: strings.TrimRight(base, "/"), Tenant: tenant, Token: token, HTTP: &http.Client{Timeout: DefaultTimeout}}
}

// Error is a response outside 2xx: its status and the API's message.
type Error struct {
	Method, Path string
	Status       int
	// Message is the API's "error" field, or the HTTP status text.
	Message string
}

func (e *Error) Error() string { return e.Message }

// ErrUnreachable wraps a request that got no response at all.
var ErrUnreachable = errors.New("no answer from the prunesched API")

// Do sends a request to path (query q, body of content type ctype) and
// returns the response body. A response outside 2xx is an *Error carrying
// the API's message; no response at all wraps ErrUnreachable.
func (c *Client) Do(ctx context.Context, method, path string, q url.Values, body io.Reader, ctype string) ([]byte, error) {
	if q == nil {
		q = url.Values{}
	}
	if c.Tenant != "" {
		q.Set("tenant", c.Tenant)
	}
	u := c.Base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w: %w", method, c.Base, ErrUnreachable, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read response of %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		e := &Error{Method: method, Path: path, Status: resp.StatusCode, Message: fmt.Sprintf("%s %s: %s", method, path, resp.Status)}
		var eb struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(b, &eb) == nil && eb.Error != "" {
			e.Message = eb.Error
		}
		return nil, e
	}
	return b, nil
}

// GetJSON fetches path and decodes the JSON answer into v; it also returns
// the answer as sent.
func (c *Client) GetJSON(ctx context.Context, path string, v any) ([]byte, error) {
	out, err := c.Do(ctx, "GET", path, nil, nil, "")
	if err != nil {
		return nil, err
	}
	if v != nil {
		if err := json.Unmarshal(out, v); err != nil {
			return out, fmt.Errorf("bad response from %s: %w", path, err)
		}
	}
	return out, nil
}

// SessionPath is the API path of a session's resource rest ("" for the
// session itself, "/decisions", ...).
func SessionPath(session, rest string) string {
	return "/v1/sessions/" + url.PathEscape(session) + rest
}

// itemEscaper escapes what an item id or a placeholder's recovery handle
// ("#12") may hold that a URL path cannot carry as is; "/" stays (the
// route takes the rest of the path).
var itemEscaper = strings.NewReplacer("%", "%25", "#", "%23", "?", "%3F")

// ItemPath is the API path of one item of a session (its id or recovery
// handle), with rest appended ("" or "/pin", ...).
func ItemPath(session, item, rest string) string {
	return SessionPath(session, "/items/"+itemEscaper.Replace(item)+rest)
}
