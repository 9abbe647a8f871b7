// Package jsasktest helps tests lose JetStream API requests on purpose:
// a Relay stands between a client and the JetStream API and leaves the
// requests a test picks unanswered, as the servers do while the Raft
// group that should answer elects a leader (see package jsask).
package jsasktest

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// Relay forwards the JetStream API requests sent on its own prefix to the
// server's ($JS.API) and the answers back, except those its swallow
// function picks, which get no answer at all. Relays of parallel tests on
// one server do not see each other's requests.
type Relay struct {
	prefix string
	mu     sync.Mutex
	seen   map[string]int // requests by API subject after the prefix
	// swallow reports whether the n-th request (from 1) on api (the
	// subject after the prefix, "CONSUMER.INFO.S.D") goes unanswered.
	swallow func(api string, n int) bool
}

// Start starts a relay forwarding through nc, which swallows nothing
// until armed, and stops it at the test's cleanup.
func Start(t testing.TB, nc *nats.Conn) *Relay {
	t.Helper()
	r := &Relay{
		prefix:  "RELAY." + nuid.Next() + ".API",
		seen:    map[string]int{},
		swallow: func(string, int) bool { return false },
	}
	var wg sync.WaitGroup
	sub, err := nc.Subscribe(r.prefix+".>", func(m *nats.Msg) {
		api := strings.TrimPrefix(m.Subject, r.prefix+".")
		r.mu.Lock()
		r.seen[api]++
		drop := r.swallow(api, r.seen[api])
		r.mu.Unlock()
		if drop {
			return
		}
		to := jetstream.DefaultAPIPrefix + api
		if strings.HasPrefix(api, "$") {
			// A key-value put: a client with an API prefix sends it
			// under the prefix too.
			to = api
		}
		wg.Go(func() {
			resp, err := nc.RequestMsg(&nats.Msg{Subject: to, Header: m.Header, Data: m.Data}, 30*time.Second)
			if err != nil {
				return // the client asks again, or its test fails
			}
			_ = m.RespondMsg(&nats.Msg{Header: resp.Header, Data: resp.Data})
		})
	})
	if err != nil {
		t.Fatalf("relay: subscribe: %v", err)
	}
	t.Cleanup(func() {
		_ = sub.Unsubscribe()
		wg.Wait()
	})
	return r
}

// JetStream returns a JetStream client on nc whose API requests go
// through the relay.
func (r *Relay) JetStream(t testing.TB, nc *nats.Conn) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.NewWithAPIPrefix(nc, r.prefix)
	if err != nil {
		t.Fatalf("relay: jetstream: %v", err)
	}
	return js
}

// Arm makes the relay swallow what swallow picks from now on, counting
// requests from zero.
func (r *Relay) Arm(swallow func(api string, n int) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = map[string]int{}
	r.swallow = swallow
}

// Count returns how many requests on API subjects starting with prefix
// the relay saw since it was armed.
func (r *Relay) Count(prefix string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for api, k := range r.seen {
		if strings.HasPrefix(api, prefix) {
			n += k
		}
	}
	return n
}

// FirstOf swallows the first request on each API subject starting with
// one of prefixes.
func FirstOf(prefixes ...string) func(api string, n int) bool {
	return func(api string, n int) bool {
		for _, p := range prefixes {
			if strings.HasPrefix(api, p) {
				return n == 1
			}
		}
		return false
	}
}
