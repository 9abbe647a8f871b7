package lab

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
)

// Chart colours, by row kind and by strategy.
var (
	kindColour     = map[string]string{"condition": "#1f77b4", "opt-in": "#2ca02c", "opt-out": "#9467bd", "peer": "#d62728"}
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

func (s *svgDoc) write(w io.Writer) error {
	s.b.WriteString("</svg>\n")
	_, err := io.WriteString(w, s.b.String())
	return err
}

// niceMax rounds v up to 1, 2 or 5 times a power of ten.
func niceMax(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
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

// WriteSavedVsFalseSVG plots, per row, the net tokens removed (percent of
// raw) against the false prunes.
func WriteSavedVsFalseSVG(w io.Writer, r *Results) error {
	s := newSVG(760, 520, "Tokens saved against false prunes (each row under its own timing)")
	xmax, ymax := 1.0, 1.0
	for _, c := range r.Conditions {
		xmax = math.Max(xmax, c.Reduction.NetPercentOfRaw)
		ymax = math.Max(ymax, float64(c.Preservation.FalsePrunes))
	}
	xmax, ymax = niceMax(xmax*1.05), niceMax(ymax*1.1)
	fx, fy := s.axes(90, 50, 560, 380, xmax, ymax, "net tokens removed from the final bundle (% of raw tokens)", "false prunes (needed or trap items removed)", true)
	for i, c := range r.Conditions {
		x, y := fx(c.Reduction.NetPercentOfRaw), fy(float64(c.Preservation.FalsePrunes))
		s.circle(x, y, 6, kindColour[c.Kind])
		dy := -9.0
		if i%2 == 1 {
			dy = 17
		}
		s.text(x+8, y+dy, "start", 12, "bold", c.Name)
	}
	lx := 670.0
	for k, kind := range []string{"condition", "opt-in", "opt-out", "peer"} {
		y := 70 + float64(k)*20
		s.circle(lx, y-4, 5, kindColour[kind])
		s.text(lx+10, y, "start", 11, "normal", kind)
	}
	s.text(380, 505, "middle", 11, "normal", fmt.Sprintf("seed %d, %d sessions, %d probes; behaviour = evidence presence, not model success", r.Seed, r.Fixture.Sessions, r.Fixture.Probes))
	return s.write(w)
}

// WriteCostSVG draws, per provider, the prompt cost of every row under each
// strategy it ran, with A's cost as a dashed reference line.
func WriteCostSVG(w io.Writer, r *Results) error {
	n := len(r.Conditions)
	width := 120 + n*90
	s := newSVG(width, 760, "Prompt cost per row and strategy (USD, production cache model)")
	for pi, prov := range providers {
		top := 60 + float64(pi)*340
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
		ymax = niceMax(ymax * 1.1)
		pw := float64(n * 90)
		_, fy := s.axes(80, top, pw, 240, 1, ymax, "", prov+" cost (USD)", false)
		s.text(80+pw/2, top-8, "middle", 13, "bold", prov)
		for i, c := range r.Conditions {
			gx := 80 + float64(i)*90 + 12
			runs := []EconRun{}
			for _, e := range c.Economics.Runs {
				if e.Provider == prov {
					runs = append(runs, e)
				}
			}
			bw := 66.0 / float64(max(1, len(runs)))
			for k, e := range runs {
				x := gx + float64(k)*bw
				s.rect(x, fy(e.Cost), bw-2, fy(0)-fy(e.Cost), strategyColour[e.Strategy])
			}
			s.text(gx+33, top+258, "middle", 11, "bold", c.Name)
		}
		s.line(80, fy(base), 80+pw, fy(base), "#000", true)
		s.text(80+pw+4, fy(base)+4, "start", 10, "normal", "A")
	}
	lx := 90.0
	for k, st := range []string{StrategyNone, StrategyImmediate, StrategyScheduled} {
		x := lx + float64(k)*130
		s.rect(x, 730, 12, 12, strategyColour[st])
		s.text(x+18, 741, "start", 11, "normal", st)
	}
	return s.write(w)
}
