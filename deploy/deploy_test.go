package deploy_test

import (
	"encoding/json"
	"fmt"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/proxy"
)

// composeFile is the part of deploy/compose.yaml the tests read.
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
	Secrets  map[string]struct {
		File string `yaml:"file"`
	} `yaml:"secrets"`
}

type composeService struct {
	Image       string            `yaml:"image"`
	Entrypoint  []string          `yaml:"entrypoint"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Secrets     []string          `yaml:"secrets"`
	Volumes     []any             `yaml:"volumes"`
	Ports       []string          `yaml:"ports"`
	DependsOn   []string          `yaml:"depends_on"`
	Build       *struct {
		Context    string `yaml:"context"`
		Dockerfile string `yaml:"dockerfile"`
	} `yaml:"build"`
}

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	b, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	if len(c.Services) == 0 {
		t.Fatal("compose.yaml: no services")
	}
	return c
}

// mount is one volume of a service: a bind mount of a host path or a
// named volume.
type mount struct {
	source, target string
	bind           bool
}

func mounts(t *testing.T, name string, s composeService) []mount {
	t.Helper()
	var out []mount
	for _, v := range s.Volumes {
		switch v := v.(type) {
		case string:
			parts := strings.Split(v, ":")
			if len(parts) < 2 {
				t.Errorf("service %s: volume %q has no target", name, v)
				continue
			}
			src := parts[0]
			out = append(out, mount{source: src, target: parts[1],
				bind: strings.HasPrefix(src, ".") || strings.HasPrefix(src, "/") || strings.HasPrefix(src, "~")})
		case map[string]any:
			src, _ := v["source"].(string)
			dst, _ := v["target"].(string)
			typ, _ := v["type"].(string)
			out = append(out, mount{source: src, target: dst, bind: typ == "bind"})
		default:
			t.Errorf("service %s: volume %v: unknown syntax", name, v)
		}
	}
	return out
}

// TestComposeMountsExist: every file or directory a service mounts from
// the repository exists (paths are relative to deploy/), every named
// volume is declared, and the build context and Dockerfile exist.
func TestComposeMountsExist(t *testing.T) {
	c := loadCompose(t)
	binds := 0
	for name, s := range c.Services {
		for _, m := range mounts(t, name, s) {
			if !m.bind {
				if _, ok := c.Volumes[m.source]; !ok {
					t.Errorf("service %s: named volume %q is not declared under volumes:", name, m.source)
				}
				continue
			}
			binds++
			if strings.HasPrefix(m.source, "/") || strings.HasPrefix(m.source, "~") {
				t.Errorf("service %s: mount %q is outside the repository", name, m.source)
				continue
			}
			if _, err := os.Stat(m.source); err != nil {
				t.Errorf("service %s: mounted %s does not exist: %v", name, m.source, err)
			}
		}
		if s.Build != nil {
			ctx := s.Build.Context
			if fi, err := os.Stat(ctx); err != nil || !fi.IsDir() {
				t.Errorf("service %s: build context %q is not a directory", name, ctx)
			}
			if _, err := os.Stat(filepath.Join(ctx, s.Build.Dockerfile)); err != nil {
				t.Errorf("service %s: Dockerfile: %v", name, err)
			}
		}
		for _, d := range s.DependsOn {
			if _, ok := c.Services[d]; !ok {
				t.Errorf("service %s depends on unknown service %s", name, d)
			}
		}
		for _, p := range s.Ports {
			if !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("service %s: port %q is not published on the host's loopback", name, p)
			}
		}
	}
	if binds < 8 {
		t.Errorf("%d bind mounts, want the NATS configs, Prometheus config and rules, Grafana provisioning and dashboard", binds)
	}
	// What the issue asks the compose file to start.
	kinds := map[string]int{}
	for name, s := range c.Services {
		switch {
		case strings.HasPrefix(name, "nats-"):
			kinds["nats"]++
		case len(s.Command) > 1 && s.Command[0] == "worker":
			kinds[s.Command[1]]++
		case strings.Contains(s.Image, "prometheus"):
			kinds["prometheus"]++
		case strings.Contains(s.Image, "grafana"):
			kinds["grafana"]++
		}
	}
	for kind, want := range map[string]int{"nats": 3, "eligibility": 2, "scheduler": 2, "projector": 1, "prometheus": 1, "grafana": 1} {
		if kinds[kind] < want {
			t.Errorf("compose starts %d %s, want at least %d", kinds[kind], kind, want)
		}
	}
}

// cliFlags returns the subcommands and the long flag names defined in
// cmd/prunesched (flag or pflag definitions).
func cliFlags(t *testing.T) (cmds, flags map[string]bool) {
	t.Helper()
	files, err := filepath.Glob("../cmd/prunesched/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("cmd/prunesched sources: %v", err)
	}
	defRe := regexp.MustCompile(`\.(?:String|Int|Bool|Duration|Float64|Int64|Uint64|StringSlice|StringArray)(?:Var)?P?\(\s*(?:&[\w.\[\]]+,\s*)?"([a-z0-9-]+)"`)
	cmdRe := regexp.MustCompile(`\{"([a-z-]+)",\s*"`)
	cmds, flags = map[string]bool{}, map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range defRe.FindAllSubmatch(b, -1) {
			flags[string(m[1])] = true
		}
		for _, m := range cmdRe.FindAllSubmatch(b, -1) {
			cmds[string(m[1])] = true
		}
	}
	if !cmds["worker"] || !flags["nats"] {
		t.Fatalf("cmd/prunesched: found no worker command or --nats flag (commands %v)", cmds)
	}
	return cmds, flags
}

// checkArgs checks a prunesched command line: a known subcommand and
// flags the binary defines. It returns the flag values by name.
func checkArgs(t *testing.T, where string, args []string, cmds, flags map[string]bool) map[string]string {
	t.Helper()
	if len(args) == 0 || !cmds[args[0]] {
		t.Errorf("%s: %q is not a prunesched command", where, args)
		return nil
	}
	vals := map[string]string{}
	for i, a := range args {
		if !strings.HasPrefix(a, "--") {
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !flags[name] {
			t.Errorf("%s: prunesched %s has no flag --%s", where, args[0], name)
		}
		if !hasVal && i+1 < len(args) {
			val = args[i+1]
		}
		vals[name] = val
	}
	return vals
}

// promConfig is the part of prometheus/prometheus.yml the tests read.
type promConfig struct {
	RuleFiles     []string `yaml:"rule_files"`
	ScrapeConfigs []struct {
		Job           string `yaml:"job_name"`
		Authorization struct {
			CredentialsFile string `yaml:"credentials_file"`
		} `yaml:"authorization"`
		StaticConfigs []struct {
			Targets []string `yaml:"targets"`
		} `yaml:"static_configs"`
	} `yaml:"scrape_configs"`
}

func loadPrometheus(t *testing.T) promConfig {
	t.Helper()
	b, err := os.ReadFile("prometheus/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	var prom promConfig
	if err := yaml.Unmarshal(b, &prom); err != nil {
		t.Fatalf("prometheus.yml: %v", err)
	}
	return prom
}

// natsConf is what the tests read from a deploy/nats/nN.conf.
type natsConf struct{ client, cluster string }

func readNATSConf(t *testing.T, path string) natsConf {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c natsConf
	inCluster := false
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "cluster {"):
			inCluster = true
		case strings.HasPrefix(line, "listen:"):
			_, port, _ := strings.Cut(strings.TrimSpace(strings.TrimPrefix(line, "listen:")), ":")
			if inCluster {
				c.cluster = port
			} else {
				c.client = port
			}
		}
	}
	if c.client == "" || c.cluster == "" {
		t.Fatalf("%s: no client or cluster listen port", path)
	}
	return c
}

// TestComposeCommands: the prunesched services run commands and flags the
// binary accepts; the NATS nodes load the mounted configs and route to
// each other on the cluster ports those configs listen on; the workers'
// NATS URLs use the configs' client ports; Prometheus scrapes every
// prunesched process on the port it listens on.
func TestComposeCommands(t *testing.T) {
	c := loadCompose(t)
	cmds, flags := cliFlags(t)

	nodes := map[string]natsConf{} // service -> its config's ports
	for name, s := range c.Services {
		if !strings.HasPrefix(name, "nats-") {
			continue
		}
		if len(s.Entrypoint) == 0 || !strings.HasSuffix(s.Entrypoint[0], "nats-server") {
			t.Errorf("service %s: entrypoint %q, want nats-server", name, s.Entrypoint)
			continue
		}
		i := slices.Index(s.Command, "-c")
		if i < 0 || i+1 >= len(s.Command) {
			t.Errorf("service %s: no -c CONFIG", name)
			continue
		}
		var conf string
		for _, m := range mounts(t, name, s) {
			if m.target == s.Command[i+1] {
				conf = m.source
			}
		}
		if conf == "" {
			t.Errorf("service %s: config %s is not mounted", name, s.Command[i+1])
			continue
		}
		nodes[name] = readNATSConf(t, conf)
	}
	if len(nodes) != 3 {
		t.Fatalf("%d NATS nodes, want 3", len(nodes))
	}
	var wantRoutes []string
	for name, n := range nodes {
		wantRoutes = append(wantRoutes, "nats-route://"+name+":"+n.cluster)
	}
	sort.Strings(wantRoutes)
	// Routes authenticate (the cluster authorization of n*.conf): every
	// route URL carries the route user's password, and so does --cluster
	// (the flag replaces the config's cluster block; without credentials
	// it switches the routes' authentication off).
	const routeCreds = "route:${PS_ROUTE_PASSWORD:?set PS_ROUTE_PASSWORD}@"
	for name, n := range nodes {
		s := c.Services[name]
		if i := slices.Index(s.Command, "--cluster"); i < 0 || !strings.HasSuffix(s.Command[i+1], ":"+n.cluster) {
			t.Errorf("service %s: --cluster must listen on its config's cluster port %s: %q", name, n.cluster, s.Command)
		} else if !strings.HasPrefix(s.Command[i+1], "nats://"+routeCreds) {
			t.Errorf("service %s: --cluster %q does not carry the route credentials %s (the routes would accept anyone)", name, s.Command[i+1], routeCreds)
		}
		i := slices.Index(s.Command, "--routes")
		if i < 0 {
			t.Errorf("service %s: no --routes", name)
			continue
		}
		var got []string
		for _, r := range strings.Split(s.Command[i+1], ",") {
			hostPort, ok := strings.CutPrefix(r, "nats-route://"+routeCreds)
			if !ok {
				t.Errorf("service %s: route %q does not carry the route credentials %s", name, r, routeCreds)
			}
			got = append(got, "nats-route://"+hostPort)
		}
		sort.Strings(got)
		if !slices.Equal(got, wantRoutes) {
			t.Errorf("service %s: routes %v, want %v", name, got, wantRoutes)
		}
	}

	listens := map[string]string{} // service -> port its /metrics is on
	for name, s := range c.Services {
		if s.Image != "prunesched:local" || len(s.Entrypoint) > 0 {
			continue
		}
		vals := checkArgs(t, "service "+name, s.Command, cmds, flags)
		if vals == nil {
			continue
		}
		for _, raw := range strings.Split(vals["nats"], ",") {
			u, err := neturl.Parse(interpolate(t, "service "+name, raw, map[string]string{}))
			if err != nil {
				t.Errorf("service %s: NATS URL: %v", name, err)
				continue
			}
			if n, ok := nodes[u.Hostname()]; !ok || n.client != u.Port() {
				t.Errorf("service %s: NATS URL %q is not a node's client address", name, u.Redacted())
			}
		}
		addr := vals["listen"]
		if s.Command[0] == "proxy" {
			addr = vals["api-listen"]
		}
		_, port, ok := strings.Cut(addr, ":")
		if !ok {
			t.Errorf("service %s: no metrics address", name)
			continue
		}
		listens[name] = port
	}

	prom := loadPrometheus(t)
	scraped := map[string]bool{}
	for _, sc := range prom.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			for _, tg := range st.Targets {
				host, port, _ := strings.Cut(tg, ":")
				if listens[host] != port {
					t.Errorf("prometheus.yml: target %s: service %s serves /metrics on port %q", tg, host, listens[host])
				}
				scraped[host] = true
			}
		}
	}
	for name := range listens {
		if !scraped[name] {
			t.Errorf("prometheus.yml does not scrape %s", name)
		}
	}
	var promMounts []string
	for _, m := range mounts(t, "prometheus", c.Services["prometheus"]) {
		promMounts = append(promMounts, m.target)
	}
	for _, rf := range prom.RuleFiles {
		if !slices.Contains(promMounts, rf) {
			t.Errorf("prometheus.yml: rule file %s is not mounted into the prometheus service", rf)
		}
	}
}

// TestDockerfile: multi-stage, static (CGO_ENABLED=0), a distroless or
// scratch final stage running as a non-root user, and every path it
// copies from the build context or builds exists.
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var froms []string
	user := ""
	text := strings.ReplaceAll(string(b), "\\\n", " ")
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "FROM":
			froms = append(froms, f[1])
			user = ""
		case "USER":
			user = f[1]
		case "COPY", "ADD":
			args := f[1:]
			if slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--from=") }) {
				continue
			}
			var paths []string
			for _, a := range args {
				if !strings.HasPrefix(a, "--") {
					paths = append(paths, a)
				}
			}
			for _, src := range paths[:len(paths)-1] {
				if _, err := os.Stat(filepath.Join("..", src)); err != nil {
					t.Errorf("Dockerfile: %s: %v", line, err)
				}
			}
		case "RUN":
			for _, m := range regexp.MustCompile(`go build .*?(\./\S+)`).FindAllStringSubmatch(line, -1) {
				if _, err := os.Stat(filepath.Join("..", m[1])); err != nil {
					t.Errorf("Dockerfile builds %s: %v", m[1], err)
				}
			}
		}
	}
	if len(froms) < 2 {
		t.Errorf("Dockerfile has %d stages, want a build stage and a runtime stage", len(froms))
	}
	if last := froms[len(froms)-1]; !strings.Contains(last, "distroless") && last != "scratch" {
		t.Errorf("final stage %s: want distroless or scratch", last)
	}
	if user == "" || user == "root" || user == "0" || strings.HasPrefix(user, "0:") {
		t.Errorf("final stage runs as %q, want a non-root USER", user)
	}
	if !strings.Contains(text, "CGO_ENABLED=0") {
		t.Error("Dockerfile does not build with CGO_ENABLED=0")
	}
}

// TestSystemdUnit: the unit is hardened, keeps its data in its state
// directory, binds loopback and runs flags the binary accepts.
func TestSystemdUnit(t *testing.T) {
	b, err := os.ReadFile("systemd/prunesched.service")
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string][]string{}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "[") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Errorf("systemd unit: %q is not KEY=VALUE", line)
			continue
		}
		keys[k] = append(keys[k], v)
	}
	one := func(k string) string {
		if v := keys[k]; len(v) > 0 {
			return v[len(v)-1]
		}
		return ""
	}
	for k, want := range map[string]string{
		"DynamicUser": "yes", "ProtectSystem": "strict", "StateDirectory": "prunesched",
		"NoNewPrivileges": "yes", "ProtectHome": "yes", "PrivateTmp": "yes", "CapabilityBoundingSet": "",
	} {
		if got, ok := keys[k]; !ok || one(k) != want {
			t.Errorf("systemd unit: %s=%q, want %q (set: %v)", k, one(k), want, got)
		}
	}
	cmds, flags := cliFlags(t)
	exec := strings.Fields(one("ExecStart"))
	if len(exec) < 2 || !strings.HasSuffix(exec[0], "/prunesched") {
		t.Fatalf("ExecStart %q does not run prunesched", exec)
	}
	vals := checkArgs(t, "ExecStart", exec[1:], cmds, flags)
	if !strings.HasPrefix(vals["listen"], "127.0.0.1:") {
		t.Errorf("ExecStart listens on %q, want loopback", vals["listen"])
	}
	if vals["data"] != "%S/prunesched" {
		t.Errorf("ExecStart --data %q, want the state directory %%S/prunesched", vals["data"])
	}
	// Loopback is every local user's: the unit requires tokens, from a
	// systemd credential (%d is the service's credentials directory).
	cred, ok := strings.CutPrefix(vals["auth-file"], "%d/")
	if !ok || !slices.ContainsFunc(keys["LoadCredential"], func(v string) bool { return strings.HasPrefix(v, cred+":") }) {
		t.Errorf("ExecStart --auth-file %q, want %%d/NAME with LoadCredential=NAME:PATH (set: %v)", vals["auth-file"], keys["LoadCredential"])
	}
	// The command line as systemd runs it: specifiers replaced.
	state, creds := t.TempDir(), filepath.Dir(testAuthFile(t))
	args := make([]string, 0, len(exec)-1)
	for _, a := range exec[1:] {
		args = append(args, strings.NewReplacer("%S", state, "%d", creds, "%%", "%").Replace(a))
	}
	startCheck(t, "ExecStart", args)
}

// descNames records the metric names a collector describes.
type descNames map[string]bool

func (d descNames) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	re := regexp.MustCompile(`fqName: "([^"]+)"`)
	for desc := range ch {
		if m := re.FindStringSubmatch(desc.String()); m != nil {
			d[m[1]] = true
		}
	}
	return nil
}

func (d descNames) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = d.Register(c)
	}
}

func (d descNames) Unregister(prometheus.Collector) bool { return false }

// TestProxyMetricsQueried: every prunesched_proxy_* series the rules and
// the dashboard query is registered by proxy.NewMetrics, and every proxy
// metric is on the dashboard.
func TestProxyMetricsQueried(t *testing.T) {
	names := descNames{}
	proxy.NewMetrics(names)
	if len(names) == 0 {
		t.Fatal("proxy.NewMetrics registered nothing")
	}
	known := func(ref string) bool {
		for _, suf := range []string{"", "_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(ref, suf); ok && names[base] {
				return true
			}
		}
		return false
	}
	ref := regexp.MustCompile(`prunesched_proxy_[a-z0-9_]+`)
	rules, err := os.ReadFile("prometheus/rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range ref.FindAllString(string(rules), -1) {
		if !known(r) {
			t.Errorf("rules.yml queries %s, which proxy/metrics.go does not register", r)
		}
	}
	b, err := os.ReadFile("grafana/prunesched.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	used := map[string]bool{}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, r := range ref.FindAllString(tg.Expr, -1) {
				if !known(r) {
					t.Errorf("dashboard panel %q queries %s, which proxy/metrics.go does not register", p.Title, r)
				}
				for _, suf := range []string{"_bucket", "_sum", "_count"} {
					r = strings.TrimSuffix(r, suf)
				}
				used[r] = true
			}
		}
	}
	for n := range names {
		if !used[n] {
			t.Errorf("proxy metric %s is not on the dashboard", n)
		}
	}
	for _, alert := range []string{"PruneschedProxyFailingOpen", "PruneschedProxyAddedLatencyHigh", "PruneschedRecoveriesPerSessionHigh"} {
		if !strings.Contains(string(rules), "alert: "+alert) {
			t.Errorf("rules.yml has no alert %s", alert)
		}
	}
}

// binary builds cmd/prunesched once per test run (go test puts its own go
// first on PATH), so the deployed command
// lines go through the real flag parser and start-time checks.
var binary struct {
	once sync.Once
	path string
	err  error
}

func prunesched(t *testing.T) string {
	t.Helper()
	binary.once.Do(func() {
		dir, err := os.MkdirTemp("", "deploy-test-")
		if err != nil {
			binary.err = err
			return
		}
		binary.path = filepath.Join(dir, "prunesched")
		out, err := exec.Command("go", "build", "-o", binary.path, "../cmd/prunesched").CombinedOutput()
		if err != nil {
			binary.err = fmt.Errorf("go build ../cmd/prunesched: %v\n%s", err, out)
		}
	})
	if binary.err != nil {
		t.Fatal(binary.err)
	}
	return binary.path
}

// startCheck runs `prunesched ARGS --check`: the flags parse, the files
// they name load, and service.Config.Check (an API beyond loopback needs
// --auth-file) passes, exactly as at start.
func startCheck(t *testing.T, where string, args []string) {
	t.Helper()
	cmd := exec.Command(prunesched(t), append(slices.Clone(args), "--check")...)
	cmd.Env = append(os.Environ(), "PRUNESCHED_DATA="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("%s: prunesched %s: would not start: %v\n%s", where, strings.Join(args, " "), err, out)
	}
}

// testAuthFile writes an auth file valid for the binary.
func testAuthFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "api-tokens")
	if err := os.WriteFile(p, []byte("0123456789abcdef0123456789abcdef prometheus\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// interpolate expands compose variables as docker compose does for the
// forms this file uses: ${VAR:?message} (required: here given a test
// value, recorded in required), ${VAR:-default}, and $$. A bare $VAR or
// ${VAR} (empty when unset, silently) is an error.
func interpolate(t *testing.T, where, s string, required map[string]string) string {
	t.Helper()
	re := regexp.MustCompile(`\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:\?|:-)([^}]*))?\}|\$[A-Za-z_]`)
	return re.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		sub := re.FindStringSubmatch(m)
		switch sub[2] {
		case ":?":
			v := "test-" + strings.ToLower(strings.ReplaceAll(sub[1], "_", "-"))
			required[sub[1]] = v
			return v
		case ":-":
			return sub[3]
		}
		t.Errorf("%s: %q has no default and is not required (${VAR:?message}): compose would put an empty string", where, m)
		return ""
	})
}

// secretPath maps an --auth-file inside a compose service to its secret:
// the file must be /run/secrets/NAME with NAME among the service's
// secrets and declared with a file under deploy/secrets/.
func secretPath(t *testing.T, c composeFile, name string, s composeService, path string) bool {
	t.Helper()
	secret, ok := strings.CutPrefix(path, "/run/secrets/")
	if !ok || !slices.Contains(s.Secrets, secret) {
		t.Errorf("service %s: --auth-file %s is not one of its secrets %v (/run/secrets/NAME)", name, path, s.Secrets)
		return false
	}
	decl, ok := c.Secrets[secret]
	if !ok || !strings.HasPrefix(decl.File, "./secrets/") {
		t.Errorf("service %s: secret %s is not declared with a file under deploy/secrets/ (%+v)", name, secret, decl)
		return false
	}
	return true
}

// TestComposeServicesWouldStart: every prunesched service's command, with
// its variables interpolated and its auth file replaced by a test one,
// passes the binary's flag parser and start-time checks (today's rule: an
// API beyond loopback needs --auth-file); every NATS URL logs in as the
// service user with ${PS_SERVICE_PASSWORD:?...}; Prometheus sends a token
// (or the services serve /metrics openly).
func TestComposeServicesWouldStart(t *testing.T) {
	c := loadCompose(t)
	auth := testAuthFile(t)
	openMetrics := map[string]bool{}
	n := 0
	for name, s := range c.Services {
		if s.Image != "prunesched:local" || len(s.Entrypoint) > 0 {
			continue
		}
		n++
		required := map[string]string{}
		args := make([]string, len(s.Command))
		for i, a := range s.Command {
			args[i] = interpolate(t, "service "+name, a, required)
		}
		for i := 0; i+1 < len(args); i++ {
			switch args[i] {
			case "--auth-file":
				if secretPath(t, c, name, s, args[i+1]) {
					args[i+1] = auth
				}
			case "--data":
				args[i+1] = t.TempDir()
			case "--nats":
				for _, raw := range strings.Split(args[i+1], ",") {
					u, err := neturl.Parse(raw)
					if err != nil {
						t.Errorf("service %s: NATS URL: %v", name, err)
						continue
					}
					pw, _ := u.User.Password()
					if u.User.Username() != store.ServiceUser || pw == "" || pw != required["PS_SERVICE_PASSWORD"] {
						t.Errorf("service %s: NATS URL %s does not log in as %s with ${PS_SERVICE_PASSWORD:?...}", name, u.Redacted(), store.ServiceUser)
					}
				}
			}
		}
		openMetrics[name] = slices.Contains(args, "--open-metrics")
		startCheck(t, "service "+name, args)
	}
	if n < 7 {
		t.Errorf("%d prunesched services checked, want the workers and the proxy", n)
	}

	prom := loadPrometheus(t)
	for _, sc := range prom.ScrapeConfigs {
		if f := sc.Authorization.CredentialsFile; f != "" {
			secretPath(t, c, "prometheus", c.Services["prometheus"], f)
			continue
		}
		for _, st := range sc.StaticConfigs {
			for _, tg := range st.Targets {
				host, _, _ := strings.Cut(tg, ":")
				if !openMetrics[host] {
					t.Errorf("prometheus.yml: job %s scrapes %s without a token, and %s does not run with --open-metrics: the scrape gets 401", sc.Job, tg, host)
				}
			}
		}
	}
}

// natsEnvNeeded returns the variables a NATS config (and the files it
// includes) takes from the environment: every $NAME it uses that it does
// not define itself.
func natsEnvNeeded(t *testing.T, path string) []string {
	t.Helper()
	defined, used := map[string]bool{}, map[string]bool{}
	var read func(p string)
	read = func(p string) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("NATS config: %v", err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			line, _, _ = strings.Cut(line, "#")
			line = strings.TrimSpace(line)
			if inc, ok := strings.CutPrefix(line, "include "); ok {
				read(filepath.Join(filepath.Dir(p), strings.Trim(strings.TrimSpace(inc), `"'`)))
				continue
			}
			if m := regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)\s*[=:]\s*\{?`).FindStringSubmatch(line); m != nil {
				defined[m[1]] = true
			}
			// "$JS.API..." in quotes is a subject, not a variable.
			unquoted := regexp.MustCompile(`"[^"]*"`).ReplaceAllString(line, `""`)
			for _, m := range regexp.MustCompile(`\$([A-Za-z_][A-Za-z0-9_]*)`).FindAllStringSubmatch(unquoted, -1) {
				used[m[1]] = true
			}
		}
	}
	read(path)
	var out []string
	for v := range used {
		if !defined[v] {
			out = append(out, v)
		}
	}
	sort.Strings(out)
	return out
}

// TestComposeNATSAuth: each NATS node mounts every file its config
// includes, and gets every variable they read from the environment as
// ${VAR:?...}, so compose refuses to start without it.
func TestComposeNATSAuth(t *testing.T) {
	c := loadCompose(t)
	for name, s := range c.Services {
		if !strings.HasPrefix(name, "nats-") {
			continue
		}
		i := slices.Index(s.Command, "-c")
		if i < 0 {
			t.Errorf("service %s: no -c CONFIG", name)
			continue
		}
		conf := s.Command[i+1]
		byTarget := map[string]string{}
		for _, m := range mounts(t, name, s) {
			byTarget[m.target] = m.source
		}
		src, ok := byTarget[conf]
		if !ok {
			t.Errorf("service %s: config %s is not mounted", name, conf)
			continue
		}
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`(?m)^\s*include\s+(\S+)`).FindAllStringSubmatch(string(b), -1) {
			inc := filepath.Join(filepath.Dir(conf), strings.Trim(m[1], `"'`))
			if _, ok := byTarget[inc]; !ok {
				t.Errorf("service %s: %s includes %s, which is not mounted", name, conf, inc)
			}
		}
		needed := natsEnvNeeded(t, src)
		if len(needed) == 0 {
			t.Errorf("service %s: %s reads no password from the environment; want auth.conf's", name, src)
		}
		for _, v := range needed {
			got, ok := s.Environment[v]
			if !ok || !strings.HasPrefix(got, "${"+v+":?") {
				t.Errorf("service %s: environment %s=%q, want \"${%s:?...}\" (auth.conf reads it; compose must refuse to start without it)", name, v, got, v)
			}
		}
	}
}

// TestDockerfileCMDWouldStart: the image's default command passes the
// binary's start-time checks (it listens on all of the container's
// interfaces, so it must name an auth file).
func TestDockerfileCMDWouldStart(t *testing.T) {
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var cmd []string
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "CMD "); ok {
			if err := json.Unmarshal([]byte(rest), &cmd); err != nil {
				t.Fatalf("Dockerfile CMD %s: %v", rest, err)
			}
		}
	}
	if len(cmd) == 0 {
		t.Fatal("Dockerfile has no CMD")
	}
	for i := 0; i+1 < len(cmd); i++ {
		if cmd[i] == "--auth-file" {
			cmd[i+1] = testAuthFile(t)
		}
	}
	startCheck(t, "Dockerfile CMD", cmd)
}

// TestComposeLoadBalancer: the agents' endpoint is the load balancer, which
// spreads requests round robin, with no session affinity, over every
// proxy service on the port it listens on, and the proxies share one
// identity key (the same volume at their --data), so a conversation
// continues whichever proxy a request reaches.
func TestComposeLoadBalancer(t *testing.T) {
	c := loadCompose(t)
	lb, ok := c.Services["lb"]
	if !ok {
		t.Fatal("no lb service")
	}
	var conf string
	for _, m := range mounts(t, "lb", lb) {
		if m.target == "/etc/nginx/nginx.conf" {
			conf = m.source
		}
	}
	if conf == "" {
		t.Fatal("lb: no nginx.conf mounted at /etc/nginx/nginx.conf")
	}
	b, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	var body []string
	for _, line := range strings.Split(string(b), "\n") {
		line, _, _ = strings.Cut(line, "#")
		body = append(body, strings.TrimSpace(line))
	}
	nginx := strings.Join(body, "\n")
	for _, affinity := range []string{"ip_hash", "hash ", "sticky", "least_conn"} {
		if strings.Contains(nginx, affinity) {
			t.Errorf("%s: %q: want plain round robin, no session affinity", conf, affinity)
		}
	}
	upstreams := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^server\s+([^\s;]+);`).FindAllStringSubmatch(nginx, -1) {
		upstreams[m[1]] = true
	}
	var volume string
	proxies := 0
	for name, s := range c.Services {
		if len(s.Command) == 0 || s.Command[0] != "proxy" {
			continue
		}
		proxies++
		args := strings.Join(s.Command, " ")
		listen := regexp.MustCompile(`--listen \S+:(\d+)`).FindStringSubmatch(args)
		if listen == nil || !upstreams[name+":"+listen[1]] {
			t.Errorf("proxy %s (%v) is not an upstream of the load balancer %v", name, listen, upstreams)
		}
		data := regexp.MustCompile(`--data (\S+)`).FindStringSubmatch(args)
		if data == nil {
			t.Errorf("proxy %s: no --data: its identity key would be random", name)
			continue
		}
		shared := ""
		for _, m := range mounts(t, name, s) {
			if m.target == data[1] && !m.bind {
				shared = m.source
			}
		}
		if shared == "" || volume != "" && shared != volume {
			t.Errorf("proxy %s: --data %s is not on the volume the other proxies share (%q, %q)", name, data[1], shared, volume)
		}
		volume = shared
		if len(s.Ports) > 0 {
			t.Errorf("proxy %s publishes %v: the agents' endpoint is the load balancer", name, s.Ports)
		}
	}
	if proxies < 2 || len(upstreams) != proxies {
		t.Errorf("%d proxies, %d upstreams: want two or more proxies, each an upstream", proxies, len(upstreams))
	}
	if !slices.Contains(lb.Ports, "127.0.0.1:8788:8788") {
		t.Errorf("lb ports %v: want the agents' endpoint 127.0.0.1:8788", lb.Ports)
	}
}
