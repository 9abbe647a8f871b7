package inspector_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/prunesched/prunesched/internal/api"
	"github.com/prunesched/prunesched/internal/service"
	"github.com/prunesched/prunesched/policy"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/ and the screenshots under ../docs/inspector/")

// browser is the one headless Chromium the package's tests share.
var browser struct {
	once   sync.Once
	ctx    context.Context
	cancel context.CancelFunc
	err    error
}

// chromiumPath finds Debian's chromium (or another Chrome) or "".
func chromiumPath() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// withBrowser returns a new tab of the shared browser, or skips the test
// when no Chromium is installed (.ci/run installs Debian's chromium).
func withBrowser(t *testing.T) context.Context {
	t.Helper()
	path := chromiumPath()
	if path == "" {
		t.Skip("no chromium on PATH: install Debian's chromium (apt-get install chromium) to run the browser tests; .ci/run does")
	}
	browser.once.Do(func() {
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(path),
			chromedp.NoSandbox, // root in CI containers
			chromedp.DisableGPU,
			chromedp.WindowSize(1280, 900),
		)
		actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
		bctx, bcancel := chromedp.NewContext(actx)
		browser.err = chromedp.Do(bctx) // starts the browser
		browser.ctx = bctx
		browser.cancel = func() { bcancel(); acancel() }
	})
	if browser.err != nil {
		t.Fatalf("start %s: %v", path, browser.err)
	}
	tab, cancel := chromedp.NewContext(browser.ctx)
	tctx, tcancel := context.WithTimeout(tab, 3*time.Minute)
	t.Cleanup(func() { tcancel(); cancel() })
	watchCSP(t, tctx)
	return tctx
}

// watchCSP fails the test when a page of the tab breaks the server's
// Content-Security-Policy (httpguard.CSP): a blocked script, style or
// fetch. Every document records its violations in the tab's
// sessionStorage (kept across the inspector's same-origin pages), read
// when the test ends.
func watchCSP(t *testing.T, ctx context.Context) {
	t.Helper()
	const record = `document.addEventListener("securitypolicyviolation", function (e) {
  var v = JSON.parse(sessionStorage.getItem("csp") || "[]");
  v.push(e.violatedDirective + " " + e.blockedURI + " " + e.sourceFile + ":" + e.lineNumber);
  sessionStorage.setItem("csp", JSON.stringify(v));
});`
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: record}); err != nil {
		t.Fatalf("watch CSP violations: %v", err)
	}
	t.Cleanup(func() {
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`sessionStorage.getItem("csp") || ""`))
		if err == nil && got != "" {
			t.Errorf("the pages broke the Content-Security-Policy: %s", got)
		}
	})
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if browser.cancel != nil {
		browser.cancel()
	}
	os.Exit(code)
}

// startService starts prunesched with the HTTP API on a free loopback
// port, on a temporary data directory.
func startService(t *testing.T) (*service.Service, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	svc, err := service.Start(ctx, service.Config{DataDir: t.TempDir(), HTTPListen: "127.0.0.1:0", Policy: policy.Default()})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(svc.Close)
	return svc, "http://" + svc.HTTPAddr
}

func httpDo(t *testing.T, method, url, ctype string, body []byte) []byte {
	t.Helper()
	return httpDoToken(t, method, url, "", ctype, body)
}

// httpDoToken is httpDo with a bearer token ("" sends none).
func httpDoToken(t *testing.T, method, url, token, ctype string, body []byte) []byte {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
	return b
}

// importFile imports a trace through POST /v1/import and returns the
// session id.
func importFile(t *testing.T, base, path string) string {
	t.Helper()
	return importFileToken(t, base, "", path)
}

// importFileToken is importFile with a bearer token.
func importFileToken(t *testing.T, base, token, path string) string {
	t.Helper()
	body, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Sessions []struct {
			Session string `json:"session"`
		} `json:"sessions"`
	}
	if err := json.Unmarshal(httpDoToken(t, "POST", base+"/v1/import?name="+filepath.Base(path), token, "", body), &res); err != nil || len(res.Sessions) != 1 {
		t.Fatalf("import %s: %v %+v", path, err, res)
	}
	return res.Sessions[0].Session
}

// sharedTrace returns a shared Claude Code trace, or skips.
func sharedTrace(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join("..", "..", "..", "shared", "traces", "claude-code", name)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("shared trace %s absent: %v", p, err)
	}
	return p
}

// screenshot saves a full-page PNG: under ../docs/inspector with -update,
// else under $PRUNESCHED_ARTIFACTS (or the test's temporary directory).
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := os.Getenv("PRUNESCHED_ARTIFACTS")
	switch {
	case *update:
		dir = filepath.Join("..", "..", "docs", "inspector")
	case dir == "":
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s (%d bytes)", p, len(png))
}

// decision is the part of GET .../decisions the test checks.
type decision struct {
	Item           string   `json:"item"`
	Decision       string   `json:"decision"`
	Rung           string   `json:"rung"`
	Reason         string   `json:"reason"`
	InEffect       bool     `json:"in_effect"`
	Applied        bool     `json:"applied"`
	Protection     []string `json:"protection"`
	Recoverability *struct {
		Survivor string `json:"survivor"`
	} `json:"recoverability"`
}

// stripBlock is one block of the strip as the browser has it.
type stripBlock struct {
	Item  string `json:"item"`
	Class string `json:"class"`
}

const readStrip = `Array.from(document.querySelectorAll("#strip-section > .strip > .b")).map(b => ({item: b.dataset.item, class: b.dataset.c}))`

// TestInspectorInBrowser imports real Claude Code traces, then drives the
// inspector in headless Chromium: the sessions page, the session page's
// strip (one block per item, classes matching the certificates), a pruned
// item's certificate and original, restore through the page's button (the
// next render holds the original), and the fleet page; it saves a
// screenshot of each page.
func TestInspectorInBrowser(t *testing.T) {
	trace := sharedTrace(t, "entirecli-60-1ac0eb4d69-0.jsonl")
	other := sharedTrace(t, "entirecli-64-267478c135-0.jsonl")
	ctx := withBrowser(t)
	_, base := startService(t)
	sess := importFile(t, base, trace)
	importFile(t, base, other)

	// Sessions page: one row per session, sortable.
	const sessionRows = `Array.from(document.querySelectorAll("#sessions tbody tr.session")).map(r => r.dataset.session)`
	if err := chromedp.Do(ctx,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible("#sessions tbody tr.session"),
	); err != nil {
		t.Fatalf("sessions page: %v", err)
	}
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](sessionRows))
	if err != nil {
		t.Fatalf("sessions page: %v", err)
	}
	if len(rows) != 2 {
		t.Fatalf("sessions page rows %v, want 2", rows)
	}
	if err := chromedp.Do(ctx,
		chromedp.Click(`#sessions thead th:nth-child(6)`), // raw tokens, ascending
		chromedp.Click(`#sessions thead th:nth-child(6)`), // descending
	); err != nil {
		t.Fatalf("sort: %v", err)
	}
	sorted, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](sessionRows))
	if err != nil {
		t.Fatalf("sort: %v", err)
	}
	if sorted[0] != sess { // the larger trace has more raw tokens
		t.Errorf("sorted by raw tokens descending: %v, want %s first", sorted, sess)
	}
	screenshot(t, ctx, "sessions.png")

	// Session page: one block per item, classed by the certificates.
	var stats struct {
		Items int `json:"items"`
	}
	if err := json.Unmarshal(httpDo(t, "GET", base+"/v1/sessions/"+sess+"/stats", "", nil), &stats); err != nil {
		t.Fatal(err)
	}
	var decs struct {
		Decisions []decision `json:"decisions"`
	}
	if err := json.Unmarshal(httpDo(t, "GET", base+"/v1/sessions/"+sess+"/decisions", "", nil), &decs); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx,
		chromedp.Navigate(base+"/ui/sessions/"+sess),
		chromedp.WaitVisible("#strip-section .strip .b"),
	); err != nil {
		t.Fatalf("session page: %v", err)
	}
	blocks, err := chromedp.Run(ctx, chromedp.Evaluate[[]stripBlock](readStrip))
	if err != nil {
		t.Fatalf("session page: %v", err)
	}
	if fcp, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`(e => e ? e.startTime : -1)(performance.getEntriesByName("first-contentful-paint")[0])`)); err == nil {
		t.Logf("session page, %d items: first contentful paint %.0f ms after navigation start", len(blocks), fcp)
	}
	if len(blocks) != stats.Items {
		t.Fatalf("strip has %d blocks, the session %d items", len(blocks), stats.Items)
	}
	class := map[string]string{}
	for _, b := range blocks {
		if _, dup := class[b.Item]; dup {
			t.Errorf("item %s has two blocks", b.Item)
		}
		class[b.Item] = b.Class
	}
	var pruned *decision
	wantPruned := 0
	for i, d := range decs.Decisions {
		c, ok := class[d.Item]
		if !ok {
			t.Errorf("decision for %s has no block", d.Item)
			continue
		}
		var want string
		switch {
		case d.InEffect:
			want = "pruned"
			wantPruned++
			if pruned == nil {
				pruned = &decs.Decisions[i]
			}
		case d.Decision == "ABSTAIN":
			want = "abstained"
		case d.Decision == "DEFER", d.Decision == "PRUNE" && !d.Applied:
			want = "deferred"
		case d.Decision == "KEEP" && len(d.Protection) > 0:
			want = "protected"
		}
		if want != "" && c != want {
			t.Errorf("item %s (%s %s in_effect=%v): block class %q, want %q", d.Item, d.Decision, d.Reason, d.InEffect, c, want)
		}
	}
	gotPruned := 0
	for _, c := range class {
		if c == "pruned" {
			gotPruned++
		}
	}
	if gotPruned != wantPruned || pruned == nil {
		t.Fatalf("strip shows %d pruned blocks, the certificates %d in effect", gotPruned, wantPruned)
	}

	// Click the pruned item: certificate and original.
	original := string(httpDo(t, "GET", base+"/v1/sessions/"+sess+"/items/"+pruned.Item+"?format=raw", "", nil))
	sel := fmt.Sprintf(`#strip-section .strip .b[data-item=%q]`, pruned.Item)
	if err := chromedp.Do(ctx,
		chromedp.Click(sel),
		chromedp.WaitVisible(`#cert pre.original[data-loaded="1"]`),
	); err != nil {
		t.Fatalf("open item %s: %v", pruned.Item, err)
	}
	type certView struct {
		Rung     string `json:"rung"`
		Reason   string `json:"reason"`
		Survivor string `json:"survivor"`
		Original string `json:"original"`
	}
	cert, err := chromedp.Run(ctx, chromedp.Evaluate[certView](`(q => ({rung: q(".rung"), reason: q(".reason"), survivor: q(".survivor"), original: q("pre.original")}))(s => document.querySelector("#cert " + s).textContent)`))
	if err != nil {
		t.Fatalf("read certificate: %v", err)
	}
	rung, reason, survivor, shown := cert.Rung, cert.Reason, cert.Survivor, cert.Original
	if strings.TrimSpace(rung) != pruned.Rung || !strings.Contains(reason, pruned.Reason) {
		t.Errorf("certificate shows rung %q reason %q, want %s %s", rung, reason, pruned.Rung, pruned.Reason)
	}
	if r := pruned.Recoverability; r != nil && r.Survivor != "" && !strings.Contains(survivor, r.Survivor) {
		t.Errorf("certificate shows surviving copy %q, want %s", survivor, r.Survivor)
	}
	if shown != original {
		t.Errorf("original shown (%d bytes) differs from GET items/%s?format=raw (%d bytes)", len(shown), pruned.Item, len(original))
	}
	// Move the timeline to the first request, then back to now.
	label, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(s => { s.value = 0; s.dispatchEvent(new Event("input")); return document.getElementById("step-label").textContent; })(document.getElementById("slider"))`))
	if err != nil {
		t.Fatalf("slider: %v", err)
	}
	if !strings.HasPrefix(label, "request 1 of ") {
		t.Errorf("slider at 0: label %q", label)
	}
	// The screenshot shows the first request with an application.
	info, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(s => {
		const steps = JSON.parse(document.getElementById("steps").textContent);
		const k = steps.findIndex(st => st.a.length > 0);
		s.value = k < 0 ? s.max : k; s.dispatchEvent(new Event("input"));
		return document.getElementById("step-info").textContent;
	})(document.getElementById("slider"))`))
	if err != nil {
		t.Fatalf("slider: %v", err)
	}
	if !strings.Contains(info, "first divergence") {
		t.Errorf("slider at the first application: info %q names no first divergence", info)
	}
	screenshot(t, ctx, "session.png")

	// Restore through the button: the page reloads with the item kept, and
	// the next rendered bundle holds the original.
	loaded := chromedp.Events(ctx, page.LoadEventFired)
	if err := chromedp.Do(ctx, chromedp.Click(`#cert button[data-action="restore"]`)); err != nil {
		t.Fatalf("restore %s: %v", pruned.Item, err)
	}
	for _, err := range loaded { // the page reloads once the API recorded the restore
		if err != nil {
			t.Fatalf("restore %s: reload: %v", pruned.Item, err)
		}
		break
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(`#cert pre.original[data-loaded="1"]`)); err != nil {
		t.Fatalf("restore %s: %v", pruned.Item, err)
	}
	after, err := chromedp.Run(ctx, chromedp.Evaluate[[]stripBlock](readStrip))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range after {
		if b.Item == pruned.Item && b.Class != "kept" {
			t.Errorf("restored item %s shows as %q, want kept", b.Item, b.Class)
		}
	}
	bundle := httpDo(t, "GET", base+"/v1/sessions/"+sess+"/bundle", "", nil)
	if !bundleHolds(t, bundle, original) {
		t.Errorf("the bundle rendered after restore does not hold item %s's original", pruned.Item)
	}

	// Fleet page.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(base+"/ui/fleet"),
		chromedp.WaitVisible("#fleet-totals"),
	); err != nil {
		t.Fatalf("fleet page: %v", err)
	}
	screenshot(t, ctx, "fleet.png")
}

// TestInspectorLoginInBrowser runs a server with an auth file: the
// browser is sent to the login form, logs in with acme's token, sees only
// acme's sessions, restores a pruned item through the page's button (the
// cookie authenticates the action; the API, read with the bearer token,
// holds the restore), cannot read the cookie from script, and logs out.
func TestInspectorLoginInBrowser(t *testing.T) {
	trace := sharedTrace(t, "entirecli-60-1ac0eb4d69-0.jsonl")
	other := sharedTrace(t, "entirecli-64-267478c135-0.jsonl")
	ctx := withBrowser(t)
	const acme, globex = "acme-browser-token-0123456789", "globex-browser-token-0123456789"
	auth, err := api.ParseAuth(strings.NewReader(acme+" acme\n"+globex+" globex\n"), "auth")
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	svc, err := service.Start(sctx, service.Config{DataDir: t.TempDir(), HTTPListen: "127.0.0.1:0", Policy: policy.Default(), Auth: auth})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(svc.Close)
	base := "http://" + svc.HTTPAddr
	sess := importFileToken(t, base, acme, trace)
	importFileToken(t, base, globex, other)

	// Not logged in: the form, which comes back to the page asked for.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(base+"/ui/sessions/"+sess),
		chromedp.WaitVisible(`#login input[name="token"]`),
		chromedp.SendKeys(`#login input[name="token"]`, "wrong-token-0123456789"),
		chromedp.Submit(`#login`),
		chromedp.WaitVisible(`#login-error`),
	); err != nil {
		t.Fatalf("login form, wrong token: %v", err)
	}
	screenshot(t, ctx, "login.png")
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(`#login input[name="token"]`, acme),
		chromedp.Submit(`#login`),
		chromedp.WaitVisible("#strip-section .strip .b"),
	); err != nil {
		t.Fatalf("log in: %v", err)
	}
	if c, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.cookie`)); err != nil || c != "" {
		t.Errorf("script reads the cookie %q (%v): want HttpOnly", c, err)
	}

	// The pruned item, restored through the button.
	var decs struct {
		Decisions []decision `json:"decisions"`
	}
	if err := json.Unmarshal(httpDoToken(t, "GET", base+"/v1/sessions/"+sess+"/decisions", acme, "", nil), &decs); err != nil {
		t.Fatal(err)
	}
	var pruned *decision
	for i, d := range decs.Decisions {
		if d.InEffect {
			pruned = &decs.Decisions[i]
			break
		}
	}
	if pruned == nil {
		t.Fatal("no pruned item in the trace")
	}
	original := string(httpDoToken(t, "GET", base+"/v1/sessions/"+sess+"/items/"+pruned.Item+"?format=raw", acme, "", nil))
	if err := chromedp.Do(ctx,
		chromedp.Click(fmt.Sprintf(`#strip-section .strip .b[data-item=%q]`, pruned.Item)),
		chromedp.WaitVisible(`#cert pre.original[data-loaded="1"]`),
	); err != nil {
		t.Fatalf("open item %s: %v", pruned.Item, err)
	}
	if shown, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#cert pre.original").textContent`)); err != nil || shown != original {
		t.Errorf("original shown through the login (%d bytes, %v) differs from the API's (%d bytes)", len(shown), err, len(original))
	}
	loaded := chromedp.Events(ctx, page.LoadEventFired)
	if err := chromedp.Do(ctx, chromedp.Click(`#cert button[data-action="restore"]`)); err != nil {
		t.Fatalf("restore %s: %v", pruned.Item, err)
	}
	for _, err := range loaded {
		if err != nil {
			t.Fatalf("restore %s: reload: %v", pruned.Item, err)
		}
		break
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(`#cert pre.original[data-loaded="1"]`)); err != nil {
		t.Fatalf("restore %s: %v", pruned.Item, err)
	}
	if !bundleHolds(t, httpDoToken(t, "GET", base+"/v1/sessions/"+sess+"/bundle", acme, "", nil), original) {
		t.Errorf("the bundle after the restore through the login does not hold item %s's original", pruned.Item)
	}

	// acme's login lists acme's session only.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible("#sessions tbody tr.session")); err != nil {
		t.Fatalf("sessions page: %v", err)
	}
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#sessions tbody tr.session")).map(r => r.dataset.session)`))
	if err != nil || len(rows) != 1 || rows[0] != sess {
		t.Errorf("acme's sessions page lists %v (%v), want [%s]", rows, err, sess)
	}

	// Log out: back to the form, and the pages need a login again.
	if err := chromedp.Do(ctx,
		chromedp.Click(`#logout`),
		chromedp.WaitVisible(`#login input[name="token"]`),
		chromedp.Navigate(base+"/ui/fleet"),
		chromedp.WaitVisible(`#login input[name="token"]`),
	); err != nil {
		t.Fatalf("log out: %v", err)
	}
}

// bundleHolds reports whether an Anthropic-shaped bundle holds text as a
// whole string value (a message's text or a tool result's content).
func bundleHolds(t *testing.T, bundle []byte, text string) bool {
	t.Helper()
	var v any
	if err := json.Unmarshal(bundle, &v); err != nil {
		t.Fatalf("bundle: %v", err)
	}
	var walk func(any) bool
	walk = func(v any) bool {
		switch x := v.(type) {
		case string:
			return x == text
		case []any:
			for _, e := range x {
				if walk(e) {
					return true
				}
			}
		case map[string]any:
			for _, e := range x {
				if walk(e) {
					return true
				}
			}
		}
		return false
	}
	return walk(v)
}
