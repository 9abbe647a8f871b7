package bench

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
)

// loadNATSEnv, when set (to anything), makes proxy-load count the NATS
// messages of each level by kind and report them per request: a
// subscription to every subject of the account on the log's connection
// sees every publish, delivery, acknowledgement and request. It costs the
// server a copy of every message, so a level counted is not a level
// timed.
const loadNATSEnv = "PRUNESCHED_LOAD_NATS"

// natsCounter counts the messages of one account by kind (see kindOf).
type natsCounter struct {
	mu  sync.Mutex
	n   map[string]int
	sub *nats.Subscription
}

// countNATS starts counting every message nc's account carries.
func countNATS(nc *nats.Conn) (*natsCounter, error) {
	c := &natsCounter{n: map[string]int{}}
	sub, err := nc.Subscribe(">", func(m *nats.Msg) {
		k := natsKind(m)
		c.mu.Lock()
		c.n[k]++
		c.mu.Unlock()
	})
	if err != nil {
		return nil, fmt.Errorf("count nats: %w", err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("count nats: %w", err)
	}
	c.sub = sub
	return c, nil
}

// take returns the counts since the last take and starts again.
func (c *natsCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

func (c *natsCounter) stop() { _ = c.sub.Unsubscribe() }

// perRequest formats counts divided by requests, the largest first.
func perRequest(n map[string]int, requests int) string {
	if requests == 0 {
		return ""
	}
	keys := make([]string, 0, len(n))
	for k := range n {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return n[keys[i]] > n[keys[j]] })
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %.2f", k, float64(n[k])/float64(requests))
	}
	return b.String()
}

// natsKind names what a message is: a fact or derived event published to
// the log, a delivery of one to a consumer, an acknowledgement (plain or
// confirmed, i.e. with a reply), a reply, an object-store message or a
// JetStream API request by its verb.
func natsKind(m *nats.Msg) string {
	s := m.Subject
	if strings.HasPrefix(m.Reply, "$JS.ACK.") {
		// A delivery carries the event's own subject and the consumer's
		// acknowledgement subject as its reply.
		if strings.Contains(m.Reply, ".OBJ_") {
			return "object delivery"
		}
		return "delivery"
	}
	switch {
	case strings.HasPrefix(s, "ps."):
		// ps.<tenant>.<session>.<kind>[.<partition>]
		if f := strings.Split(s, "."); len(f) >= 4 {
			return "publish " + f[3]
		}
		return "publish"
	case strings.HasPrefix(s, "$JS.ACK."):
		kind := "ack"
		switch {
		case bytes.HasPrefix(m.Data, []byte("+WPI")):
			kind = "in-progress"
		case bytes.HasPrefix(m.Data, []byte("-NAK")):
			kind = "nak"
		case bytes.HasPrefix(m.Data, []byte("+TERM")):
			kind = "term"
		}
		if m.Reply != "" {
			kind += " confirmed"
		}
		return kind
	case strings.HasPrefix(s, "$O."):
		return "object publish"
	case strings.HasPrefix(s, "$JS.API."):
		f := strings.Split(s, ".")
		verb := strings.Join(f[2:min(len(f), 4)], ".")
		if len(f) > 4 && f[2] == "DIRECT" {
			verb = "DIRECT.GET"
		}
		if strings.Contains(s, ".OBJ_") || strings.Contains(s, "$O.") {
			verb = "object " + verb
		}
		return "api " + verb
	case strings.HasPrefix(s, "_INBOX.") || strings.HasPrefix(s, "$JS.") && strings.Contains(s, ".REPLY"):
		if m.Header.Get("Status") != "" {
			return "status " + m.Header.Get("Status")
		}
		return "reply"
	}
	f := strings.Split(s, ".")
	return "other " + strings.Join(f[:min(len(f), 3)], ".")
}
