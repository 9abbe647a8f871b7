package bench

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
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
	"time"

	"github.com/prunesched/prunesched/internal/bench/replay"
)

// The replay peer is proxy-replay's agent and model: the fake upstream
// and the client that sends each request three ways (straight to the
// upstream, through the bare proxy, through prunesched). It talks to the
// bench over two streams of JSON lines, so it can run in a process of its
// own (Config.ReplayPeer): there, like a real agent and model on other
// machines, it does not share the Go scheduler with the proxies, the
// embedded NATS server and the pipeline, and the proxy's background work
// (its log write after forwarding) cannot hold up the upstream's read of
// a request or the client's read of an answer in the run queue of the
// same process.
//
// The exchange: the peer first sends {"upstream": URL}. For each sequence
// the bench sends a peerJob; after each turn the peer sends {"settle": i}
// and waits for {"settled": true} (the bench lets the proxy's log writes
// and the pipeline finish, unless back to back); at the end it sends
// {"legs": ...}. A failure on either side is {"error": "..."}. The bench
// ends the exchange by closing the peer's input.

// peerJob is one sequence for the peer to send.
type peerJob struct {
	Session string     `json:"session"`
	API     replay.API `json:"api"`
	URLs    [3]string  `json:"urls"`
	Think   int64      `json:"think_ns"`
	Settle  bool       `json:"settle"`
	Turns   []peerTurn `json:"turns"`
	// Probe makes the peer count its own garbage collections during each
	// send (replayProbeEnv).
	Probe bool `json:"probe,omitempty"`
	// Load, when set, makes the job a load: Load.Sessions sessions at once,
	// session k replaying Load.Seqs[k % len], each request sent straight
	// and through prunesched (URLs[0] and URLs[2]); Turns and Settle are
	// not used.
	Load *peerLoad `json:"load,omitempty"`
}

// peerLoad is a load job's sessions.
type peerLoad struct {
	Sessions int          `json:"sessions"`
	Seqs     [][]peerTurn `json:"seqs"`
}

// peerTurn is replay.Turn on the wire.
type peerTurn struct {
	Body        []byte `json:"body"`
	Answer      []byte `json:"answer"`
	ContentType string `json:"content_type"`
}

// peerMsg is every line either side sends; one field is set.
type peerMsg struct {
	Upstream string        `json:"upstream,omitempty"`
	Job      *peerJob      `json:"job,omitempty"`
	Settle   *int          `json:"settle,omitempty"`
	Settled  bool          `json:"settled,omitempty"`
	Legs     [][3][2]int64 `json:"legs,omitempty"`
	// PeerGC is, for a probed job, the peer's collections during each
	// turn's send by way.
	PeerGC [][3]uint64 `json:"peer_gc,omitempty"`
	// Wall is a load job's wall time in ns.
	Wall  int64  `json:"wall_ns,omitempty"`
	Error string `json:"error,omitempty"`
}

// ServeReplayPeer runs the replay peer on in and out until in ends (the
// bench closed it) or ctx is done. `prunesched bench` runs it in a child
// process of itself (hidden flag --replay-peer).
func ServeReplayPeer(ctx context.Context, in io.Reader, out io.Writer) error {
	p := newPeer()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("replay peer: listen: %w", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(p.upstream)}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	enc := json.NewEncoder(out)
	dec := json.NewDecoder(bufio.NewReaderSize(in, 1<<20))
	if err := enc.Encode(peerMsg{Upstream: "http://" + ln.Addr().String()}); err != nil {
		return fmt.Errorf("replay peer: %w", err)
	}
	for {
		var m peerMsg
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("replay peer: read job: %w", err)
		}
		if m.Job == nil {
			return fmt.Errorf("replay peer: expected a job, got %+v", m)
		}
		if m.Job.Load != nil {
			legs, wall, err := p.load(ctx, m.Job)
			reply := peerMsg{Legs: legs, Wall: int64(wall)}
			if err != nil {
				reply = peerMsg{Error: err.Error()}
			}
			if err := enc.Encode(reply); err != nil {
				return fmt.Errorf("replay peer: %w", err)
			}
			continue
		}
		legs, peerGC, err := p.run(ctx, m.Job, func(i int) error {
			if err := enc.Encode(peerMsg{Settle: &i}); err != nil {
				return err
			}
			var r peerMsg
			if err := dec.Decode(&r); err != nil {
				return fmt.Errorf("wait for settle %d: %w", i, err)
			}
			if r.Error != "" {
				return errors.New(r.Error)
			}
			return nil
		})
		reply := peerMsg{Legs: legs, PeerGC: peerGC}
		if err != nil {
			reply = peerMsg{Error: err.Error()}
		}
		if err := enc.Encode(reply); err != nil {
			return fmt.Errorf("replay peer: %w", err)
		}
	}
}

// peer is the replay peer's state: the answers of the current sequence.
type peer struct {
	mu      sync.RWMutex
	answers map[string]replay.Turn
	think   time.Duration
	t0      time.Time
	client  *http.Client
}

// newPeer returns a peer with no answers yet. Its client keeps a
// connection per agent of a load (up to 64 per host), as agents each keep
// theirs: with fewer, from 8 agents on some requests of both ways dialled
// a new connection, and the proxy's accept, on its busy process, counted
// in its added time.
func newPeer() *peer {
	return &peer{answers: map[string]replay.Turn{}, t0: time.Now(),
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}}
}

// prepare makes answers, by turn key, and think the upstream's for the
// next job.
func (p *peer) prepare(think time.Duration, answers map[string]replay.Turn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.think, p.answers = think, answers
}

// run sends job's turns, three ways each, rotating which way goes first
// so the machine's noise falls on all three alike, calling settle after
// each turn when the job asks for it. A probed job also gets the peer's
// collections during each send.
func (p *peer) run(ctx context.Context, job *peerJob, settle func(int) error) ([][3][2]int64, [][3]uint64, error) {
	answers := map[string]replay.Turn{}
	for i, t := range job.Turns {
		answers[job.Session+"/"+strconv.Itoa(i)] = replay.Turn{Answer: t.Answer, ContentType: t.ContentType}
	}
	p.prepare(time.Duration(job.Think), answers)
	out := make([][3][2]int64, 0, len(job.Turns))
	var gcs [][3]uint64
	for i, t := range job.Turns {
		key := job.Session + "/" + strconv.Itoa(i)
		var row [3][2]int64
		var gc [3]uint64
		for k := range 3 {
			way := (i + k) % 3
			var g0 gcSample
			if job.Probe {
				g0 = readGC()
			}
			l, err := p.send(ctx, job.URLs[way], job.API, job.Session, key, t.Body)
			if err != nil {
				return nil, nil, err
			}
			if job.Probe {
				gc[way] = readGC().sub(g0).cycles
			}
			row[way] = [2]int64{int64(l.to), int64(l.back)}
		}
		out = append(out, row)
		if job.Probe {
			gcs = append(gcs, gc)
		}
		if job.Settle {
			if err := settle(i); err != nil {
				return nil, nil, err
			}
		}
	}
	return out, gcs, nil
}

// load runs a load job: its sessions at once, each sending its turns one
// after the other (each answer read before the next request), straight
// and then through prunesched, alternating which goes first. It returns
// every request's legs (way 1, the bare proxy, unused) and the wall time.
func (p *peer) load(ctx context.Context, job *peerJob) ([][3][2]int64, time.Duration, error) {
	l := job.Load
	if l.Sessions < 1 || len(l.Seqs) == 0 {
		return nil, 0, fmt.Errorf("load: %d sessions, %d sequences", l.Sessions, len(l.Seqs))
	}
	answers := map[string]replay.Turn{}
	for k := range l.Sessions {
		for i, t := range l.Seqs[k%len(l.Seqs)] {
			answers[loadKey(job.Session, k, i)] = replay.Turn{Answer: t.Answer, ContentType: t.ContentType}
		}
	}
	p.prepare(time.Duration(job.Think), answers)
	var (
		mu    sync.Mutex
		out   [][3][2]int64
		first error
		wg    sync.WaitGroup
	)
	start := time.Now()
	for k := range l.Sessions {
		wg.Go(func() {
			session := fmt.Sprintf("%s-%d", job.Session, k)
			for i, t := range l.Seqs[k%len(l.Seqs)] {
				key := loadKey(job.Session, k, i)
				var row [3][2]int64
				for n := range 2 {
					way := []int{0, 2}[(i+n)%2]
					lg, err := p.send(ctx, job.URLs[way], job.API, session, key, t.Body)
					if err != nil {
						mu.Lock()
						first = cmp.Or(first, err)
						mu.Unlock()
						return
					}
					row[way] = [2]int64{int64(lg.to), int64(lg.back)}
				}
				mu.Lock()
				out = append(out, row)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return out, time.Since(start), first
}

// loadKey is the turn key of request i of a load's session k.
func loadKey(session string, k, i int) string {
	return session + "-" + strconv.Itoa(k) + "/" + strconv.Itoa(i)
}

// upstream answers a replayed request with its recorded answer, after
// reading the whole body (as a real upstream does) and waiting the think
// time (as a model does before its first token).
func (p *peer) upstream(w http.ResponseWriter, req *http.Request) {
	_, _ = io.Copy(io.Discard, req.Body)
	recv := time.Since(p.t0)
	p.mu.RLock()
	t, ok := p.answers[req.Header.Get(turnHeader)]
	think := p.think
	p.mu.RUnlock()
	if !ok {
		http.Error(w, "unknown turn", http.StatusNotFound)
		return
	}
	if think > 0 {
		time.Sleep(think)
	}
	w.Header().Set(atHeader, strconv.FormatInt(int64(recv), 10)+","+strconv.FormatInt(int64(time.Since(p.t0)), 10))
	w.Header().Set("Content-Type", t.ContentType)
	if t.ContentType == "application/json" {
		w.Header().Set("Content-Length", strconv.Itoa(len(t.Answer)))
		_, _ = w.Write(t.Answer)
		return
	}
	// A stream: one write (and flush) per event, as a model's stream comes.
	fl, _ := w.(http.Flusher)
	rest := t.Answer
	for len(rest) > 0 {
		i := bytes.Index(rest, []byte("\n\n"))
		if i < 0 {
			i = len(rest)
		} else {
			i += 2
		}
		if _, err := w.Write(rest[:i]); err != nil {
			return
		}
		if fl != nil {
			fl.Flush()
		}
		rest = rest[i:]
	}
}

// send posts one request and reads the whole answer.
func (p *peer) send(ctx context.Context, base string, api replay.API, session, key string, body []byte) (legs, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+api.Path(), bytes.NewReader(body))
	if err != nil {
		return legs{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "prunesched-bench/replay")
	req.Header.Set(api.SessionHeader(), session)
	req.Header.Set(turnHeader, key)
	start := time.Since(p.t0)
	resp, err := p.client.Do(req)
	if err != nil {
		return legs{}, fmt.Errorf("replay %s: %w", key, err)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	end := time.Since(p.t0)
	if err != nil {
		return legs{}, fmt.Errorf("replay %s: read answer: %w", key, err)
	}
	if resp.StatusCode != http.StatusOK {
		return legs{}, fmt.Errorf("replay %s via %s: status %d", key, base, resp.StatusCode)
	}
	v := resp.Header.Get(atHeader)
	recv, answer, ok := parseAt(v)
	if !ok {
		return legs{}, fmt.Errorf("replay %s via %s: bad %s %q", key, base, atHeader, v)
	}
	return legs{to: recv - start, back: end - answer}, nil
}

// parseAt reads an atHeader value: when the upstream had read the request
// and when it began its answer, on the peer's clock.
func parseAt(v string) (recv, answer time.Duration, ok bool) {
	r, a, ok := strings.Cut(v, ",")
	rn, err1 := strconv.ParseInt(r, 10, 64)
	an, err2 := strconv.ParseInt(a, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return time.Duration(rn), time.Duration(an), true
}

// peerConn is the bench's end of the exchange with a replay peer.
type peerConn struct {
	enc  *json.Encoder
	dec  *json.Decoder
	in   io.Closer
	wait func() error
	// upstream is the peer's fake upstream's base URL.
	upstream string
}

// startPeer starts a replay peer: the command argv (a process of its own,
// GOMAXPROCS 1) or, with none, a goroutine of this process.
func startPeer(ctx context.Context, argv []string) (*peerConn, error) {
	var (
		in   io.WriteCloser
		out  io.Reader
		wait func() error
	)
	if len(argv) == 0 {
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		done := make(chan error, 1)
		go func() {
			err := ServeReplayPeer(ctx, inR, outW)
			outW.CloseWithError(errors.Join(err, io.EOF))
			done <- err
		}()
		in, out, wait = inW, outR, func() error { return <-done }
	} else {
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
		cmd.Stderr = os.Stderr
		w, err := cmd.StdinPipe()
		if err != nil {
			return nil, fmt.Errorf("replay peer: %w", err)
		}
		r, err := cmd.StdoutPipe()
		if err != nil {
			return nil, fmt.Errorf("replay peer: %w", err)
		}
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("replay peer: start %s: %w", argv[0], err)
		}
		in, out, wait = w, r, cmd.Wait
	}
	c := &peerConn{enc: json.NewEncoder(in), dec: json.NewDecoder(bufio.NewReaderSize(out, 1<<20)), in: in, wait: wait}
	var hello peerMsg
	if err := c.dec.Decode(&hello); err != nil || hello.Upstream == "" {
		_ = c.close()
		return nil, fmt.Errorf("replay peer: no upstream URL (%v, %+v)", err, hello)
	}
	c.upstream = hello.Upstream
	return c, nil
}

// run has the peer send job, settling the rig after each turn when the
// job asks for it, and returns each turn's legs by way (and, for a
// probed job, the peer's collections during each send).
func (c *peerConn) run(job *peerJob, settle func() error) ([][3]legs, [][3]uint64, error) {
	if err := c.enc.Encode(peerMsg{Job: job}); err != nil {
		return nil, nil, fmt.Errorf("replay peer: send job: %w", err)
	}
	for {
		var m peerMsg
		if err := c.dec.Decode(&m); err != nil {
			return nil, nil, fmt.Errorf("replay peer: %w", err)
		}
		switch {
		case m.Error != "":
			return nil, nil, fmt.Errorf("replay peer: %s", m.Error)
		case m.Settle != nil:
			reply := peerMsg{Settled: true}
			if err := settle(); err != nil {
				reply = peerMsg{Error: err.Error()}
			}
			if err := c.enc.Encode(reply); err != nil {
				return nil, nil, fmt.Errorf("replay peer: %w", err)
			}
		default:
			return toLegs(m.Legs), m.PeerGC, nil
		}
	}
}

// runLoad has the peer run a load job and returns every request's legs
// and the job's wall time; sent is called once the job is sent, before
// the peer starts it.
func (c *peerConn) runLoad(job *peerJob, sent func()) ([][3]legs, time.Duration, error) {
	if err := c.enc.Encode(peerMsg{Job: job}); err != nil {
		return nil, 0, fmt.Errorf("replay peer: send load: %w", err)
	}
	sent()
	var m peerMsg
	if err := c.dec.Decode(&m); err != nil {
		return nil, 0, fmt.Errorf("replay peer: %w", err)
	}
	if m.Error != "" {
		return nil, 0, fmt.Errorf("replay peer: %s", m.Error)
	}
	return toLegs(m.Legs), time.Duration(m.Wall), nil
}

func toLegs(in [][3][2]int64) [][3]legs {
	out := make([][3]legs, len(in))
	for i, row := range in {
		for w := range 3 {
			out[i][w] = legs{to: time.Duration(row[w][0]), back: time.Duration(row[w][1])}
		}
	}
	return out
}

// close ends the exchange and waits for the peer.
func (c *peerConn) close() error {
	_ = c.in.Close()
	return c.wait()
}
