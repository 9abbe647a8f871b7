package inspector

import (
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"
)

// strategyColour is each strategy's line colour on the economics charts.
var strategyColour = map[string]string{
	"none":      "#7a7a7a",
	"immediate": "#d9534f",
	"scheduled": "#2a7ab8",
	"hindsight": "#3c9d5d",
}

// series is one line or one set of bars.
type series struct {
	Name   string
	Colour string
	Values []float64
}

// roundUp rounds v up to 1, 2, 2.5 or 5 times a power of ten, so axis
// labels are short.
func roundUp(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// usd formats a dollar amount with four significant figures at most.
func usd(v float64) string {
	if v == 0 {
		return "$0"
	}
	sign := ""
	if v < 0 {
		sign, v = "-", -v
	}
	switch {
	case v >= 100:
		return fmt.Sprintf("%s$%.0f", sign, v)
	case v >= 1:
		return fmt.Sprintf("%s$%.2f", sign, v)
	case v >= 0.01:
		return fmt.Sprintf("%s$%.3f", sign, v)
	}
	return fmt.Sprintf("%s$%.5f", sign, v)
}

// lineChart draws series over a shared x axis (0..n-1) as an SVG: the
// economics chart, cost per request under each strategy.
func lineChart(ss []series, xlabel, ylabel string) template.HTML {
	const w, h, left, right, top, bottom = 1160, 240, 64, 16, 14, 40
	n := 0
	ymax := 0.0
	for _, s := range ss {
		n = max(n, len(s.Values))
		for _, v := range s.Values {
			ymax = max(ymax, v)
		}
	}
	ymax = roundUp(ymax)
	pw, ph := float64(w-left-right), float64(h-top-bottom)
	x := func(i int) float64 {
		if n <= 1 {
			return float64(left) + pw/2
		}
		return float64(left) + pw*float64(i)/float64(n-1)
	}
	y := func(v float64) float64 { return float64(top) + ph*(1-v/ymax) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s by %s">`, w, h, w, h, template.HTMLEscapeString(ylabel), template.HTMLEscapeString(xlabel))
	for i := 0; i <= 4; i++ {
		v := ymax * float64(i) / 4
		fmt.Fprintf(&b, `<line class="grid" x1="%d" y1="%.1f" x2="%d" y2="%.1f"/>`, left, y(v), w-right, y(v))
		fmt.Fprintf(&b, `<text class="tick" x="%d" y="%.1f" text-anchor="end">%s</text>`, left-6, y(v)+4, usd(v))
	}
	fmt.Fprintf(&b, `<text class="axis" x="%.1f" y="%d" text-anchor="middle">%s</text>`, float64(left)+pw/2, h-6, template.HTMLEscapeString(xlabel))
	if n > 0 {
		fmt.Fprintf(&b, `<text class="tick" x="%.1f" y="%d" text-anchor="middle">0</text>`, x(0), h-bottom+16)
		fmt.Fprintf(&b, `<text class="tick" x="%.1f" y="%d" text-anchor="middle">%d</text>`, x(n-1), h-bottom+16, n-1)
	}
	for _, s := range ss {
		fmt.Fprintf(&b, `<polyline class="series" data-strategy="%s" fill="none" stroke="%s" stroke-width="1.6" points="`, s.Name, s.Colour)
		for i, v := range s.Values {
			if i > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%.1f,%.1f", x(i), y(v))
		}
		b.WriteString(`"/>`)
	}
	fmt.Fprintf(&b, `<line id="cursor" class="cursor" x1="%.1f" y1="%d" x2="%.1f" y2="%d" data-left="%d" data-width="%.1f" data-n="%d"/>`, x(max(n-1, 0)), top, x(max(n-1, 0)), h-bottom, left, pw, n)
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// barChart draws grouped bars: one group per label, one bar per series.
func barChart(labels []string, ss []series, money bool) template.HTML {
	const w, h, left, right, top, bottom = 1160, 220, 64, 16, 14, 44
	ymax := 0.0
	for _, s := range ss {
		for _, v := range s.Values {
			ymax = max(ymax, v)
		}
	}
	ymax = roundUp(ymax)
	pw, ph := float64(w-left-right), float64(h-top-bottom)
	n := max(len(labels), 1)
	gw := pw / float64(n)
	bw := gw * 0.8 / float64(max(len(ss), 1))
	y := func(v float64) float64 { return float64(top) + ph*(1-v/ymax) }
	label := func(v float64) string {
		if money {
			return usd(v)
		}
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %d %d" width="%d" height="%d" role="img">`, w, h, w, h)
	for i := 0; i <= 4; i++ {
		v := ymax * float64(i) / 4
		fmt.Fprintf(&b, `<line class="grid" x1="%d" y1="%.1f" x2="%d" y2="%.1f"/>`, left, y(v), w-right, y(v))
		fmt.Fprintf(&b, `<text class="tick" x="%d" y="%.1f" text-anchor="end">%s</text>`, left-6, y(v)+4, label(v))
	}
	for g, l := range labels {
		gx := float64(left) + gw*float64(g) + gw*0.1
		for k, s := range ss {
			v := 0.0
			if g < len(s.Values) {
				v = s.Values[g]
			}
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %s</title></rect>`,
				gx+bw*float64(k), y(v), max(bw-1, 1), float64(top)+ph-y(v), s.Colour, template.HTMLEscapeString(l), s.Name, label(v))
		}
		if len(labels) <= 40 || g%(len(labels)/20+1) == 0 {
			fmt.Fprintf(&b, `<text class="tick" x="%.1f" y="%d" text-anchor="middle">%s</text>`, float64(left)+gw*(float64(g)+0.5), h-bottom+16, template.HTMLEscapeString(l))
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}
