package store

import (
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// StreamSeq returns the stream sequence of a message delivered by a
// JetStream consumer. It reads the one token it needs from the message's
// reply subject, where msg.Metadata parses every token into a new
// MsgMetadata (an allocation and most of the work per message on a
// replay); a reply subject in a form it does not know is left to
// msg.Metadata.
func StreamSeq(msg jetstream.Msg) (uint64, error) {
	if seq, ok := ackStreamSeq(msg.Reply()); ok {
		return seq, nil
	}
	meta, err := msg.Metadata()
	if err != nil {
		return 0, fmt.Errorf("stream sequence: %w", err)
	}
	return meta.Sequence.Stream, nil
}

// ackStreamSeq reads the stream sequence from a JetStream ack subject, in
// either of its two forms (as nats.go reads them):
//
//	$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<tm>.<pending>
//	$JS.ACK.<domain>.<account hash>.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<tm>.<pending>[.<token>...]
//
// It reports false for anything else, and for a sequence that is not a
// plain decimal number that fits a uint64.
func ackStreamSeq(reply string) (uint64, bool) {
	rest, ok := strings.CutPrefix(reply, "$JS.ACK.")
	if !ok {
		return 0, false
	}
	// Tokens after the prefix: 7 in the first form, at least 9 in the
	// second.
	skip := 0
	switch n := strings.Count(rest, ".") + 1; {
	case n == 7:
		skip = 3
	case n >= 9:
		skip = 5
	default:
		return 0, false
	}
	for range skip {
		_, rest, _ = strings.Cut(rest, ".")
	}
	tok, _, _ := strings.Cut(rest, ".")
	if tok == "" || len(tok) > 20 {
		return 0, false
	}
	var seq uint64
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if seq > (1<<64-1-d)/10 {
			return 0, false
		}
		seq = seq*10 + d
	}
	return seq, true
}
