// Package chart holds what the module's SVG charts share (the lab's
// figures, the RSS bench's plot): axis scaling. It draws nothing itself and
// knows no data.
package chart

import "math"

// NiceCeil rounds v up to 1, 2 or 5 times a power of ten, the top of an
// axis; v <= 0 gives 1.
func NiceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}
