package bench

import (
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestProbeJoin: the probe records each proxy's requests by way and turn,
// the upstream's think taken out of the handler's time (the think here
// is an hour, so a handler time left with it would be positive), and
// joins them with the client's legs and the turn's stages.
func TestProbeJoin(t *testing.T) {
	t.Parallel()
	p := newProbe()
	h := p.wrap(2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(atHeader, "0,"+strconvHour)
		w.(http.Flusher).Flush()
		_, _ = w.Write([]byte("ok"))
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	for i := range 2 {
		req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(turnHeader, "s/"+string(rune('0'+i)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	before := stageHist{"added": {count: 1, sum: 0.001}}
	p.settled(stageHist{"added": {count: 2, sum: 0.003}, "log": {count: 1, sum: 0.004}}, before)
	sent := [][3]legs{
		{{to: time.Millisecond, back: time.Millisecond}, {to: 2 * time.Millisecond, back: time.Millisecond}, {to: 3 * time.Millisecond, back: 2 * time.Millisecond}},
		{{to: time.Millisecond, back: time.Millisecond}, {to: time.Millisecond, back: time.Millisecond}, {to: time.Millisecond, back: time.Millisecond}},
	}
	got := p.probed(func(i int) string { return "s/" + string(rune('0'+i)) }, sent, [][3]uint64{{0, 1, 2}})
	if len(got.Via) != 2 || len(got.Bare) != 2 {
		t.Fatalf("probed %+v, want two requests each way", got)
	}
	v := got.Via[0]
	if v.Added != 3 || v.Direct != 2 || v.Handler >= 0 || v.PeerGC != 2 || v.Way != "p" || v.Order != "dbp" {
		t.Errorf("via turn 0 = %+v, want added 3, direct 2, a handler time without the think, peer GC 2, way p, order dbp", v)
	}
	if v.BeforeForward != 2 || v.AfterResponse != 4 {
		t.Errorf("via turn 0 stages %g / %g ms, want 2 / 4", v.BeforeForward, v.AfterResponse)
	}
	if b := got.Bare[1]; b.Handler != 0 || b.Order != "bpd" || b.Way != "b" || b.BeforeForward != 0 {
		t.Errorf("bare turn 1 = %+v: no handler seen, order bpd", b)
	}
}

// strconvHour is an hour in nanoseconds, as the timing header writes it.
const strconvHour = "3600000000000"

// TestProbeSummary: the classes' means and shares, each row's slowest
// request, the synthetic rows left out.
func TestProbeSummary(t *testing.T) {
	t.Parallel()
	row := func(ratio float64, via ...ProbedRequest) ReplayRow {
		return ReplayRow{RatioP99: ratio, Probe: &ReplayProbe{Via: via, Bare: []ProbedRequest{{Added: 1, Way: "b", Order: "pbd"}}}}
	}
	rows := []ReplayRow{
		row(4, ProbedRequest{Added: 2, Way: "p", Order: "dbp"}, ProbedRequest{Added: 8, Way: "p", Order: "pdb", GCCycles: 1, PeerGC: 1}),
		row(2, ProbedRequest{Added: 4, Way: "p", Order: "bpd", SlowSched: 1}),
		{NewOutputKiB: 200, Probe: &ReplayProbe{Via: []ProbedRequest{{Added: 100, Way: "p", Order: "dbp"}}}},
	}
	s := summarizeProbe(rows)
	if s.ViaAll.Requests != 3 || math.Abs(s.ViaAll.Added-14.0/3) > 1e-9 {
		t.Errorf("via all %+v, want 3 requests, added 14/3", s.ViaAll)
	}
	if c := s.ViaSlowest; c.Requests != 2 || c.Added != 6 || c.WithGC != 0.5 || c.WithSlowSched != 0.5 || c.WithPeerGC != 0.5 || c.DirectAfterVia != 1 || c.AfterVia != 0 {
		t.Errorf("via slowest %+v", c)
	}
	if c := s.ViaSlowestOver; c.Requests != 1 || c.Added != 8 {
		t.Errorf("via slowest over the goal %+v, want the first row's 8 ms", c)
	}
	if c := s.BareAll; c.Requests != 2 || c.AfterVia != 1 || c.DirectAfterVia != 1 {
		t.Errorf("bare all %+v, want 2 requests, each after the prunesched one and before the direct", c)
	}
	if summarizeProbe(rows[2:]) != nil {
		t.Errorf("a summary of synthetic rows only")
	}
	if got := turnOrder(0) + turnOrder(1) + turnOrder(2); got != "dbpbpdpdb" {
		t.Errorf("turn orders %s", got)
	}
}

// TestProxyReplayProbed runs proxy-replay on the tiny Claude Code trace
// probed, then as an A/A comparison: every request of both ways is
// joined with its handler's record, prunesched's with its turn's stages,
// and the summary is there; in the A/A run the third way is a bare proxy
// (no stages, nothing rendered).
func TestProxyReplayProbed(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers")
	}
	traces, err := FindTraces("testdata/traces")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(replayProbeEnv, "1")
	t.Setenv(replayRowsEnv, "tiny")
	// The third way: the proxy, a second bare proxy (A/A), a bare proxy
	// holding each body whole before forwarding it.
	for _, env := range []string{"", replayAAEnv, replayHoldEnv} {
		bare := env != ""
		if bare {
			t.Setenv(env, "1")
		}
		res, err := Run(t.Context(), Config{Smoke: true, TempDir: t.TempDir(), Only: []string{"proxy-replay"}, Traces: traces[:1]})
		if env != "" {
			t.Setenv(env, "")
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(res.ProxyReplay) != 2 || res.ProxyReplayProbe == nil {
			t.Fatalf("third way %q: %d rows, probe summary %v; want the trace's two rows and a summary", env, len(res.ProxyReplay), res.ProxyReplayProbe)
		}
		for _, row := range res.ProxyReplay {
			p := row.Probe
			if p == nil || len(p.Via) != row.Requests || len(p.Bare) != row.Requests {
				t.Fatalf("third way %q: row %s stream=%v: probe %+v, want %d requests each way", env, row.Trace, row.Stream, p, row.Requests)
			}
			for _, q := range append(p.Bare, p.Via...) {
				if q.Handler <= 0 {
					t.Errorf("third way %q: %+v: no handler time", env, q)
				}
			}
			for _, q := range p.Via {
				if staged := q.BeforeForward > 0; staged == bare {
					t.Errorf("third way %q: %+v: before forwarding %g ms", env, q, q.BeforeForward)
				}
			}
			if bare != (row.Rendered == 0) {
				t.Errorf("third way %q: %d rendered", env, row.Rendered)
			}
		}
	}
}
