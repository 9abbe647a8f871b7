package lab

import (
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/prunesched/prunesched/internal/chart"
)

// Chart colours, by row kind and by strategy.
var (
	kindColour     = map[string]string{"condition": "#1f77b4", "opt-in": "#2ca02c", "opt-out": "#9467bd", "agent": "#ff7f0e", "peer": "#d62728"}
	strategyColour = map[string]string{StrategyNone: "#7f7f7f", StrategyImmediate: "#ff7f0e", StrategyScheduled: "#1f77b4"}
)

type svgDoc struct{ b strings.Builder }

func newSVG(w, h int, title string) *svgDoc {
	s := &svgDoc{}
	fmt.Fprintf(&s.b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n", w, h, w, h)
	fmt.Fprintf(&s.b, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", w, h)
	s.text(float64(w)/2, 22, "middle", 15, "bold", title)
	return s
}

func (s *svgDoc) text(x, y float64, anchor string, size int, weight, t string) {
	fmt.Fprintf(&s.b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" font-size=\"%d\" font-weight=\"%s\">%s</text>\n", x, y, anchor, size, weight, html.EscapeString(t))
}

func (s *svgDoc) line(x1, y1, x2, y2 float64, colour string, dash bool) {
	d := ""
	if dash {
		d = " stroke-dasharray=\"4 3\""
	}
	fmt.Fprintf(&s.b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"%s/>\n", x1, y1, x2, y2, colour, d)
}

func (s *svgDoc) rect(x, y, w, h float64, colour string) {
	fmt.Fprintf(&s.b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n", x, y, w, h, colour)
}

func (s *svgDoc) circle(x, y, r float64, colour string) {
	fmt.Fprintf(&s.b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" fill=\"%s\" fill-opacity=\"0.85\"/>\n", x, y, r, colour)
}

// ring draws an unfilled circle: the mark of the shipped default.
func (s *svgDoc) ring(x, y, r float64, colour string) {
	fmt.Fprintf(&s.b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" fill=\"none\" stroke=\"%s\" stroke-width=\"2.5\"/>\n", x, y, r, colour)
}

// outline draws an unfilled rectangle.
func (s *svgDoc) outline(x, y, w, h float64, colour string, width float64) {
	fmt.Fprintf(&s.b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"%s\" stroke-width=\"%.1f\"/>\n", x, y, w, h, colour, width)
}

// fadedRect draws a rectangle at reduced opacity.
func (s *svgDoc) fadedRect(x, y, w, h float64, colour string, opacity float64) {
	fmt.Fprintf(&s.b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\" fill-opacity=\"%.2f\"/>\n", x, y, w, h, colour, opacity)
}

func (s *svgDoc) write(w io.Writer) error {
	s.b.WriteString("</svg>\n")
	_, err := io.WriteString(w, s.b.String())
	return err
}

// axes draws a plot frame with ticks; it returns the mapping functions.
func (s *svgDoc) axes(x0, y0, w, h, xmax, ymax float64, xlabel, ylabel string, xticks bool) (func(float64) float64, func(float64) float64) {
	fx := func(v float64) float64 { return x0 + v/xmax*w }
	fy := func(v float64) float64 { return y0 + h - v/ymax*h }
	s.line(x0, y0+h, x0+w, y0+h, "#333", false)
	s.line(x0, y0, x0, y0+h, "#333", false)
	for i := 0; i <= 5; i++ {
		v := ymax * float64(i) / 5
		s.line(x0, fy(v), x0+w, fy(v), "#e5e5e5", false)
		s.text(x0-6, fy(v)+4, "end", 11, "normal", trimFloat(v))
		if xticks {
			u := xmax * float64(i) / 5
			s.line(fx(u), y0+h, fx(u), y0+h+4, "#333", false)
			s.text(fx(u), y0+h+17, "middle", 11, "normal", trimFloat(u))
		}
	}
	s.text(x0+w/2, y0+h+36, "middle", 12, "normal", xlabel)
	fmt.Fprintf(&s.b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" transform=\"rotate(-90 %.1f %.1f)\">%s</text>\n", x0-44, y0+h/2, x0-44, y0+h/2, html.EscapeString(ylabel))
	return fx, fy
}

func trimFloat(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// defaultRow is the row of the shipped default policy, highlighted in
// every chart.
const defaultRow = CondD

// Highlight colours of the shipped default.
const (
	defaultFill   = "#fff3b0"
	defaultStroke = "#b8860b"
)

// rowLabel is a row's name as charts print it: the shipped default says
// so.
func rowLabel(name string) string {
	if name == defaultRow {
		return name + " (shipped default)"
	}
	return name
}

// box is a rectangle occupied on a chart, for label placement.
type box struct{ x0, y0, x1, y1 float64 }

func (b box) overlaps(o box) bool {
	return b.x0 < o.x1 && o.x0 < b.x1 && b.y0 < o.y1 && o.y0 < b.y1
}

func (b box) inside(o box) bool {
	return b.x0 >= o.x0 && b.x1 <= o.x1 && b.y0 >= o.y0 && b.y1 <= o.y1
}

// textWidth estimates the width of t in the chart's sans-serif font.
func textWidth(t string, size int, bold bool) float64 {
	f := 0.58
	if bold {
		f = 0.64
	}
	return float64(len(t)) * float64(size) * f
}

// labelPoint is a point to label on a scatter plot.
type labelPoint struct {
	x, y float64
	text string
}

// placeLabels puts each point's label next to it without overlapping the
// other labels and points, trying positions at growing distance (right,
// then left) and drawing a leader line when the label sits away from its
// point. Points are placed in order, so the result is deterministic.
func (s *svgDoc) placeLabels(pts []labelPoint, area box) {
	var taken []box
	for _, p := range pts {
		taken = append(taken, box{p.x - 7, p.y - 7, p.x + 7, p.y + 7})
	}
	for _, p := range pts {
		w := textWidth(p.text, 12, true)
		placed := false
		for k := 0; k < 16 && !placed; k++ {
			// dy: -9, +17, -25, +33, ... alternately above and below.
			dy := -9 - 16*float64(k/2)
			if k%2 == 1 {
				dy = 17 + 16*float64(k/2)
			}
			for _, left := range []bool{false, true} {
				tx := p.x + 8
				if left {
					tx = p.x - 8 - w
				}
				b := box{tx, p.y + dy - 11, tx + w, p.y + dy + 3}
				if !b.inside(area) || slices.ContainsFunc(taken, b.overlaps) {
					continue
				}
				if k >= 2 {
					ly := p.y + dy - 4
					lx := tx
					if left {
						lx = tx + w
					}
					s.line(p.x, p.y, lx, ly, "#999", false)
				}
				s.text(tx, p.y+dy, "start", 12, "bold", p.text)
				taken = append(taken, b)
				placed = true
				break
			}
		}
		if !placed {
			s.text(p.x+8, p.y-9, "start", 12, "bold", p.text)
		}
	}
}

// rowLegend writes one line per row from y down: the row's marker, its
// name and what it is (its description). The shipped default's line is
// highlighted. It returns the y below the last line.
func (s *svgDoc) rowLegend(x, y, width float64, title string, rows []ConditionResult, marker func(c ConditionResult, x, y float64)) float64 {
	s.text(x, y, "start", 12, "bold", title)
	y += 18
	for _, c := range rows {
		if c.Name == defaultRow {
			s.rect(x-4, y-12, width, 16, defaultFill)
		}
		marker(c, x+5, y-4)
		s.text(x+16, y, "start", 11, "bold", c.Name)
		desc := c.Description
		if c.Kind == "peer" {
			desc = "peer, re-implemented from its documentation: " + desc
		}
		s.text(x+118, y, "start", 11, "normal", desc)
		y += 16
	}
	return y
}

// WriteSavedVsFalseSVG plots, per row, the net tokens removed (percent of
// raw) against the false prunes, with a legend line per row saying what
// it is; the shipped default is ringed and highlighted.
func WriteSavedVsFalseSVG(w io.Writer, r *Results) error {
	const width = 1000
	height := 560 + 18 + 16*len(r.Conditions) + 30
	s := newSVG(width, height, "Tokens saved against false prunes (each row under its own timing)")
	xmax, ymax := 1.0, 1.0
	for _, c := range r.Conditions {
		xmax = math.Max(xmax, c.Reduction.NetPercentOfRaw)
		ymax = math.Max(ymax, float64(c.Preservation.FalsePrunes))
	}
	xmax, ymax = chart.NiceCeil(xmax*1.05), chart.NiceCeil(ymax*1.1)
	const x0, y0, pw, ph = 90.0, 50.0, 700.0, 420.0
	fx, fy := s.axes(x0, y0, pw, ph, xmax, ymax, "net tokens removed from the final bundle (% of raw tokens)", "false prunes (needed or trap items removed)", true)
	s.text(x0+pw-4, y0+14, "end", 11, "normal", "better: right (more removed) and low (nothing needed removed)")
	var pts []labelPoint
	for _, c := range r.Conditions {
		x, y := fx(c.Reduction.NetPercentOfRaw), fy(float64(c.Preservation.FalsePrunes))
		if c.Name == defaultRow {
			s.ring(x, y, 11, defaultStroke)
		}
		s.circle(x, y, 6, kindColour[c.Kind])
		pts = append(pts, labelPoint{x, y, rowLabel(c.Name)})
	}
	s.placeLabels(pts, box{x0 + 2, y0, x0 + pw, y0 + ph - 2})
	lx := x0 + pw + 30
	s.text(lx, y0+10, "start", 12, "bold", "Kinds")
	kinds := []string{"condition", "opt-in", "opt-out", "agent", "peer"}
	for k, kind := range kinds {
		y := y0 + 30 + float64(k)*20
		s.circle(lx+5, y-4, 5, kindColour[kind])
		s.text(lx+16, y, "start", 11, "normal", kind)
	}
	ky := y0 + 30 + float64(len(kinds))*20
	s.ring(lx+5, ky-4, 9, defaultStroke)
	s.text(lx+20, ky, "start", 11, "normal", "shipped default")
	y := s.rowLegend(40, y0+ph+70, width-80, "Rows (marker: kind)", r.Conditions, func(c ConditionResult, x, y float64) {
		s.circle(x, y, 5, kindColour[c.Kind])
	})
	s.text(width/2, y+14, "middle", 11, "normal", fmt.Sprintf("seed %d, %d sessions, %d probes; behaviour = evidence presence, not model success", r.Seed, r.Fixture.Sessions, r.Fixture.Probes))
	return s.write(w)
}

// WriteCostSVG draws, per provider, the prompt cost of every row under each
// strategy it ran, with A's cost as a dashed reference line; the bar of the
// row's own timing is solid and outlined, the other strategy faded. Under
// the costs, in the same columns, the evidence each row kept (probe pass
// rate and critical items intact), so a cheap row that lost the evidence
// (masking) does not read as a win. The shipped default's column is
// highlighted and each row has a legend line.
func WriteCostSVG(w io.Writer, r *Results) error {
	n := len(r.Conditions)
	const colW, x0 = 90.0, 80.0
	width := int(x0) + 40 + n*int(colW)
	const panelH, evidH = 220.0, 150.0
	evidTop := 60 + float64(len(providers))*(panelH+90) + 20
	legendTop := evidTop + evidH + 148
	height := int(legendTop) + 18 + 16*n + 20
	s := newSVG(width, height, "Prompt cost per row and strategy (USD, production cache model), with the evidence each row kept")
	pw := float64(n) * colW
	colX := func(i int) float64 { return x0 + float64(i)*colW }
	highlight := func(top, h float64) {
		for i, c := range r.Conditions {
			if c.Name == defaultRow {
				s.rect(colX(i)+2, top, colW-4, h, defaultFill)
			}
		}
	}
	for pi, prov := range providers {
		top := 60 + float64(pi)*(panelH+90)
		ymax, base := 0.0, 0.0
		for _, c := range r.Conditions {
			for _, e := range c.Economics.Runs {
				if e.Provider == prov {
					ymax = math.Max(ymax, e.Cost)
					if c.Name == CondA {
						base = e.Cost
					}
				}
			}
		}
		ymax = chart.NiceCeil(ymax * 1.1)
		highlight(top, panelH)
		_, fy := s.axes(x0, top, pw, panelH, 1, ymax, "", prov+" cost (USD)", false)
		s.text(x0+pw/2, top-8, "middle", 13, "bold", prov)
		for i, c := range r.Conditions {
			gx := colX(i) + 12
			var runs []EconRun
			for _, e := range c.Economics.Runs {
				if e.Provider == prov {
					runs = append(runs, e)
				}
			}
			bw := 66.0 / float64(max(1, len(runs)))
			for k, e := range runs {
				x := gx + float64(k)*bw
				h := fy(0) - fy(e.Cost)
				if e.Strategy == c.Timing {
					s.rect(x, fy(e.Cost), bw-2, h, strategyColour[e.Strategy])
					s.outline(x, fy(e.Cost), bw-2, h, "#000", 1.5)
					if rc := c.Economics.Recovery[prov]; rc.Cost > 0 {
						y := fy(e.Cost + rc.Cost)
						s.rect(x-3, y-1.5, bw+4, 3, recoveryColour)
					}
				} else {
					s.fadedRect(x, fy(e.Cost), bw-2, h, strategyColour[e.Strategy], 0.35)
				}
			}
			s.text(gx+33, top+panelH+18, "middle", 11, "bold", c.Name)
			if c.Name == defaultRow {
				s.text(gx+33, top+panelH+32, "middle", 10, "bold", "shipped default")
			}
		}
		s.line(x0, fy(base), x0+pw, fy(base), "#000", true)
		s.text(x0+pw+4, fy(base)+4, "start", 10, "normal", "A")
	}

	// Evidence kept, in the same columns.
	top := evidTop
	highlight(top, evidH)
	_, fy := s.axes(x0, top, pw, evidH, 1, 100, "", "evidence kept (%)", false)
	s.text(x0+pw/2, top-16, "middle", 13, "bold", "evidence kept under the row's own timing: probes passed, answered with one recovery, critical items intact")
	for i, c := range r.Conditions {
		gx := colX(i) + 12
		probes := 100 * c.Behaviour.ProbePassRate
		answered := 100 * c.Behaviour.AnswerRateWithRecovery
		critical := 100.0
		if c.Preservation.CriticalItems > 0 {
			critical = 100 * float64(c.Preservation.CriticalIntact) / float64(c.Preservation.CriticalItems)
		}
		for k, v := range []float64{probes, answered, critical} {
			x := gx + float64(k)*22
			colour := evidenceColour[k]
			s.rect(x, fy(v), 20, fy(0)-fy(v), colour)
			s.text(x+10, fy(v)-3, "middle", 9, "normal", fmt.Sprintf("%.0f", v))
		}
		s.text(gx+33, top+evidH+18, "middle", 11, "bold", c.Name)
	}

	// Legends: strategies, evidence, rows.
	ly := top + evidH + 50
	lx := x0
	for k, st := range []string{StrategyNone, StrategyImmediate, StrategyScheduled} {
		x := lx + float64(k)*120
		s.rect(x, ly-10, 12, 12, strategyColour[st])
		s.text(x+18, ly, "start", 11, "normal", st)
	}
	s.outline(lx+360, ly-10, 12, 12, "#000", 1.5)
	s.text(lx+378, ly, "start", 11, "normal", "solid, outlined: the row's own timing; faded: the other strategy, for comparison")
	ly += 20
	s.rect(lx, ly-6, 14, 3, recoveryColour)
	s.text(lx+18, ly, "start", 11, "normal", "bar over the row's own timing: its cost with recoveries (each removed item a probe needs fetched back once with context_recover, priced by the cache model)")
	ly += 20
	for k, name := range []string{"probes passed (evidence still in context)", "probes answered with one recovery", "critical items (needed and trap) never pruned"} {
		x := lx + float64(k)*300
		s.rect(x, ly-10, 12, 12, evidenceColour[k])
		s.text(x+18, ly, "start", 11, "normal", name)
	}
	ly += 22
	s.text(lx, ly, "start", 11, "bold", "Read cost with evidence: a cheap row is a win only if its evidence bars stay near 100; a row that drops what the agent needs trades cost for failures.")
	s.rowLegend(40, legendTop, float64(width)-80, "Rows (marker: the row's own timing)", r.Conditions, func(c ConditionResult, x, y float64) {
		s.rect(x-5, y-5, 10, 10, strategyColour[c.Timing])
	})
	return s.write(w)
}

// evidenceColour: probes passed, answered with one recovery, critical
// items intact.
var evidenceColour = []string{"#2ca02c", "#17becf", "#98df8a"}

// recoveryColour marks a row's cost with recoveries.
const recoveryColour = "#e377c2"
