package main

import (
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// sizeValue is a flag of a byte size: a number of bytes, or a number with
// a unit: B, KiB, MiB, GiB, TiB (powers of 1024) or KB, MB, GB, TB (powers
// of 1000), e.g. 512MiB or 1.5GiB. It must not be negative.
type sizeValue int64

// sizeUnits are the units sizeValue takes, longest first so "MiB" is not
// read as "B".
var sizeUnits = []struct {
	name string
	mult float64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1},
}

// parseSize parses a byte size (see sizeValue).
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	num, mult := t, 1.0
	for _, u := range sizeUnits {
		if rest, ok := strings.CutSuffix(t, u.name); ok {
			num, mult = strings.TrimSpace(rest), u.mult
			break
		}
	}
	if n, err := strconv.ParseInt(num, 10, 64); err == nil && mult == 1 {
		if n < 0 {
			return 0, fmt.Errorf("%q: a size cannot be negative", s)
		}
		return n, nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || mult == 1 || num == "" || strings.ContainsAny(num, "eEnNxX") {
		return 0, fmt.Errorf("%q: want a size in bytes, or with a unit: 512MiB, 1.5GiB, 800MB (units B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)", s)
	}
	if f < 0 {
		return 0, fmt.Errorf("%q: a size cannot be negative", s)
	}
	v := f * mult
	if v >= 1<<63 {
		return 0, fmt.Errorf("%q: too large", s)
	}
	return int64(v), nil
}

// String renders the size in bytes.
func (v *sizeValue) String() string { return strconv.FormatInt(int64(*v), 10) }

// Set parses a size (pflag names the flag in its error).
func (v *sizeValue) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	*v = sizeValue(n)
	return nil
}

// Type names the value in --help.
func (v *sizeValue) Type() string { return "size" }

// sizeFlag defines a size flag on fs.
func sizeFlag(fs *pflag.FlagSet, name string, def int64, usage string) *int64 {
	v := new(int64)
	*v = def
	fs.Var((*sizeValue)(v), name, usage)
	return v
}

// memoryLimitUsage is the help of --memory-limit (serve, proxy).
const memoryLimitUsage = "soft memory limit of the Go runtime, in bytes or with a unit (512MiB, 1GiB): past it the garbage collector runs more often; it refuses nothing (default: 2 x --max-inflight-body + the projection's budget (128 MiB; serve: --projection-bytes) + 128 MiB, 768 MiB with the defaults; 0: none; $GOMEMLIMIT, when set, wins)"

// applyMemoryLimit sets the runtime's soft memory limit to limit bytes
// unless $GOMEMLIMIT is set (the runtime applied it at start) or limit is
// 0, and logs the limit in force.
func applyMemoryLimit(e *env, logger *slog.Logger, limit int64) {
	if env := e.getenv("GOMEMLIMIT"); env != "" {
		logger.Info("memory limit from $GOMEMLIMIT", "GOMEMLIMIT", env, "bytes", debug.SetMemoryLimit(-1))
		return
	}
	if limit > 0 {
		debug.SetMemoryLimit(limit)
		logger.Info("memory limit", "bytes", limit)
	}
}
