// Package rss measures the resident memory of a `prunesched serve`
// process over time while it is driven over HTTP, the way an operator's
// adapters drive it: it starts the binary as a subprocess on a fresh data
// directory, samples VmRSS from /proc/PID/status, and runs one of two
// scenarios:
//
//   - events: N small events appended in batches over POST /v1/events,
//     spread over sessions of a fixed size (many sessions, as a fleet of
//     agents produces them);
//   - clients: C concurrent clients for a duration, each appending small
//     batches to its own sessions and rendering (POST .../render) after
//     each batch;
//   - output: one POST /v1/events of a tool result whose output is one
//     character repeated OutputBytes times (the tokenizer's worst case), as
//     a JSONL line or a JSON array (Format);
//   - proxy-output: `prunesched proxy` in front of a fake model server
//     (this process, on loopback), sent one Anthropic request whose last
//     message is such a tool result; the proxy fails open on its time
//     budget and appends in the background, and the run samples until the
//     session shows up in the proxy's API (the append ended) and Settle
//     after.
//
// It owns measurement only (Linux: it reads /proc). Samples come back as
// a series and can be written as CSV and as an SVG chart.
package rss

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Config says what to run.
type Config struct {
	// Bin is the prunesched binary.
	Bin string
	// DataDir is the serve data directory (must be empty or new).
	DataDir string
	// Scenario is "events" or "clients".
	Scenario string
	// Events is the number of events of the events scenario.
	Events int
	// Batch is the events per POST.
	Batch int
	// SessionEvents is the events per session.
	SessionEvents int
	// Writers is the concurrent appenders of the events scenario.
	Writers int
	// Clients and Duration shape the clients scenario.
	Clients  int
	Duration time.Duration
	// Interval is the sampling interval.
	Interval time.Duration
	// OutputBytes is the output size of the output scenarios; Format is
	// "jsonl" (default) or "array" for the output scenario.
	OutputBytes int
	Format      string
	// Settle is how long the output scenarios sample after their request
	// is done (default 5s).
	Settle time.Duration
	// ServeArgs are extra arguments for `prunesched serve` (or proxy).
	ServeArgs []string
	// Progress receives a line per sample; nil is silent.
	Progress io.Writer
}

// Sample is one RSS reading.
type Sample struct {
	// Seconds since the scenario started.
	Seconds float64 `json:"s"`
	// RSS is VmRSS in bytes.
	RSS int64 `json:"rss"`
	// Events is the events acknowledged so far; Renders the renders.
	Events  int64 `json:"events"`
	Renders int64 `json:"renders"`
}

// Result is one scenario's series.
type Result struct {
	Scenario string   `json:"scenario"`
	Samples  []Sample `json:"samples"`
	// Errors counts failed requests (non-200 answers).
	Errors int64 `json:"errors"`
	// FirstError is the first failure's message.
	FirstError string `json:"first_error,omitempty"`
}

// PeakRSS returns the largest RSS sampled.
func (r Result) PeakRSS() int64 {
	var m int64
	for _, s := range r.Samples {
		m = max(m, s.RSS)
	}
	return m
}

// Run starts serve, runs the scenario and returns the samples.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	cfg.Batch = max(cfg.Batch, 1)
	cfg.SessionEvents = max(cfg.SessionEvents, 4)
	cfg.Writers = max(cfg.Writers, 1)
	addr, err := freeAddr()
	if err != nil {
		return Result{}, err
	}
	args := []string{"serve", "--data", cfg.DataDir, "--listen", addr, "--log-level", "warn"}
	var proxyURL string
	if cfg.Scenario == "proxy-output" {
		up := startFakeModel()
		defer up.Close()
		pxAddr, err := freeAddr()
		if err != nil {
			return Result{}, err
		}
		args = []string{"proxy", "--upstream", up.URL, "--data", cfg.DataDir, "--listen", pxAddr, "--api-listen", addr, "--log-level", "warn"}
		proxyURL = "http://" + pxAddr
	}
	args = append(args, cfg.ServeArgs...)
	cmd := exec.CommandContext(ctx, cfg.Bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return Result{}, fmt.Errorf("start %s: %w", cfg.Bin, err)
	}
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	base := "http://" + addr
	if err := waitHealthy(ctx, base); err != nil {
		return Result{}, fmt.Errorf("%w (serve stderr: %s)", err, strings.TrimSpace(stderr.String()))
	}
	d := &driver{base: base, client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	res := Result{Scenario: cfg.Scenario}
	start := time.Now()
	var mu sync.Mutex
	sample := func() {
		rss, err := ReadRSS(cmd.Process.Pid)
		if err != nil {
			return
		}
		s := Sample{Seconds: time.Since(start).Seconds(), RSS: rss, Events: d.events.Load(), Renders: d.renders.Load()}
		mu.Lock()
		res.Samples = append(res.Samples, s)
		mu.Unlock()
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "%7.1fs rss %7.1f MB events %9d renders %7d errors %d\n", s.Seconds, float64(s.RSS)/1e6, s.Events, s.Renders, d.errors.Load())
		}
	}
	sctx, stopSampling := context.WithCancel(ctx)
	var sampling sync.WaitGroup
	sampling.Go(func() {
		t := time.NewTicker(cfg.Interval)
		defer t.Stop()
		sample()
		for {
			select {
			case <-sctx.Done():
				return
			case <-t.C:
				sample()
			}
		}
	})
	switch cfg.Scenario {
	case "events":
		err = d.appendAll(ctx, cfg)
	case "clients":
		err = d.runClients(ctx, cfg)
	case "output":
		err = d.postOutput(ctx, cfg)
	case "proxy-output":
		err = d.proxyOutput(ctx, cfg, proxyURL)
	default:
		err = fmt.Errorf("scenario %q: want events, clients, output or proxy-output", cfg.Scenario)
	}
	stopSampling()
	sampling.Wait()
	sample()
	res.Errors = d.errors.Load()
	if v := d.firstErr.Load(); v != nil {
		res.FirstError = v.(string)
	}
	return res, err
}

// ReadRSS returns VmRSS of process pid in bytes.
func ReadRSS(pid int) (int64, error) { return readStatus(pid, "VmRSS") }

// ReadPeakRSS returns VmHWM of process pid in bytes: the largest resident
// memory it had so far.
func ReadPeakRSS(pid int) (int64, error) { return readStatus(pid, "VmHWM") }

// readStatus returns a field of /proc/pid/status given in kB, in bytes.
func readStatus(pid int, field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read rss: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			fields := strings.Fields(v)
			if len(fields) >= 1 {
				kb, err := strconv.ParseInt(fields[0], 10, 64)
				if err != nil {
					return 0, fmt.Errorf("read rss: %q: %w", v, err)
				}
				return kb << 10, nil
			}
		}
	}
	return 0, fmt.Errorf("read rss: no %s line", field)
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func waitHealthy(ctx context.Context, base string) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.New("serve did not become ready within 60s")
}

// driver sends the scenario's requests.
type driver struct {
	base     string
	client   *http.Client
	events   atomic.Int64
	renders  atomic.Int64
	errors   atomic.Int64
	firstErr atomic.Value
}

func (d *driver) fail(err error) {
	d.errors.Add(1)
	d.firstErr.CompareAndSwap(nil, err.Error())
}

// post sends body and reports whether the answer was 200.
func (d *driver) post(ctx context.Context, path, ctype string, body []byte) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.base+path, bytes.NewReader(body))
	if err != nil {
		d.fail(err)
		return false
	}
	req.Header.Set("Content-Type", ctype)
	resp, err := d.client.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			d.fail(err)
		}
		return false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		d.fail(fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, bytes.TrimSpace(b)))
		return false
	}
	return true
}

// epoch is the first event's time; events are a second apart.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// event returns the i-th event of session sess as one JSON line: a
// repeating user message, tool call, tool result (small, unique output),
// assistant message.
func event(sess string, i int) []byte {
	at := epoch.Add(time.Duration(i) * time.Second).Format(time.RFC3339)
	head := fmt.Sprintf(`{"v":1,"id":"e%d","session":%q,"time":%q,`, i, sess, at)
	switch i % 4 {
	case 0:
		return fmt.Appendf(nil, `%s"type":"message","data":{"item":"u%d","role":"user","text":"please look at file %d"}}`, head, i, i)
	case 1:
		return fmt.Appendf(nil, `%s"type":"tool_call","data":{"item":"c%d/input","call_id":"c%d","tool":"Read","input":{"file_path":"/src/f%d.go"}}}`, head, i, i, i)
	case 2:
		return fmt.Appendf(nil, `%s"type":"tool_result","data":{"item":"c%d","call_id":"c%d","tool":"Read","output":"package f%d // %s"}}`, head, i-1, i-1, i, sess)
	}
	return fmt.Appendf(nil, `%s"type":"message","data":{"item":"a%d","role":"assistant","text":"done with %d"}}`, head, i, i)
}

// batch returns events [from, to) of session sess as a JSONL body.
func batch(sess string, from, to int) []byte {
	var b []byte
	for i := from; i < to; i++ {
		b = append(b, event(sess, i)...)
		b = append(b, '\n')
	}
	return b
}

// appendAll appends cfg.Events events, cfg.Writers writers at a time.
func (d *driver) appendAll(ctx context.Context, cfg Config) error {
	type job struct {
		sess     string
		from, to int
	}
	jobs := make(chan job)
	var wg sync.WaitGroup
	for range cfg.Writers {
		wg.Go(func() {
			for j := range jobs {
				if d.post(ctx, "/v1/events", "application/x-ndjson", batch(j.sess, j.from, j.to)) {
					d.events.Add(int64(j.to - j.from))
				}
			}
		})
	}
	sent := 0
	for s := 0; sent < cfg.Events && ctx.Err() == nil; s++ {
		sess := fmt.Sprintf("s%07d", s)
		n := min(cfg.SessionEvents, cfg.Events-sent)
		for from := 0; from < n && ctx.Err() == nil; from += cfg.Batch {
			jobs <- job{sess, from, min(from+cfg.Batch, n)}
		}
		sent += n
	}
	close(jobs)
	wg.Wait()
	return ctx.Err()
}

// runClients runs cfg.Clients clients for cfg.Duration: each appends a batch
// of cfg.Batch events to its current session (a new one every
// cfg.SessionEvents events) and renders it.
func (d *driver) runClients(ctx context.Context, cfg Config) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	var wg sync.WaitGroup
	for c := range max(cfg.Clients, 1) {
		wg.Go(func() {
			for s := 0; ctx.Err() == nil; s++ {
				sess := fmt.Sprintf("c%02d-%05d", c, s)
				for from := 0; from < cfg.SessionEvents && ctx.Err() == nil; from += cfg.Batch {
					to := min(from+cfg.Batch, cfg.SessionEvents)
					if !d.post(ctx, "/v1/events", "application/x-ndjson", batch(sess, from, to)) {
						continue
					}
					d.events.Add(int64(to - from))
					at := epoch.Add(time.Duration(to) * time.Second).Format(time.RFC3339)
					body := fmt.Appendf(nil, `{"time":%q,"request":"r%d","format":"anthropic"}`, at, to)
					if d.post(ctx, "/v1/sessions/"+sess+"/render", "application/json", body) {
						d.renders.Add(1)
					}
				}
			}
		})
	}
	wg.Wait()
	return nil
}
