package importers

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// traceExts are the file name endings a directory walk considers: JSONL
// transcripts (Claude Code, Codex, native), JSON exports and trajectories
// (OpenCode, OpenHands, mini-swe-agent), SWE-agent .traj and Aider's
// Markdown history.
var traceExts = []string{".jsonl", ".json", ".traj", ".md"}

// Expand turns command-line paths into trace files. A file is kept as
// given (its format is detected or fails when imported). A directory is
// walked recursively, in lexical order, keeping the files whose name ends
// in .jsonl, .json, .traj or .md and whose first bytes a format is detected
// from (Detect), so a README or a settings file in the tree is passed over.
// Skipped lists the candidates passed over that way.
func Expand(paths []string) (files, skipped []string, err error) {
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", p, err)
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return fmt.Errorf("walk %s: %w", path, err)
			}
			if d.IsDir() || !hasTraceExt(path) {
				return nil
			}
			if detectFile(path) {
				files = append(files, path)
			} else {
				skipped = append(skipped, path)
			}
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
	}
	return files, skipped, nil
}

func hasTraceExt(path string) bool {
	base := strings.ToLower(filepath.Base(path))
	for _, e := range traceExts {
		if strings.HasSuffix(base, e) {
			return true
		}
	}
	return false
}

// detectFile reports whether a format is detected from the file's head.
func detectFile(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return true // let the import report it
	}
	defer f.Close()
	head := make([]byte, headBytes)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return true
	}
	_, derr := Detect(head[:n], path)
	return derr == nil
}

// Found is what Discover found for one agent.
type Found struct {
	// Agent is "claude-code", "codex" or "opencode"; Where the location
	// searched (a glob); Files the transcripts found, sorted.
	Agent string   `json:"agent"`
	Where string   `json:"where"`
	Files []string `json:"files"`
	// Note says what could not be imported as found (OpenCode's database).
	Note string `json:"note,omitempty"`
}

// Discover finds the transcripts agents keep under the user's home:
//
//   - Claude Code: $CLAUDE_CONFIG_DIR/projects/*/*.jsonl (default
//     ~/.claude/projects/<project>/<session>.jsonl; sub-agent transcripts
//     under <session>/subagents/ are not sessions of their own);
//   - Codex CLI: $CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl (default
//     ~/.codex/sessions);
//   - OpenCode keeps its sessions in a SQLite database under
//     $XDG_DATA_HOME/opencode (default ~/.local/share/opencode; older
//     versions split them into storage/ JSON files per message and part),
//     which no importer reads: export a session with `opencode export ID >
//     FILE.json` and pass the file. Discover reports the directory with that
//     note and no files.
//
// home is the user's home directory; getenv reads the environment.
func Discover(home string, getenv func(string) string) []Found {
	claude := getenv("CLAUDE_CONFIG_DIR")
	if claude == "" {
		claude = filepath.Join(home, ".claude")
	}
	codexHome := getenv("CODEX_HOME")
	if codexHome == "" {
		codexHome = filepath.Join(home, ".codex")
	}
	data := getenv("XDG_DATA_HOME")
	if data == "" {
		data = filepath.Join(home, ".local", "share")
	}
	out := []Found{
		{Agent: "claude-code", Where: filepath.Join(claude, "projects", "*", "*.jsonl")},
		{Agent: "codex", Where: filepath.Join(codexHome, "sessions", "**", "rollout-*.jsonl")},
		{Agent: "opencode", Where: filepath.Join(data, "opencode")},
	}
	out[0].Files, _ = filepath.Glob(out[0].Where)
	_ = filepath.WalkDir(filepath.Join(codexHome, "sessions"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasPrefix(d.Name(), "rollout-") && strings.HasSuffix(d.Name(), ".jsonl") {
			out[1].Files = append(out[1].Files, path)
		}
		return nil
	})
	if st, err := os.Stat(out[2].Where); err == nil && st.IsDir() {
		out[2].Note = fmt.Sprintf("OpenCode keeps its sessions in a database under %s: export one with 'opencode export ID > FILE.json' and pass FILE.json", out[2].Where)
	}
	for i := range out {
		sort.Strings(out[i].Files)
	}
	return out
}
