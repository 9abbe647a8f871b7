package main

import (
	"bytes"
	"log/slog"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/prunesched/prunesched/httplimit"
	"github.com/prunesched/prunesched/internal/testutil"
	"github.com/prunesched/prunesched/pipeline"
	"github.com/spf13/pflag"
)

func TestParseSize(t *testing.T) {
	good := map[string]int64{
		"0": 0, "1234": 1234, "512MiB": 512 << 20, "768 MiB": 768 << 20, "1GiB": 1 << 30, "1.5GiB": 3 << 29,
		"800MB": 800e6, "64KiB": 64 << 10, "10B": 10, "2TB": 2e12,
	}
	for in, want := range good {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MiB", "-1", "-5MiB", "12XB", "1e9", "0x10", "NaN", "Inf", "1.5", "10 mib"} {
		if got, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) = %d, want an error", in, got)
		}
	}
}

// TestMemoryLimitFlag: serve and proxy take --memory-limit as a size; a
// bad one is a usage error naming the flag.
func TestMemoryLimitFlag(t *testing.T) {
	for _, cmd := range [][]string{{"serve"}, {"proxy", "--upstream", "http://127.0.0.1:1"}} {
		args := append(append([]string{}, cmd...), "--data", t.TempDir(), "--memory-limit", "512MiB", "--check")
		if code, out, errOut := runT(t, args...); code != 0 || !strings.Contains(out, "configuration ok") {
			t.Errorf("%s --memory-limit 512MiB --check: exit %d %s %s", cmd[0], code, out, errOut)
		}
		args = append(append([]string{}, cmd...), "--memory-limit", "12XB", "--check")
		if code, _, errOut := runT(t, args...); code != 2 || !strings.Contains(errOut, "--memory-limit") || !strings.Contains(errOut, "512MiB") {
			t.Errorf("%s --memory-limit 12XB: exit %d, stderr %q; want 2 naming the flag and the form", cmd[0], code, errOut)
		}
	}
}

// TestApplyMemoryLimit: --memory-limit sets the runtime's soft limit (what
// serve and proxy call with the flag's value), $GOMEMLIMIT wins over it
// (the runtime read it at start: the limit in force is left alone), and 0
// sets none; the limit in force is logged.
func TestApplyMemoryLimit(t *testing.T) {
	orig := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(orig)
	const start = 900 << 20
	for _, tc := range []struct {
		name, gomemlimit string
		flag, want       int64
		log              string
	}{
		{"flag", "", 300 << 20, 300 << 20, "bytes=314572800"},
		{"GOMEMLIMIT wins", "1GiB", 300 << 20, start, "memory limit from $GOMEMLIMIT"},
		{"0: none set", "", 0, start, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetMemoryLimit(start)
			var logs bytes.Buffer
			e := &env{getenv: func(k string) string {
				if k == "GOMEMLIMIT" {
					return tc.gomemlimit
				}
				return ""
			}}
			applyMemoryLimit(e, slog.New(slog.NewTextHandler(&logs, nil)), tc.flag)
			if got := debug.SetMemoryLimit(-1); got != tc.want {
				t.Errorf("limit in force %d, want %d", got, tc.want)
			}
			if !strings.Contains(logs.String(), tc.log) || tc.log == "" && logs.Len() > 0 {
				t.Errorf("log %q, want %q", logs.String(), tc.log)
			}
		})
	}
}

// TestMemoryLimitOf: without --memory-limit the soft limit follows the
// budgets (two copies of the bodies in flight, the projection's budget and
// the base), 768 MiB with the defaults; a given flag wins, 0 included.
func TestMemoryLimitOf(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		inflight int64
		want     int64
	}{
		{"defaults", nil, httplimit.DefaultInflightBodyBytes, 768 << 20},
		{"smaller body budget", nil, 64 << 20, 2*(64<<20) + pipeline.DefaultProjectionBytes + memoryLimitBase},
		{"flag wins", []string{"--memory-limit", "1GiB"}, 64 << 20, 1 << 30},
		{"flag 0: none", []string{"--memory-limit", "0"}, 64 << 20, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
			v := sizeFlag(fs, "memory-limit", 0, memoryLimitUsage)
			testutil.NoError(t, fs.Parse(tc.args))
			testutil.Equal(t, memoryLimitOf(fs, *v, tc.inflight, pipeline.DefaultProjectionBytes), tc.want)
		})
	}
}
