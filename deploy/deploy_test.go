package deploy_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/prunesched/prunesched/proxy"
)

// composeFile is the part of deploy/compose.yaml the tests read.
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image      string   `yaml:"image"`
	Entrypoint []string `yaml:"entrypoint"`
	Command    []string `yaml:"command"`
	Volumes    []any    `yaml:"volumes"`
	Ports      []string `yaml:"ports"`
	DependsOn  []string `yaml:"depends_on"`
	Build      *struct {
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
	for name, n := range nodes {
		s := c.Services[name]
		if i := slices.Index(s.Command, "--cluster"); i < 0 || !strings.HasSuffix(s.Command[i+1], ":"+n.cluster) {
			t.Errorf("service %s: --cluster must listen on its config's cluster port %s: %q", name, n.cluster, s.Command)
		}
		i := slices.Index(s.Command, "--routes")
		if i < 0 {
			t.Errorf("service %s: no --routes", name)
			continue
		}
		got := strings.Split(s.Command[i+1], ",")
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
		for _, u := range strings.Split(vals["nats"], ",") {
			host, port, _ := strings.Cut(strings.TrimPrefix(u, "nats://"), ":")
			if n, ok := nodes[host]; !ok || n.client != port {
				t.Errorf("service %s: NATS URL %q is not a node's client address", name, u)
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

	b, err := os.ReadFile("prometheus/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	var prom struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(b, &prom); err != nil {
		t.Fatalf("prometheus.yml: %v", err)
	}
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
	for _, alert := range []string{"PruneschedProxyFailingOpen", "PruneschedProxyAddedLatencyHigh"} {
		if !strings.Contains(string(rules), "alert: "+alert) {
			t.Errorf("rules.yml has no alert %s", alert)
		}
	}
}
