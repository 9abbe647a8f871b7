package rss

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/prunesched/prunesched/internal/chart"
)

// WriteCSV writes the samples as CSV (seconds, rss_bytes, events, renders).
func WriteCSV(w io.Writer, r Result) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"seconds", "rss_bytes", "events", "renders"})
	for _, s := range r.Samples {
		_ = cw.Write([]string{strconv.FormatFloat(s.Seconds, 'f', 1, 64), strconv.FormatInt(s.RSS, 10),
			strconv.FormatInt(s.Events, 10), strconv.FormatInt(s.Renders, 10)})
	}
	cw.Flush()
	return cw.Error()
}

// Series is one line of a chart.
type Series struct {
	Label string
	Color string
	X, Y  []float64
}

// Chart is a line chart.
type Chart struct {
	Title, XLabel, YLabel string
	Series                []Series
	// Limit draws a dashed horizontal line at this Y (0: none).
	Limit      float64
	LimitLabel string
}

// WriteSVG renders c as a self-contained SVG.
func WriteSVG(w io.Writer, c Chart) error {
	const (
		width, height          = 760, 420
		left, right, top, bott = 70, 20, 40, 50
	)
	var maxX, maxY float64
	for _, s := range c.Series {
		for i := range s.X {
			maxX = math.Max(maxX, s.X[i])
			maxY = math.Max(maxY, s.Y[i])
		}
	}
	maxY = math.Max(maxY, c.Limit)
	maxX, maxY = chart.NiceCeil(maxX), chart.NiceCeil(maxY*1.05)
	pw, ph := float64(width-left-right), float64(height-top-bott)
	px := func(x float64) float64 { return left + x/maxX*pw }
	py := func(y float64) float64 { return top + ph - y/maxY*ph }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", left, esc(c.Title))
	for i := 0; i <= 5; i++ {
		y := maxY * float64(i) / 5
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, width-right, py(y), py(y))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, py(y)+4, fmtNum(y))
		x := maxX * float64(i) / 5
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", px(x), height-bott+18, fmtNum(x))
	}
	fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="black"/>`+"\n", left, width-right, top+int(ph), top+int(ph))
	fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="black"/>`+"\n", left, left, top, top+int(ph))
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", left+pw/2, height-10, esc(c.XLabel))
	fmt.Fprintf(&b, `<text x="16" y="%.1f" text-anchor="middle" transform="rotate(-90 16 %.1f)">%s</text>`+"\n", top+ph/2, top+ph/2, esc(c.YLabel))
	if c.Limit > 0 {
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#c00" stroke-dasharray="6 4"/>`+"\n", left, width-right, py(c.Limit), py(c.Limit))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" fill="#c00">%s</text>`+"\n", width-right-4, py(c.Limit)-5, esc(c.LimitLabel))
	}
	for i, s := range c.Series {
		var pts []string
		for j := range s.X {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(s.X[j]), py(s.Y[j])))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", s.Color, strings.Join(pts, " "))
		ly := top + 16 + 16*i
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="2"/>`+"\n", left+12, left+32, ly-4, ly-4, s.Color)
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", left+38, ly, esc(s.Label))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func fmtNum(v float64) string {
	switch {
	case v >= 1e6 && math.Mod(v, 1e5) == 0:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case v >= 1e3 && math.Mod(v, 100) == 0:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// MB converts bytes to megabytes (10^6) for charts.
func MB(b int64) float64 { return float64(b) / 1e6 }
