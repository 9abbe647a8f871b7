package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/prunesched/prunesched/events/store"
)

// NodeSpec is one JetStream node of the fleet bench's cluster run as a
// process of its own (Config.FleetNode, RunNode), so that its memory is
// its own: Name, the client and route ports, the routes to all three
// nodes and the store directory.
type NodeSpec struct {
	Name        string   `json:"name"`
	Port        int      `json:"port"`
	ClusterPort int      `json:"cluster_port"`
	Routes      []string `json:"routes"`
	Dir         string   `json:"dir"`
}

// nodeReady is the line a node process prints once it accepts clients.
const nodeReady = "fleet node ready"

// RunNode runs one node of the fleet bench's cluster (the JSON of a
// NodeSpec) until stdin closes (the bench ended, or died) or ctx is done,
// then shuts it down. It prints nodeReady on stdout when it accepts
// clients. It is the process Config.FleetNode starts.
func RunNode(ctx context.Context, specJSON string, stdout io.Writer, stdin io.Reader) error {
	var spec NodeSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		return fmt.Errorf("fleet node: spec: %w", err)
	}
	srv, err := server.NewServer(nodeOptions(spec))
	if err != nil {
		return fmt.Errorf("fleet node %s: %w", spec.Name, err)
	}
	srv.Start()
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
	if !srv.ReadyForConnections(30 * time.Second) {
		return fmt.Errorf("fleet node %s: not ready within 30 s", spec.Name)
	}
	fmt.Fprintf(stdout, "%s %s\n", nodeReady, spec.Name)
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		nodeCommands(stdin)
	}()
	select {
	case <-closed:
	case <-ctx.Done():
	}
	return nil
}

// nodeProfileCmd, followed by a file's path, is the line a node reads on
// its stdin to start its CPU profile into that file; nodeProfileEnd
// stops it. The bench profiles the nodes over each fleet step with them
// (PRUNESCHED_LOAD_PROF): the nodes' share of the fleet's CPU is not in
// the bench process's profile.
const (
	nodeProfileCmd = "cpuprofile "
	nodeProfileEnd = "cpuprofile-end"
)

// nodeCommands reads the node's stdin until it closes, starting and
// stopping its CPU profile as the lines say (nodeProfileCmd). A profile
// that cannot start is skipped (its file missing says so): it is a
// measurement aid.
func nodeCommands(stdin io.Reader) {
	var f *os.File
	stop := func() {
		if f != nil {
			pprof.StopCPUProfile()
			_ = f.Close()
			f = nil
		}
	}
	defer stop()
	sc := bufio.NewScanner(stdin)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, nodeProfileCmd):
			stop()
			var err error
			if f, err = os.Create(strings.TrimPrefix(line, nodeProfileCmd)); err != nil {
				f = nil
				continue
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				_ = f.Close()
				f = nil
			}
		case line == nodeProfileEnd:
			stop()
		}
	}
}

// nodeOptions are a fleet bench node's server options, in this process or
// its own.
func nodeOptions(spec NodeSpec) *server.Options {
	return &server.Options{
		ServerName: spec.Name, Host: "127.0.0.1", Port: spec.Port,
		JetStream: true, StoreDir: spec.Dir, MaxPayload: store.DefaultMaxPayload,
		NoSigs: true, NoLog: true,
		// As the embedded server (store.StartEmbedded): no PING before a
		// slow handshake's PONG on a loaded machine.
		DisableShortFirstPing: true,
		Cluster:               server.ClusterOpts{Name: "bench", Host: "127.0.0.1", Port: spec.ClusterPort},
		Routes:                server.RoutesFromStr(strings.Join(spec.Routes, ",")),
	}
}

// nodeProc is a node running as its own process.
type nodeProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan error
}

// startNodeProc starts a node with the command argv (Config.FleetNode),
// its spec appended, and waits until it accepts clients.
func startNodeProc(ctx context.Context, argv []string, spec NodeSpec) (*nodeProc, error) {
	raw, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], append(argv[1:len(argv):len(argv)], string(raw))...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("fleet: node %s: %w", spec.Name, err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("fleet: node %s: %w", spec.Name, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("fleet: start node %s: %w", spec.Name, err)
	}
	n := &nodeProc{cmd: cmd, stdin: stdin, done: make(chan error, 1)}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		signalled := false
		for sc.Scan() {
			if !signalled && strings.HasPrefix(sc.Text(), nodeReady) {
				close(ready)
				signalled = true
			}
		}
		n.done <- cmd.Wait()
	}()
	select {
	case <-ready:
		return n, nil
	case err := <-n.done:
		return nil, fmt.Errorf("fleet: node %s exited before it was ready: %v", spec.Name, err)
	case <-ctx.Done():
		n.stop()
		return nil, fmt.Errorf("fleet: node %s: %w", spec.Name, ctx.Err())
	case <-time.After(time.Minute):
		n.stop()
		return nil, fmt.Errorf("fleet: node %s not ready within a minute", spec.Name)
	}
}

// command sends the node a line (nodeProfileCmd).
func (n *nodeProc) command(line string) error {
	if _, err := io.WriteString(n.stdin, line+"\n"); err != nil {
		return fmt.Errorf("fleet: node command: %w", err)
	}
	return nil
}

// cpu is the node's CPU time so far (procCPU).
func (n *nodeProc) cpu() time.Duration { return procCPU(n.cmd.Process.Pid) }

// procCPU is process pid's CPU time so far, user and system
// (/proc/PID/stat); 0 where it cannot be read.
func procCPU(pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command's name (in parentheses, which may
	// hold spaces): utime and stime are the 14th and 15th of the line.
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(raw[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(ut+st) * time.Second / clockTicks
}

// clockTicks is the unit of /proc/PID/stat's times (USER_HZ, 100 on
// Linux).
const clockTicks = 100

// stop closes the node's stdin, which ends it, and waits (killing it
// after 30 s).
func (n *nodeProc) stop() {
	_ = n.stdin.Close()
	select {
	case <-n.done:
	case <-time.After(30 * time.Second):
		_ = n.cmd.Process.Kill()
		<-n.done
	}
}

// nodeSpecs are the three nodes' specs on the given ports, their stores
// under dir.
func nodeSpecs(dir string, ports, clusterPorts []int) []NodeSpec {
	var routes []string
	for _, p := range clusterPorts {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
	}
	specs := make([]NodeSpec, len(ports))
	for i := range ports {
		specs[i] = NodeSpec{Name: fmt.Sprintf("bench-n%d", i+1), Port: ports[i], ClusterPort: clusterPorts[i], Routes: routes,
			Dir: filepath.Join(dir, fmt.Sprint(i))}
	}
	return specs
}

var errNoMetaLeader = errors.New("fleet: no JetStream meta leader within a minute")
