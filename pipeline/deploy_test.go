package pipeline

import (
	"encoding/json"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"
)

// registeredNames returns every series name the pipeline metrics expose:
// metric names, plus _bucket, _sum and _count for histograms.
func registeredNames(t *testing.T) map[string]bool {
	t.Helper()
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	// Observe one of everything so every family is gathered.
	m.setDeferred(1, 1)
	m.setLag("eligibility", "0", 1)
	m.conflict()
	m.ValidationError("api")
	m.decisions.WithLabelValues("KEEP", "", "X").Inc()
	m.radius.Observe(1)
	m.divergence.Observe(1)
	m.latency.WithLabelValues("eligibility").Observe(1)
	m.removed.Add(1)
	m.placeholder.Add(1)
	m.cacheCost.Add(1)
	m.savings.Add(1)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, f := range fams {
		out[f.GetName()] = true
		if f.GetType().String() == "HISTOGRAM" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				out[f.GetName()+s] = true
			}
		}
	}
	return out
}

// recordingRules reads deploy/prometheus/rules.yml and returns the recorded
// names and every expression.
func recordingRules(t *testing.T) (records map[string]bool, exprs []string) {
	t.Helper()
	b, err := os.ReadFile("../deploy/prometheus/rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct {
				Record string `yaml:"record"`
				Alert  string `yaml:"alert"`
				Expr   string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("rules.yml: %v", err)
	}
	records = map[string]bool{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				records[r.Record] = true
			}
			exprs = append(exprs, r.Expr)
		}
	}
	return records, exprs
}

var metricRef = regexp.MustCompile(`prunesched[_:][a-zA-Z0-9_:]+`)

// checkRefs fails for every prunesched metric an expression names that
// neither the registry nor a recording rule provides.
func checkRefs(t *testing.T, where string, exprs []string, names, records map[string]bool) int {
	t.Helper()
	n := 0
	for _, e := range exprs {
		for _, ref := range metricRef.FindAllString(e, -1) {
			n++
			if strings.HasPrefix(ref, "prunesched_proxy_") || strings.HasPrefix(ref, "prunesched:proxy_") && records[ref] {
				// The proxy's metrics (proxy/metrics.go; proxy imports
				// pipeline) are checked by deploy/deploy_test.go.
				continue
			}
			if strings.Contains(ref, ":") {
				if !records[ref] {
					t.Errorf("%s: %q is not a recording rule in rules.yml (in %s)", where, ref, e)
				}
				continue
			}
			if !names[ref] {
				t.Errorf("%s: metric %q is not registered by the pipeline (in %s)", where, ref, e)
			}
		}
	}
	return n
}

// TestDashboardQueriesExist parses the Grafana dashboard and checks that
// every metric it queries is one the pipeline registers (or a recording
// rule of deploy/prometheus), and the same for the rules themselves.
func TestDashboardQueriesExist(t *testing.T) {
	names := registeredNames(t)
	records, ruleExprs := recordingRules(t)
	if n := checkRefs(t, "rules.yml", ruleExprs, names, records); n == 0 {
		t.Fatal("rules.yml names no metric")
	}

	b, err := os.ReadFile("../deploy/grafana/prunesched.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("dashboard is not valid JSON: %v", err)
	}
	if dash.Title == "" || dash.UID == "" || len(dash.Panels) == 0 {
		t.Fatalf("dashboard without title, uid or panels")
	}
	var exprs []string
	used := map[string]bool{}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
			for _, ref := range metricRef.FindAllString(tg.Expr, -1) {
				used[strings.TrimSuffix(strings.TrimSuffix(ref, "_bucket"), "_count")] = true
			}
		}
	}
	checkRefs(t, "dashboard", exprs, names, records)
	// Every pipeline metric appears on the dashboard.
	var missing []string
	for n := range names {
		if strings.HasSuffix(n, "_bucket") || strings.HasSuffix(n, "_sum") || strings.HasSuffix(n, "_count") {
			continue
		}
		if !used[n] {
			missing = append(missing, n)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("metrics not on the dashboard: %v", missing)
	}
}
