package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/prunesched/prunesched/internal/apiclient"
	"github.com/prunesched/prunesched/internal/eval/analyze"
	"github.com/prunesched/prunesched/internal/importers"
	"github.com/prunesched/prunesched/internal/service"
	"github.com/prunesched/prunesched/projections"
	"github.com/spf13/pflag"
)

// client talks to a prunesched HTTP API: a running `serve`, or one started
// in-process on a data directory (--data) for offline use; close stops
// the latter.
type client struct {
	api   *apiclient.Client
	close func()
}

// clientFlags are the flags every client command shares.
type clientFlags struct {
	server, data, tenant, token string
	// fs tells whether --server was given; env whether
	// $PRUNESCHED_SERVER was.
	fs  *pflag.FlagSet
	env bool
}

func addClientFlags(fs *pflag.FlagSet, e *env) *clientFlags {
	cf := &clientFlags{fs: fs}
	def := e.getenv("PRUNESCHED_SERVER")
	cf.env = def != ""
	if def == "" {
		def = "http://" + defaultServeListen
	}
	fs.StringVar(&cf.server, "server", def, "prunesched API URL ($PRUNESCHED_SERVER; serve's by default, the proxy's is http://"+defaultProxyAPIListen+")")
	fs.StringVar(&cf.data, "data", "", "open this data directory directly instead of a running server (offline; no server may be using it)")
	fs.StringVar(&cf.tenant, "tenant", e.getenv("PRUNESCHED_TENANT"), "tenant ($PRUNESCHED_TENANT; default \"default\"; with a token, the token's)")
	fs.StringVar(&cf.token, "token", e.getenv("PRUNESCHED_TOKEN"), "bearer token for a server started with --auth-file ($PRUNESCHED_TOKEN; prefer the variable: flags show in ps)")
	return cf
}

func (cf *clientFlags) connect(ctx context.Context) (*client, error) {
	if cf.data == "" && !cf.env && (cf.fs == nil || !cf.fs.Changed("server")) {
		cf.server = findServer(ctx, cf.server)
	}
	c := &client{api: apiclient.New(cf.server, cf.tenant, cf.token), close: func() {}}
	if cf.data != "" {
		if _, err := os.Stat(cf.data); err != nil {
			return nil, fmt.Errorf("data directory %s: %w", cf.data, err)
		}
		pol, err := loadPolicy("")
		if err != nil {
			return nil, err
		}
		svc, err := service.Start(ctx, service.Config{DataDir: cf.data, HTTPListen: "127.0.0.1:0", Policy: pol})
		if err != nil {
			return nil, err
		}
		c.api.Base = "http://" + svc.HTTPAddr
		c.close = func() {
			// Offline, this process is the pipeline: let it handle what
			// the command wrote (a pin, a prune) before it stops, or the
			// next command on the directory waits for the redelivery.
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			_ = svc.Pipeline.WaitIdle(wctx)
			svc.Close()
		}
	}
	return c, nil
}

// getJSON fetches path. With raw set it copies the API's JSON answer to w
// and returns done; otherwise it decodes the answer into v for a readable
// rendering by the caller.
func (c *client) getJSON(ctx context.Context, path string, raw bool, w io.Writer, v any) (done bool, err error) {
	if raw {
		out, err := c.do(ctx, "GET", path, nil, nil, "")
		if err != nil {
			return false, err
		}
		_, err = w.Write(out)
		return true, err
	}
	_, err = c.api.GetJSON(ctx, path, v)
	return false, hint(err)
}

// parseAndConnect parses a client command's flags, checks it got nargs
// positional arguments (want says which, for the usage error) and connects.
func (cf *clientFlags) parseAndConnect(ctx context.Context, fs *pflag.FlagSet, args []string, nargs int, want string) (*client, error) {
	if err := parse(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() != nargs {
		return nil, usagef("%s", want)
	}
	return cf.connect(ctx)
}

// do sends a request and returns the body (apiclient.Client.Do); an API
// that does not answer gets a hint.
func (c *client) do(ctx context.Context, method, path string, q url.Values, body io.Reader, ctype string) ([]byte, error) {
	out, err := c.api.Do(ctx, method, path, q, body, ctype)
	return out, hint(err)
}

// hint adds what to do to an error of an API that did not answer.
func hint(err error) error {
	if errors.Is(err, apiclient.ErrUnreachable) {
		return fmt.Errorf("%w (is 'prunesched serve' running? For 'prunesched proxy' use --server http://%s or export PRUNESCHED_SERVER=http://%s; offline, use --data DIR)", err, defaultProxyAPIListen, defaultProxyAPIListen)
	}
	return err
}

// findServer returns the API a client command reaches when no --server or
// $PRUNESCHED_SERVER names one: serve's default (def) when it answers,
// else the proxy's default API when that one does (a proxy user runs no
// serve), else def (whose error says which flag to use).
func findServer(ctx context.Context, def string) string {
	if listening(ctx, defaultServeListen) {
		return def
	}
	if listening(ctx, defaultProxyAPIListen) {
		return "http://" + defaultProxyAPIListen
	}
	return def
}

// listening reports whether something accepts connections on addr.
func listening(ctx context.Context, addr string) bool {
	d := net.Dialer{Timeout: time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

func runImport(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "import", "[flags] FILE|DIR...", `
Import trace files into a running server (or a data directory with --data).
Formats: `+strings.Join(importers.Formats(), ", ")+`, or auto. A directory is
read recursively (files ending in .jsonl, .json, .traj or .md whose format is
detected). A file that fails is reported with file:line and the others are
still imported; the exit status is 1 if any failed (--strict stops at the
first).`)
	cf := addClientFlags(fs, e)
	format := fs.String("format", "auto", "input format: auto, "+strings.Join(importers.Formats(), ", "))
	strict := fs.Bool("strict", false, "stop at the first file that fails")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usagef("no files given")
	}
	files, err := inputFiles(e, fs.Args(), false)
	if err != nil {
		return err
	}
	c, err := cf.connect(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	var failed []analyze.FileError
	for _, path := range files {
		if err := importFile(ctx, e, c, path, *format); err != nil {
			if *strict || ctx.Err() != nil {
				return err
			}
			fmt.Fprintf(e.stderr, "%v\n", err)
			failed = append(failed, analyze.FileError{File: path, Error: err.Error()})
		}
	}
	return batchResult(e, len(files), failed)
}

// importFile sends one trace file to the server's import endpoint and
// prints the sessions it made.
func importFile(ctx context.Context, e *env, c *client, path, format string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("import %s: %w", path, err)
	}
	out, err := c.do(ctx, "POST", "/v1/import", url.Values{"format": {format}, "name": {filepath.Base(path)}}, bytes.NewReader(b), "application/octet-stream")
	if err != nil {
		return fmt.Errorf("import %s: %w", path, err)
	}
	var res struct {
		Sessions []struct {
			Session, Format string
			Events          int
		}
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return fmt.Errorf("import %s: bad response: %w", path, err)
	}
	for _, s := range res.Sessions {
		fmt.Fprintf(e.stdout, "%s: session %s (%s), %d events\n", path, s.Session, s.Format, s.Events)
	}
	return nil
}

func runAppend(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "append", "[flags] FILE|-", "Append native JSONL events (one per line) to a running server.")
	cf := addClientFlags(fs, e)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("want one file (or - for standard input)")
	}
	var b []byte
	var err error
	if fs.Arg(0) == "-" {
		b, err = io.ReadAll(os.Stdin)
	} else {
		b, err = os.ReadFile(fs.Arg(0))
	}
	if err != nil {
		return fmt.Errorf("append: %w", err)
	}
	c, err := cf.connect(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	out, err := c.do(ctx, "POST", "/v1/events", nil, bytes.NewReader(b), "application/x-ndjson")
	if err != nil {
		return fmt.Errorf("append %s: %w", fs.Arg(0), err)
	}
	_, err = e.stdout.Write(out)
	return err
}

func runItem(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "item", "[flags] SESSION ITEM", "Print an original item from the log (the text a placeholder stands for).")
	cf := addClientFlags(fs, e)
	asJSON := fs.Bool("json", false, "print the item with its metadata as JSON")
	c, err := cf.parseAndConnect(ctx, fs, args, 2, "want SESSION ITEM")
	if err != nil {
		return err
	}
	defer c.close()
	q := url.Values{}
	if !*asJSON {
		q.Set("format", "raw")
	}
	out, err := c.do(ctx, "GET", apiclient.ItemPath(fs.Arg(0), fs.Arg(1), ""), q, nil, "")
	if err != nil {
		return err
	}
	_, err = e.stdout.Write(out)
	if err == nil && len(out) > 0 && out[len(out)-1] != '\n' {
		fmt.Fprintln(e.stdout)
	}
	return err
}

func runBundle(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "bundle", "[flags] SESSION", "Print the session's bundle as rendered now (applied prunes only).")
	cf := addClientFlags(fs, e)
	format := fs.String("format", "text", "anthropic, openai or text")
	c, err := cf.parseAndConnect(ctx, fs, args, 1, "want SESSION")
	if err != nil {
		return err
	}
	defer c.close()
	out, err := c.do(ctx, "GET", apiclient.SessionPath(fs.Arg(0), "/bundle"), url.Values{"format": {*format}}, nil, "")
	if err != nil {
		return err
	}
	_, err = e.stdout.Write(out)
	return err
}

func runRender(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "render", "[flags] SESSION", "Ask the scheduler to decide at a request time, then print the bundle that request would carry.")
	cf := addClientFlags(fs, e)
	format := fs.String("format", "anthropic", "anthropic, openai or text")
	at := fs.String("time", "", "the request's dispatch time (RFC 3339); required: decisions never read the wall clock")
	reqID := fs.String("request", "", "request id (default: a new id)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("want SESSION")
	}
	t, err := time.Parse(time.RFC3339Nano, *at)
	if err != nil {
		return usagef("--time %q: want RFC 3339 (2026-12-02T10:00:00Z)", *at)
	}
	c, err := cf.connect(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	body, _ := json.Marshal(map[string]any{"time": t, "request": *reqID, "format": *format})
	out, err := c.do(ctx, "POST", apiclient.SessionPath(fs.Arg(0), "/render"), nil, bytes.NewReader(body), "application/json")
	if err != nil {
		return err
	}
	_, err = e.stdout.Write(out)
	return err
}

func controlCmd(verb string) func(context.Context, *env, []string) error {
	return func(ctx context.Context, e *env, args []string) error {
		fs := newFlags(e, verb, "[flags] SESSION ITEM", fmt.Sprintf("Record a %s of ITEM by a person; the decision follows through the pipeline.", verb))
		cf := addClientFlags(fs, e)
		by := fs.String("by", e.getenv("USER"), "who asks")
		reason := fs.String("reason", "", "why (free text, kept in the log)")
		c, err := cf.parseAndConnect(ctx, fs, args, 2, "want SESSION ITEM")
		if err != nil {
			return err
		}
		defer c.close()
		body, _ := json.Marshal(map[string]string{"item": fs.Arg(1), "by": *by, "reason": *reason})
		if _, err := c.do(ctx, "POST", apiclient.SessionPath(fs.Arg(0), "/"+verb), nil, bytes.NewReader(body), "application/json"); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "%s %s recorded\n", verb, fs.Arg(1))
		return nil
	}
}

// newTable returns a tab writer for readable tables.
func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

func runFlush(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "flush", "[flags] SESSION", "Record a manual flush: the scheduler applies everything pending at the next request (trigger manual_flush), whatever the cache break costs.")
	cf := addClientFlags(fs, e)
	by := fs.String("by", e.getenv("USER"), "who asks")
	reason := fs.String("reason", "", "why (free text, kept in the log)")
	c, err := cf.parseAndConnect(ctx, fs, args, 1, "want SESSION")
	if err != nil {
		return err
	}
	defer c.close()
	body, _ := json.Marshal(map[string]string{"by": *by, "reason": *reason})
	if _, err := c.do(ctx, "POST", apiclient.SessionPath(fs.Arg(0), "/flush"), nil, bytes.NewReader(body), "application/json"); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "flush of %s recorded: pending marks apply at the next request\n", fs.Arg(0))
	return nil
}

func runPending(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "pending", "[flags] SESSION", "List the marks the timing scheduler holds back (DEFER), with the reason each waits.")
	cf := addClientFlags(fs, e)
	asJSON := fs.Bool("json", false, "print JSON")
	c, err := cf.parseAndConnect(ctx, fs, args, 1, "want SESSION")
	if err != nil {
		return err
	}
	defer c.close()
	var res struct {
		Pending []struct {
			Item, Decision, Reason string
			Since                  time.Time
		} `json:"pending"`
	}
	if done, err := c.getJSON(ctx, apiclient.SessionPath(fs.Arg(0), "/pending"), *asJSON, e.stdout, &res); done || err != nil {
		return err
	}
	if len(res.Pending) == 0 {
		fmt.Fprintln(e.stdout, "nothing pending")
		return nil
	}
	// The certificates name each item's tool and source.
	var dec struct {
		Decisions []projections.Decision `json:"decisions"`
	}
	if _, err := c.getJSON(ctx, apiclient.SessionPath(fs.Arg(0), "/decisions"), false, nil, &dec); err != nil {
		return err
	}
	named := make(map[string]projections.Decision, len(dec.Decisions))
	for _, d := range dec.Decisions {
		named[d.Item] = d
	}
	tw := newTable(e.stdout)
	fmt.Fprintln(tw, "ITEM\tTOOL\tSOURCE\tDECISION\tSINCE\tWAITING BECAUSE")
	for _, p := range res.Pending {
		d := named[p.Item]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.Item, orDash(d.Tool), orDash(d.Source), p.Decision, p.Since.Format(time.RFC3339), p.Reason)
	}
	return tw.Flush()
}
