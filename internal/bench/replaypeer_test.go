package bench

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prunesched/prunesched/internal/bench/replay"
	"github.com/prunesched/prunesched/internal/testutil"
)

// TestReplayPeerExchange runs the peer's exchange end to end (the peer in
// a goroutine, over pipes, as the smoke test does; `prunesched bench`
// runs the same code in a child process): each turn is sent three ways
// (here all three to the peer's own upstream), the bench is asked to
// settle after each turn unless back to back, every turn's legs come
// back, and failures on either side end the job with their error.
func TestReplayPeerExchange(t *testing.T) {
	ctx := context.Background()
	c, err := startPeer(ctx, nil)
	testutil.NoError(t, err)
	defer func() { testutil.NoError(t, c.close()) }()
	turn := peerTurn{Body: []byte(`{"model":"m"}`), Answer: []byte(`{"ok":true}`), ContentType: "application/json"}
	stream := peerTurn{Body: []byte(`{"model":"m"}`), Answer: []byte("event: a\ndata: {}\n\nevent: b\ndata: {}\n\n"), ContentType: "text/event-stream"}
	urls := [3]string{c.upstream, c.upstream, c.upstream}

	settled := 0
	got, peerGC, err := c.run(&peerJob{Session: "s1", API: replay.Anthropic, URLs: urls, Settle: true, Probe: true, Turns: []peerTurn{turn, stream, turn}},
		func() error { settled++; return nil })
	testutil.NoError(t, err)
	testutil.Equal(t, len(got), 3)
	// A probed job counts the peer's collections per turn (any number).
	testutil.Equal(t, len(peerGC), 3)
	testutil.Equal(t, settled, 3)
	for i, row := range got {
		for w, l := range row {
			testutil.True(t, l.to > 0 && l.back > 0, "turn %d way %d: legs %+v", i, w, l)
		}
	}

	// Back to back: no settling.
	settled = 0
	_, peerGC, err = c.run(&peerJob{Session: "s2", API: replay.Chat, URLs: urls, Turns: []peerTurn{turn}}, func() error { settled++; return nil })
	testutil.NoError(t, err)
	testutil.Equal(t, settled, 0)
	testutil.Equal(t, len(peerGC), 0)

	// A failed settle ends the job with its error, and the peer goes on.
	_, _, err = c.run(&peerJob{Session: "s3", API: replay.Anthropic, URLs: urls, Settle: true, Turns: []peerTurn{turn, turn}},
		func() error { return errTest })
	testutil.True(t, err != nil && strings.Contains(err.Error(), errTest.Error()), "err %v", err)

	// A way that does not answer 200 ends the job naming the turn.
	nowhere := httptest.NewServer(http.NotFoundHandler())
	defer nowhere.Close()
	bad := urls
	bad[1] = nowhere.URL
	_, _, err = c.run(&peerJob{Session: "s4", API: replay.Anthropic, URLs: bad, Turns: []peerTurn{turn}}, func() error { return nil })
	testutil.True(t, err != nil && strings.Contains(err.Error(), "s4/0") && strings.Contains(err.Error(), "status 404"), "err %v", err)

	_, _, err = c.run(&peerJob{Session: "s5", API: replay.Anthropic, URLs: urls, Turns: []peerTurn{turn}}, func() error { return nil })
	testutil.NoError(t, err)
}

type testError string

func (e testError) Error() string { return string(e) }

const errTest = testError("settle failed on purpose")
