package lab

import (
	"fmt"
	"io"
	"strings"

	"github.com/prunesched/prunesched/internal/chart"
)

// Point is one labelled point of a scatter chart (WritePointsSVG).
type Point struct {
	Label string
	// Kind picks the colour, as the lab's charts colour row kinds
	// ("condition", "opt-in", "opt-out", "peer").
	Kind string
	X, Y float64
	// Alt, when HasAlt, is a second X for the same row and Y, drawn as a
	// ring joined to the point by a dashed line (analyze --compare: the
	// cost saved with recoveries beside the tokens saved).
	Alt    float64
	HasAlt bool
}

// WritePointsSVG draws labelled points on two axes that start at zero,
// with a legend of the kinds present: the chart analyze --compare draws
// for real traces (tokens saved against later-used items), in the same
// style as the lab's saved-vs-false-prunes chart. note is printed under
// the plot; altLegend, when set, names the rings of the points' Alt in
// the legend (one line of text per line of altLegend). Deterministic.
func WritePointsSVG(w io.Writer, title, xlabel, ylabel, note, altLegend string, pts []Point) error {
	s := newSVG(760, 520, title)
	xmax, ymax := 1.0, 1.0
	for _, p := range pts {
		xmax, ymax = max(xmax, p.X), max(ymax, p.Y)
		if p.HasAlt {
			xmax = max(xmax, p.Alt)
		}
	}
	xmax, ymax = chart.NiceCeil(xmax*1.05), chart.NiceCeil(ymax*1.1)
	fx, fy := s.axes(90, 50, 560, 380, xmax, ymax, xlabel, ylabel, true)
	var kinds []string
	seen := map[string]bool{}
	labels := make([]labelPoint, 0, len(pts))
	for _, p := range pts {
		x, y := fx(p.X), fy(p.Y)
		if p.HasAlt {
			s.line(x, y, fx(p.Alt), y, colourOf(p.Kind), true)
			s.ring(fx(p.Alt), y, 5, colourOf(p.Kind))
		}
		s.circle(x, y, 6, colourOf(p.Kind))
		labels = append(labels, labelPoint{x, y, rowLabel(p.Label)})
		if !seen[p.Kind] {
			seen[p.Kind] = true
			kinds = append(kinds, p.Kind)
		}
	}
	s.placeLabels(labels, box{92, 50, 650, 428})
	lx := 670.0
	for k, kind := range kinds {
		y := 70 + float64(k)*20
		s.circle(lx, y-4, 5, colourOf(kind))
		s.text(lx+10, y, "start", 11, "normal", kind)
	}
	if altLegend != "" {
		y := 70 + float64(len(kinds))*20 + 10
		s.ring(lx, y-4, 5, "#333")
		for i, l := range strings.Split(altLegend, "\n") {
			s.text(lx+10, y+float64(i)*14, "start", 11, "normal", l)
		}
	}
	s.text(380, 505, "middle", 11, "normal", note)
	return s.write(w)
}

func colourOf(kind string) string {
	if c, ok := kindColour[kind]; ok {
		return c
	}
	return fmt.Sprintf("#%06x", 0x7f7f7f)
}
