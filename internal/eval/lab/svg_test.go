package lab

import (
	"bytes"
	"flag"
	"html"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prunesched/prunesched/scheduler"
)

var update = flag.Bool("update", false, "rewrite the chart golden files under testdata/")

// chartResults is a fixed set of rows with the lab's names, kinds,
// descriptions and timings, and round numbers: the charts' input without
// running the lab.
func chartResults() *Results {
	r := &Results{Seed: 7, Fixture: FixtureSummary{Sessions: 3, Probes: 40}}
	type row struct {
		net, cost     float64
		falsePrunes   int
		probes        float64
		criticalKept  int
		immediateCost float64
	}
	nums := map[string]row{
		CondA:       {0, 50, 0, 1, 40, 50},
		CondB:       {12, 44, 0, 1, 40, 44},
		CondC:       {13, 43, 0, 1, 40, 43},
		CondD:       {28, 38, 0, 1, 40, 48},
		CondL3:      {31, 37, 3, 0.95, 37, 47},
		CondNoSpan:  {27, 39, 0, 1, 40, 49},
		CondG:       {30, 37, 2, 0.97, 38, 46},
		CondE:       {40, 70, 30, 0.6, 22, 70},
		CondF:       {32, 55, 0, 1, 40, 55},
		PeerDCP:     {33, 60, 20, 0.7, 28, 60},
		PeerClear:   {70, 36, 40, 0.75, 16, 36},
		PeerMasking: {80, 50, 50, 0.25, 10, 50},
	}
	for _, c := range fixedConditions() {
		n := nums[c.name]
		cr := ConditionResult{Name: c.name, Kind: c.kind, Description: c.desc, Timing: c.primary}
		cr.Reduction.NetPercentOfRaw = n.net
		cr.Preservation.FalsePrunes = n.falsePrunes
		cr.Preservation.CriticalItems = 40
		cr.Preservation.CriticalIntact = n.criticalKept
		cr.Behaviour.ProbePassRate = n.probes
		cr.Behaviour.AnswerRateWithRecovery = n.probes
		if !c.foreignPlaceholder && n.probes < 1 {
			// Our placeholder names the item: every probe comes back with
			// one recovery, at a price.
			cr.Behaviour.AnswerRateWithRecovery = 1
			cr.Economics.Recovery = map[string]scheduler.RecoveryCost{}
			for i, prov := range providers {
				cr.Economics.Recovery[prov] = scheduler.RecoveryCost{Recoveries: 3, Cost: 4 / float64(i+1)}
			}
		}
		for i, prov := range providers {
			scale := 1 / float64(i+1)
			if c.primary == StrategyNone {
				cr.Economics.Runs = append(cr.Economics.Runs, EconRun{Provider: prov, Strategy: StrategyNone, Cost: n.cost * scale})
				continue
			}
			sched := n.cost
			if c.primary == StrategyImmediate {
				sched = n.cost * 0.6
			}
			cr.Economics.Runs = append(cr.Economics.Runs,
				EconRun{Provider: prov, Strategy: StrategyImmediate, Cost: n.immediateCost * scale},
				EconRun{Provider: prov, Strategy: StrategyScheduled, Cost: sched * scale})
		}
		r.Conditions = append(r.Conditions, cr)
	}
	return r
}

// TestChartsGolden compares both charts with testdata/*.golden.svg (go
// test ./lab -run TestChartsGolden -update rewrites them) and checks what
// makes them readable: a legend line per row naming what it is, the
// shipped default marked, the evidence panel next to cost.
func TestChartsGolden(t *testing.T) {
	r := chartResults()
	for _, tc := range []struct {
		file  string
		write func(*bytes.Buffer) error
		want  []string
	}{
		{"saved-vs-false-prunes.golden.svg", func(b *bytes.Buffer) error { return WriteSavedVsFalseSVG(b, r) },
			[]string{"D (shipped default)", "Rows (marker: kind)", "shipped default"}},
		{"cost.golden.svg", func(b *bytes.Buffer) error { return WriteCostSVG(b, r) },
			[]string{"evidence kept", "probes passed", "answered with one recovery", "its cost with recoveries", "critical items", "the row&#39;s own timing", "shipped default", "Read cost with evidence"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			var a, b bytes.Buffer
			if err := tc.write(&a); err != nil {
				t.Fatal(err)
			}
			if err := tc.write(&b); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a.Bytes(), b.Bytes()) {
				t.Fatal("same results, different SVG")
			}
			got := a.String()
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("chart lacks %q", w)
				}
			}
			// One legend line per row, with its description.
			for _, c := range r.Conditions {
				if !strings.Contains(got, html.EscapeString(c.Description)+"</text>") {
					t.Errorf("legend lacks row %s: %q", c.Name, c.Description)
				}
			}
			path := filepath.Join("testdata", tc.file)
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, a.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(a.Bytes(), want) {
				t.Errorf("%s differs from the golden file (run with -update after checking the chart)", path)
			}
		})
	}
}
