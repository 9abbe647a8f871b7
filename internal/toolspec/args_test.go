package toolspec

import (
	"fmt"
	"testing"
)

// TestReadRangeString pins Range.String to the fmt formats it replaced.
func TestReadRangeString(t *testing.T) {
	for _, off := range []int{0, 1, 7, 99, 100, 12345, -3} {
		for _, lim := range []int{0, 1, 50, 1000} {
			cases := map[Range]string{
				{Off: off, Lim: lim, Full: true}:   "1-EOF",
				{Off: off, Lim: lim, Tail: true}:   fmt.Sprintf("last %d", lim),
				{Off: off, Lim: lim, Window: true}: fmt.Sprintf("window at %d", off),
			}
			if lim == 0 {
				cases[Range{Off: off}] = fmt.Sprintf("%d-EOF", off)
			} else {
				cases[Range{Off: off, Lim: lim}] = fmt.Sprintf("%d-%d", off, off+lim-1)
			}
			for r, want := range cases {
				if got := r.String(); got != want {
					t.Errorf("%+v: got %q want %q", r, got, want)
				}
			}
		}
	}
}

// TestCleanPath: a path is cleaned, loses its file:// scheme and is made
// relative to cwd only when it lies under it (cwd itself and a sibling
// sharing cwd's name as a prefix stay as they are).
func TestCleanPath(t *testing.T) {
	want := map[[2]string]string{ // {path, cwd} -> cleaned
		{"", "/repo"}:                  "",
		{"/repo/a/../b.go", "/repo"}:   "b.go",
		{"file:///repo/x.go", "/repo"}: "x.go",
		{"/repo", "/repo"}:             "/repo",
		{"/repo/", "/repo"}:            "/repo",
		{"/repository/x.go", "/repo"}:  "/repository/x.go",
		{"/other/x.go", "/repo"}:       "/other/x.go",
		{"/repo/x.go", ""}:             "/repo/x.go",
		{"rel/./x.go", "/repo"}:        "rel/x.go",
		{"/x.go", "/"}:                 "/x.go",
	}
	for in, w := range want {
		if got := CleanPath(in[0], in[1]); got != w {
			t.Errorf("CleanPath(%q, %q) = %q, want %q", in[0], in[1], got, w)
		}
	}
}
