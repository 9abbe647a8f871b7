package api

import (
	"crypto/sha256"
	"net"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Login attempts are rate-limited twice: per client (every attempt, right
// or wrong token, counts against the remote address, so guessing is slow)
// and per token (a known token's logins, so one tenant cannot churn
// login sessions). Both are token buckets on the API's clock.
const (
	// loginClientBurst attempts at once per client, then one per
	// loginClientEvery.
	loginClientBurst = 20
	loginClientEvery = 3 * time.Second
	// loginTokenBurst logins at once per token, then one per
	// loginTokenEvery.
	loginTokenBurst = 10
	loginTokenEvery = 6 * time.Second
	// maxLoginClients bounds the clients tracked; past it the ones whose
	// bucket is full again (as good as new) are forgotten first.
	maxLoginClients = 10000
)

// loginLimits holds the buckets. Keys are client addresses (an IPv6
// address by its /64: one host holds a whole prefix) and SHA-256 digests
// of known tokens, never the tokens.
type loginLimits struct {
	mu      sync.Mutex
	clients map[string]*rate.Limiter
	tokens  map[[sha256.Size]byte]*rate.Limiter
}

func newLoginLimits() *loginLimits {
	return &loginLimits{clients: map[string]*rate.Limiter{}, tokens: map[[sha256.Size]byte]*rate.Limiter{}}
}

// client takes one attempt from the bucket of the client at remoteAddr
// (http.Request.RemoteAddr) at now; false says how long until the next.
func (l *loginLimits) client(remoteAddr string, now time.Time) (bool, time.Duration) {
	k := clientKey(remoteAddr)
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.clients[k]; !ok && len(l.clients) >= maxLoginClients {
		l.forgetClients(now)
	}
	return take(l.clients, k, loginClientEvery, loginClientBurst, now)
}

// token takes one login from the bucket of a known token at now.
func (l *loginLimits) token(token string, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return take(l.tokens, sha256.Sum256([]byte(token)), loginTokenEvery, loginTokenBurst, now)
}

// forgetClients drops the clients whose bucket is full again, and when
// none is, one at random (it gets a full bucket back: no worse than a new
// address). The caller holds mu.
func (l *loginLimits) forgetClients(now time.Time) {
	for k, lim := range l.clients {
		if lim.TokensAt(now) >= float64(lim.Burst()) {
			delete(l.clients, k)
		}
	}
	for k := range l.clients {
		if len(l.clients) < maxLoginClients {
			break
		}
		delete(l.clients, k)
	}
}

// take takes one from m[k]'s bucket (made with one every `every`, burst
// burst, when missing) at now; when empty it says how long until one.
func take[K comparable](m map[K]*rate.Limiter, k K, every time.Duration, burst int, now time.Time) (bool, time.Duration) {
	lim, ok := m[k]
	if !ok {
		lim = rate.NewLimiter(rate.Every(every), burst)
		m[k] = lim
	}
	if lim.AllowN(now, 1) {
		return true, 0
	}
	missing := 1 - lim.TokensAt(now)
	return false, time.Duration(missing * float64(every))
}

// clientKey is the bucket key of a remote address: its IP, an IPv6
// address cut to its /64.
func clientKey(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return host
	}
	if ip.To4() == nil {
		return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
	}
	return ip.String()
}
