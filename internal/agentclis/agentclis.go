// Package agentclis finds the real agent CLIs (Claude Code, Codex,
// OpenCode) that .ci/setup-clis.sh installs for the end-to-end tests, and
// gives them a throwaway home, so every such test skips and isolates them
// the same way.
package agentclis

import (
	"os"
	"path/filepath"
	"testing"
)

// Binary returns the path of CLI bin installed under sub in
// $PRUNESCHED_CLI_DIR (default $HOME/.cache/prunesched-clis), or skips the
// test, saying how to install it.
func Binary(t testing.TB, sub, bin string) string {
	t.Helper()
	dir := os.Getenv("PRUNESCHED_CLI_DIR")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache", "prunesched-clis")
	}
	p := filepath.Join(dir, sub, "node_modules", ".bin", bin)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("%s not installed at %s: run .ci/setup-clis.sh (or set PRUNESCHED_CLI_DIR)", bin, p)
	}
	return p
}

// HomeEnv is the environment of a CLI run in the throwaway home: HOME,
// PATH and the XDG directories under home, so nothing of the machine's
// user is read or written.
func HomeEnv(home string) []string {
	return []string{
		"HOME=" + home, "PATH=" + os.Getenv("PATH"),
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "XDG_DATA_HOME=" + filepath.Join(home, ".local/share"),
		"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"), "XDG_STATE_HOME=" + filepath.Join(home, ".local/state"),
	}
}
