package chart

import "testing"

func TestNiceCeil(t *testing.T) {
	for _, tc := range []struct{ in, want float64 }{
		{-3, 1}, {0, 1}, {0.3, 0.5}, {1, 1}, {1.01, 2}, {2, 2}, {3, 5}, {7, 10}, {10, 10}, {11, 20}, {4321, 5000}, {99999, 100000},
	} {
		if got := NiceCeil(tc.in); got != tc.want {
			t.Errorf("NiceCeil(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
