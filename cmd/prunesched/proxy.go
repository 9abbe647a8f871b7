package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/httpguard"
	"github.com/prunesched/prunesched/internal/service"
	"github.com/prunesched/prunesched/pipeline"
	"github.com/prunesched/prunesched/proxy"
)

// identityKeyFile is the proxy's identity key inside the data directory.
const identityKeyFile = "proxy-identity.key"

// The proxy's defaults differ from serve's (127.0.0.1:7070 and the data
// directory itself), so 'prunesched serve' and 'prunesched proxy' run side
// by side without flags: each has its own log, lock and API port.
const (
	// defaultProxyListen is where agents reach the proxy ('prunesched
	// setup' points them there).
	defaultProxyListen = "127.0.0.1:8788"
	// defaultProxyAPIListen is the proxy's prunesched API (serve's is
	// defaultServeListen).
	defaultProxyAPIListen = "127.0.0.1:7071"
)

// defaultProxyDataDir is the proxy's data directory: "proxy" inside
// serve's (see defaultDataDir), which serve's embedded NATS leaves alone.
func defaultProxyDataDir(getenv func(string) string) string {
	return filepath.Join(defaultDataDir(getenv), "proxy")
}

func runProxy(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "proxy", "--upstream URL [flags]", `
Prune live agents' requests. The proxy speaks the Anthropic Messages API
(/v1/messages, streaming or not; count_tokens passed through) and the OpenAI
Chat Completions (/v1/chat/completions) and Responses (/v1/responses) APIs.
Point the agent at --listen ('prunesched setup AGENT' writes its config): each request's new messages and tool
results are appended to the session's log, the scheduler decides at the
request's time, the placeholders of pruned items are spliced into the
client's own request, and the response streams back unchanged. If anything
inside prunesched fails or takes longer than --budget, the original request
goes upstream unchanged.

It runs the same log and pipeline as 'prunesched serve' (embedded NATS under
--data, or --nats), and the prunesched API on --api-listen so that
'prunesched decisions', 'bundle' and /metrics work while it runs (with
--server http://127.0.0.1:7071, or $PRUNESCHED_SERVER). Its defaults (API
port, data directory) differ from serve's, so both can run side by side.`)
	listen := fs.String("listen", defaultProxyListen, "proxy address the agents call; loopback unless told otherwise")
	upstream := fs.String("upstream", "", "model API base URL requests go to, e.g. https://api.anthropic.com (required)")
	openaiUp := fs.String("openai-upstream", "", "base URL for the OpenAI paths (/v1/chat/completions, /v1/responses), e.g. https://api.openai.com; default --upstream")
	data := fs.String("data", defaultProxyDataDir(e.getenv), "data directory of the embedded NATS server and of the proxy's identity key (proxy-identity.key); empty keeps the key in memory only (default: \"proxy\" inside serve's, so both can run at once)")
	natsURL := fs.String("nats", "", "external NATS server URL; empty runs NATS embedded")
	fleet := fs.Bool("fleet", false, "one of several proxies on the --nats log behind a load balancer without session affinity: catch each session up with what the others appended before deciding, publish a request's facts guarded before forwarding it, refuse to start with another identity key than the fleet's, and run only the projection (the eligibility and scheduler workers run as 'prunesched worker'); see docs/operating.md")
	apiListen := fs.String("api-listen", defaultProxyAPIListen, "prunesched API address (decisions, bundle, /metrics; serve's is 127.0.0.1:7070, so both can run at once); empty runs none")
	common := addServerFlags(fs, "require bearer tokens on the prunesched API (one 'TOKEN TENANT' per line, see docs/security.md); needed to bind it beyond loopback", "policy file (YAML); empty = defaults (see 'prunesched policy')")
	tenant := fs.String("tenant", "", "tenant of every session unless the request sends X-Prunesched-Tenant (default \"default\")")
	budget := fs.Duration("budget", proxy.DefaultBudget, "time prunesched may add to a request before the original is sent unchanged")
	recordTimeout := fs.Duration("record-timeout", proxy.DefaultRecordTimeout, "bound of the facts' append when it goes on in the background past --budget, and of recording a response (tokenizing a large tool output takes about 1 s per 2-4 MB per core)")
	headerTimeout := fs.Duration("upstream-header-timeout", proxy.DefaultResponseHeaderTimeout, "how long to wait for the upstream's response headers before answering 502 (a non-streamed answer's headers come only once it is generated)")
	idleTimeout := fs.Duration("stream-idle-timeout", proxy.DefaultStreamIdleTimeout, "how long an upstream answer may send nothing once its headers arrived; past it the upstream request is cancelled, the stall is logged with the session and the agent's stream is aborted (not ended cleanly); 0 disables")
	limits := addLimitFlags(fs)
	memLimit := sizeFlag(fs, "memory-limit", 0, memoryLimitUsage)
	check := addCheckFlag(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if *idleTimeout < 0 {
		return usagef("--stream-idle-timeout must not be negative (0 disables it)")
	}
	if *upstream == "" {
		return usagef("--upstream is required (for example https://api.anthropic.com)")
	}
	// Flags are checked before anything starts (NATS, the data directory).
	if _, err := proxy.ParseUpstream(*upstream); err != nil {
		return usagef("--upstream %v", err)
	}
	if *openaiUp != "" {
		if _, err := proxy.ParseUpstream(*openaiUp); err != nil {
			return usagef("--openai-upstream %v", err)
		}
	}
	if *tenant != "" && !events.ValidToken(*tenant) {
		return usagef("--tenant %q: use letters, digits, '_' or '-'", *tenant)
	}
	if *budget < 0 || *headerTimeout < 0 {
		return usagef("--budget and --upstream-header-timeout must not be negative")
	}
	if *fleet && *natsURL == "" {
		return usagef("--fleet needs --nats: the proxies of a fleet share one external log")
	}
	logger, pol, auth, err := common.load(e)
	if err != nil {
		return err
	}
	// The proxy and its API share one in-flight body budget.
	bodies := limits.budget()
	cfg := service.Config{NATSURL: *natsURL, DataDir: *data, HTTPListen: *apiListen, Policy: pol, Logger: logger, Auth: auth,
		HTTPTimeouts: limits.timeouts(), Bodies: bodies}
	cfg = common.guarded(cfg)
	if *fleet {
		cfg.Workers = []string{"projection"}
	}
	// The agents' listener answers for its own address and the allowed
	// hosts (the public URL is the API's).
	guardCfg := httpguard.Config{Listen: *listen, AllowedHosts: cfg.AllowedHosts, Logger: logger.With("component", "proxy")}
	if err := guardCfg.Validate(); err != nil {
		return usagef("%v", err)
	}
	if *check {
		return reportCheck(e, "proxy", cfg)
	}
	// The key of the credential tag in session ids, kept so sessions
	// continue across restarts.
	var idKey []byte
	if *data != "" {
		if idKey, err = proxy.LoadOrCreateIdentityKey(filepath.Join(*data, identityKeyFile)); err != nil {
			return err
		}
	} else {
		logger.Warn("prunesched proxy: no --data: the identity key is random, so sessions do not continue after a restart")
	}
	applyMemoryLimit(e, logger, memoryLimitOf(fs, *memLimit, *limits.inflight, pipeline.DefaultProjectionBytes))
	svc, err := service.Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer svc.Close()
	if *fleet {
		if err := joinFleet(ctx, svc, idKey); err != nil {
			return err
		}
	}
	// 0 on the command line means no timeout; in proxy.Config 0 is the
	// default and a negative value disables it.
	streamIdle := *idleTimeout
	if streamIdle == 0 {
		streamIdle = -1
	}
	px, err := proxy.New(proxy.Config{
		Upstream: *upstream, OpenAIUpstream: *openaiUp, Tenant: *tenant, Budget: *budget, RecordTimeout: *recordTimeout,
		ResponseHeaderTimeout: *headerTimeout, StreamIdleTimeout: streamIdle, Bodies: bodies, WriteTimeout: *limits.write,
		IdentityKey: idKey, Policy: &pol, Fleet: *fleet,
		Backend: service.NewProxyBackend(svc.Store, svc.Pipeline), Logger: logger.With("component", "proxy"), Registry: svc.Registry,
	})
	if err != nil {
		return usagef("%v", err)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen for the proxy on %s: %w", *listen, err)
	}
	guardCfg.Addr = ln.Addr().String()
	guard, err := httpguard.New(guardCfg)
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("proxy listener: %w", err)
	}
	srv := limits.timeouts().Server(guard.Handler(px.Handler()))
	px.ConfigureServer(srv)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	logger.Info("prunesched proxy", "listen", "http://"+ln.Addr().String(), "upstream", *upstream, "api", svc.HTTPAddr, "policy", pol.Version())
	if svc.HTTPAddr != "" {
		fmt.Fprintf(e.stdout, "prunesched proxy on http://%s -> %s (API on http://%s)\n", ln.Addr(), *upstream, svc.HTTPAddr)
		api := "http://" + svc.HTTPAddr
		fmt.Fprintf(e.stdout, "  inspector:       %s/\n", api)
		if svc.HTTPAddr == defaultProxyAPIListen {
			fmt.Fprintf(e.stdout, "  client commands: prunesched stats (they find this API when no serve runs; or export PRUNESCHED_SERVER=%s)\n", api)
		} else {
			fmt.Fprintf(e.stdout, "  client commands: export PRUNESCHED_SERVER=%s, then prunesched stats\n", api)
		}
	} else {
		fmt.Fprintf(e.stdout, "prunesched proxy on http://%s -> %s (no API: --api-listen is empty, so no inspector and no client commands)\n", ln.Addr(), *upstream)
	}
	select {
	case <-ctx.Done():
	case err := <-errc:
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("proxy server: %w", err)
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	// Responses already sent may still be recording: finish them before
	// the service stops.
	if err := px.Close(sctx); err != nil {
		logger.Warn("prunesched proxy: shutdown", "err", err)
	}
	return nil
}

// joinFleet checks the proxy's identity key against the fleet's
// (proxy.JoinFleet), its bucket replicated as the log is.
func joinFleet(ctx context.Context, svc *service.Service, key []byte) error {
	replicas := 1
	if st, err := svc.Store.JS().Stream(ctx, events.StreamName); err == nil {
		replicas = st.CachedInfo().Config.Replicas
	}
	if err := proxy.JoinFleet(ctx, svc.Store.JS(), key, replicas); err != nil {
		return fmt.Errorf("prunesched proxy --fleet: %w", err)
	}
	return nil
}
