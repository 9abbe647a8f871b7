package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// readmeCommands returns every command line of README.md's fenced code
// blocks that starts with "prunesched " or "go run ./cmd/prunesched ", as
// words (continuation lines joined, quotes removed, comments dropped),
// without the program name.
func readmeCommands(t *testing.T, path string) [][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	in, cont := false, ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			in, cont = !in, ""
			continue
		}
		if !in {
			continue
		}
		if cont != "" {
			line = cont + " " + strings.TrimSpace(line)
			cont = ""
		}
		if strings.HasSuffix(line, `\`) {
			cont = strings.TrimSuffix(line, `\`)
			continue
		}
		var rest string
		switch {
		case strings.HasPrefix(line, "prunesched "):
			rest = strings.TrimPrefix(line, "prunesched ")
		case strings.HasPrefix(line, "go run ./cmd/prunesched "):
			rest = strings.TrimPrefix(line, "go run ./cmd/prunesched ")
		default:
			continue
		}
		out = append(out, shellWords(rest))
	}
	return out
}

// shellWords splits a command line the way sh would for the README's
// simple lines: spaces separate words, '...' and "..." quote, and a word
// starting with # begins a comment.
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case r == '#' && !inWord:
			return words
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// TestReadmeExamples runs every prunesched command line of README.md as
// written, with its placeholders filled in (SESSION: the sample session,
// ITEM: one of its items, DIR: a log kept by analyze), against a data
// directory (client commands without --data get one: the README's run
// against a server). Commands that serve, measure or run the lab, and
// analyses of the shared traces, are run with a cancelled context: their
// flags and arguments are checked (no usage error, exit 2) without serving
// or measuring. The others must exit 0.
func TestReadmeExamples(t *testing.T) {
	keep, _ := keptSample(t)
	home := t.TempDir()
	environ := map[string]string{"HOME": home, "PRUNESCHED_DATA": filepath.Join(home, "data"), "USER": "readme-test"}
	t.Chdir("../..")
	cmds := readmeCommands(t, "README.md")
	if len(cmds) < 10 {
		t.Fatalf("only %d commands found in README.md", len(cmds))
	}
	// The pages the README's longer sections moved to keep their commands checked.
	for _, doc := range []string{"docs/architecture.md", "docs/results.md", "docs/performance.md", "docs/proxy.md", "docs/cli.md", "docs/operating.md"} {
		cmds = append(cmds, readmeCommands(t, doc)...)
	}
	client := []string{"sessions", "stats", "decisions", "item", "bundle", "pending", "render", "pin", "unpin", "prune", "restore", "flush", "import", "append"}
	real := append([]string{"version", "policy", "help", "setup"}, client...)
	for _, words := range cmds {
		name := strings.Join(words, " ")
		if len(words) == 0 {
			t.Errorf("empty command in README")
			continue
		}
		known := false
		for _, c := range commands() {
			known = known || c.name == words[0]
		}
		if !known {
			t.Errorf("%s: unknown command %q", name, words[0])
			continue
		}
		var args []string
		skip := false
		for _, w := range words {
			switch w {
			case "SESSION":
				w = "sample"
			case "ITEM":
				w = "t1"
			case "DIR":
				w = keep
				if words[0] == "analyze" || words[0] == "lab" {
					w = filepath.Join(t.TempDir(), "out")
				}
			}
			if strings.ContainsAny(w, "*?[") {
				m, _ := filepath.Glob(w)
				if len(m) == 0 {
					skip = true
				}
				args = append(args, m...)
				continue
			}
			args = append(args, w)
		}
		if skip {
			t.Logf("%s: skipped, its files are absent (../shared/traces next to the clone)", name)
			continue
		}
		if slices.Contains(client, words[0]) && !slices.Contains(words, "--data") {
			args = append(args, "--data", keep)
		}
		dry := !slices.Contains(real, words[0]) && !(words[0] == "analyze" && slices.Contains(words, "examples/sample-session.jsonl"))
		ctx, cancel := context.WithCancel(context.Background())
		if dry {
			cancel()
		}
		var out, errb bytes.Buffer
		start := time.Now()
		code := run(ctx, &env{stdout: &out, stderr: &errb, getenv: func(k string) string { return environ[k] }}, args)
		cancel()
		switch {
		case dry && code == 2:
			t.Errorf("%s: usage error: %s", name, errb.String())
		case !dry && code != 0:
			t.Errorf("%s: exit %d: %s", name, code, errb.String())
		default:
			t.Logf("%s: exit %d (dry %v) %s", name, code, dry, time.Since(start))
		}
	}
}
