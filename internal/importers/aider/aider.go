// Package aider imports Aider chat histories (.aider.chat.history.md) as
// prunesched events. The history is Markdown text, not a record of the
// requests: only what it shows is imported.
//
//   - "# aider chat started at T" starts an Aider run. A run starts a fresh
//     model context, so every run after the first is preceded by a
//     host_compaction (host "aider").
//   - "#### " lines are the person's input, one user message per block.
//     "/run CMD" and "/test CMD" blocks are shell calls (tool "shell"); the
//     "> " lines that follow are their output.
//   - The unprefixed text after a user block is the model's reply, one
//     model_request (usage from the "> Tokens: N sent, M received." line,
//     input only: Aider logs no cache split) and an assistant message. Its
//     SEARCH/REPLACE blocks are an edit call (tool "edit", input the blocks,
//     so they are counted once, apart from the reply's prose); the result is
//     "Applied edit to ..." or, on failure, the SearchReplaceNoExactMatch /
//     "did not conform to the edit format" text Aider sends back to the
//     model (is_error).
//   - Other "> " lines (warnings, "Added X to the chat", provider errors and
//     tracebacks) are Aider's terminal output, never sent to the model, and
//     are not imported. Files added with /add are not logged, nor is the
//     repo map.
//
// Aider has no ids: items are named by line number.
package aider

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/importers/internal/build"
	"github.com/prunesched/prunesched/internal/toolspec"
)

// Format is the format name of Aider chat histories.
const Format = "aider"

// RunPrefix starts every Aider run in a chat history.
const RunPrefix = "# aider chat started at "

type blockKind int

const (
	bRun blockKind = iota
	bUser
	bOutput
	bAssistant
	bFailure // "## SearchReplaceNoExactMatch" and its echoed blocks
)

type block struct {
	kind  blockKind
	line  int // 1-based first line
	lines []string
	// closed is set on a failure block once Aider's closing advice ("The
	// SEARCH section must exactly match ...") is read: the reply follows.
	closed bool
}

func (b *block) text() string { return strings.Join(b.lines, "\n") }

// Import reads one Aider chat history. name is used in error messages and as
// the session's source path. A history file is one session.
func Import(r io.Reader, name string) ([]build.Session, error) {
	blocks, err := split(r, name)
	if err != nil {
		return nil, err
	}
	s, err := convert(name, blocks)
	if err != nil {
		return nil, err
	}
	return []build.Session{s}, nil
}

// split cuts the history into blocks of one kind.
func split(r io.Reader, name string) ([]*block, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), events.MaxLineBytes)
	var out []*block
	var cur *block
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimRight(sc.Text(), "\r")
		if n == 1 {
			line = strings.TrimPrefix(line, "\ufeff")
		}
		// Aider ends lines with two spaces (Markdown hard breaks).
		line = strings.TrimSuffix(line, "  ")
		var kind blockKind
		var body string
		switch {
		case strings.HasPrefix(line, RunPrefix):
			kind, body = bRun, strings.TrimPrefix(line, RunPrefix)
		case strings.HasPrefix(line, "#### ") || line == "####":
			kind, body = bUser, strings.TrimPrefix(strings.TrimPrefix(line, "####"), " ")
		case strings.HasPrefix(line, "> ") || line == ">":
			kind, body = bOutput, strings.TrimPrefix(strings.TrimPrefix(line, ">"), " ")
		case strings.HasPrefix(line, "## SearchReplaceNoExactMatch"):
			kind, body = bFailure, line
		default:
			kind, body = bAssistant, line
			if cur != nil && cur.kind == bFailure && !cur.closed {
				kind = bFailure // the echoed blocks and advice that follow
			}
		}
		if kind == bAssistant && cur == nil && strings.TrimSpace(body) == "" {
			continue
		}
		if cur == nil || cur.kind != kind || kind == bRun {
			if kind == bAssistant && strings.TrimSpace(body) == "" {
				continue // blank lines between blocks
			}
			cur = &block{kind: kind, line: n}
			out = append(out, cur)
		}
		cur.lines = append(cur.lines, body)
		if kind == bFailure && strings.HasPrefix(body, "The SEARCH section must exactly match") {
			cur.closed = true
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			err = &events.LineTooLongError{What: "line"}
		}
		return nil, fmt.Errorf("%s:%d: %w", name, n+1, err)
	}
	for _, b := range out {
		for len(b.lines) > 0 && strings.TrimSpace(b.lines[len(b.lines)-1]) == "" {
			b.lines = b.lines[:len(b.lines)-1]
		}
	}
	return out, nil
}

var tokensRe = regexp.MustCompile(`^Tokens: ([\d.,]+)(k?) sent(?:, ([\d.,]+)(k?) cache write)?(?:, ([\d.,]+)(k?) cache hit)?, ([\d.,]+)(k?) received`)

// tokenCount reads Aider's rounded counts ("9.7k" is 9700).
func tokenCount(num, k string) int {
	f, err := strconv.ParseFloat(strings.ReplaceAll(num, ",", ""), 64)
	if err != nil || f < 0 || f > 1e12 {
		return 0
	}
	if k == "k" {
		f *= 1000
	}
	return int(f)
}

type converter struct {
	name    string
	b       *build.Builder
	at      time.Time
	runs    int
	items   int // context items in the current run
	runCall *pendingCall
	edit    *pendingCall
}

type pendingCall struct {
	id, tool string
	command  string
	output   []string
	line     int
}

func convert(name string, blocks []*block) (build.Session, error) {
	c := &converter{name: name, b: build.New(Format, name)}
	c.b.Started().Agent = "aider"
	// A history names no session: the file does.
	c.b.SetSourceID(strings.TrimSuffix(filepath.Base(name), ".aider.chat.history.md"))
	for i, bl := range blocks {
		if err := c.block(i, blocks, bl); err != nil {
			return build.Session{}, fmt.Errorf("%s:%d: %w", name, bl.line, err)
		}
	}
	c.flushRun()
	c.flushEdit("", false, 0)
	return c.b.Finish("aider-start")
}

func (c *converter) loc(line int) string { return fmt.Sprintf("%s:%d", c.name, line) }

func (c *converter) add(line, k int, p events.Payload) {
	c.b.Add(fmt.Sprintf("aider-%d-%d", line, k), c.at, c.loc(line), p)
}

func (c *converter) block(i int, blocks []*block, bl *block) error {
	first := ""
	if len(bl.lines) > 0 {
		first = strings.TrimSpace(bl.lines[0])
	}
	switch bl.kind {
	case bRun:
		c.flushRun()
		c.flushEdit("", false, 0)
		t, err := time.Parse("2006-01-02 15:04:05", first)
		if err != nil {
			return fmt.Errorf("run start time %q: %w", first, err)
		}
		// Local time of the person's machine, zone unknown: taken as UTC.
		c.at = t.UTC()
		c.b.HintStart(c.at)
		c.runs++
		if c.items > 0 {
			c.add(bl.line, 0, &events.HostCompaction{Host: Format, SourceID: fmt.Sprintf("line-%d", bl.line)})
		}
		c.items = 0
	case bUser:
		c.flushRun()
		c.flushEdit("", false, 0)
		text := bl.text()
		c.add(bl.line, 0, &events.Message{Item: c.b.Item(fmt.Sprintf("l%d", bl.line)), Role: events.RoleUser, Kind: events.KindText, Text: text})
		c.items++
		for _, cmd := range []string{"/run ", "/test "} {
			if rest, ok := strings.CutPrefix(first, cmd); ok && strings.TrimSpace(rest) != "" {
				p := &pendingCall{id: c.b.Call(fmt.Sprintf("l%d-run", bl.line)), tool: "shell", command: strings.TrimSpace(rest), line: bl.line}
				in, _ := json.Marshal(map[string]string{"command": p.command})
				c.add(bl.line, 1, &events.ToolCall{Item: events.CallInputItem(p.id), CallID: p.id, Tool: p.tool, Input: in})
				c.runCall = p
			}
		}
	case bOutput:
		if c.runCall != nil {
			c.runCall.output = append(c.runCall.output, bl.lines...)
			return nil
		}
		var applied []string
		for _, l := range bl.lines {
			if strings.HasPrefix(l, "Applied edit to ") {
				applied = append(applied, l)
			}
		}
		if len(applied) > 0 {
			c.flushEdit(strings.Join(applied, "\n"), false, bl.line)
		}
	case bFailure:
		c.flushEdit(bl.text(), true, bl.line)
	case bAssistant:
		c.flushRun()
		c.flushEdit("", false, 0)
		c.assistant(i, blocks, bl)
	}
	return nil
}

// assistant emits a reply: its model request (with the usage of the next
// "Tokens:" line before the next user block), its prose and its edit call.
func (c *converter) assistant(i int, blocks []*block, bl *block) {
	mr := &events.ModelRequest{Request: c.b.Item(fmt.Sprintf("l%d-req", bl.line))}
scan:
	for _, nb := range blocks[i+1:] {
		switch nb.kind {
		case bUser, bRun, bAssistant:
			break scan
		case bOutput:
			for _, l := range nb.lines {
				if m := tokensRe.FindStringSubmatch(l); m != nil {
					write, hit := tokenCount(m[3], m[4]), tokenCount(m[5], m[6])
					sent := tokenCount(m[1], m[2])
					mr.Usage = &events.Usage{InputTokens: max(sent-write-hit, 0), CacheWriteTokens: write, CacheReadTokens: hit, OutputTokens: tokenCount(m[7], m[8])}
					break scan
				}
			}
		}
	}
	c.add(bl.line, 0, mr)
	prose, edits, paths := splitEdits(bl.lines)
	if strings.TrimSpace(prose) != "" {
		c.add(bl.line, 1, &events.Message{Item: c.b.Item(fmt.Sprintf("l%d", bl.line)), Role: events.RoleAssistant, Kind: events.KindText, Text: prose})
	}
	c.items++
	if edits == "" {
		return
	}
	in := map[string]any{"edits": edits}
	if len(paths) > 0 {
		in["path"] = paths[0]
		in["paths"] = paths
	}
	raw, _ := json.Marshal(in)
	p := &pendingCall{id: c.b.Call(fmt.Sprintf("l%d-edit", bl.line)), tool: "edit", line: bl.line}
	c.add(bl.line, 2, &events.ToolCall{Item: events.CallInputItem(p.id), CallID: p.id, Tool: p.tool, Input: raw})
	c.edit = p
}

// splitEdits separates SEARCH/REPLACE blocks (with the file name line before
// each and its fence) from the reply's prose.
func splitEdits(lines []string) (prose, edits string, paths []string) {
	var p, e []string
	in := false
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if !in && strings.HasPrefix(l, "<<<<<<< SEARCH") {
			in = true
			// The file name (and an opening fence) precede the block.
			for len(p) > 0 {
				last := strings.TrimSpace(p[len(p)-1])
				if strings.HasPrefix(last, "```") {
					e = append([]string{p[len(p)-1]}, e...)
					p = p[:len(p)-1]
					continue
				}
				if last != "" && !strings.Contains(last, " ") {
					paths = appendNew(paths, last)
					e = append([]string{p[len(p)-1]}, e...)
					p = p[:len(p)-1]
				}
				break
			}
		}
		if in {
			e = append(e, l)
			if strings.HasPrefix(l, ">>>>>>> REPLACE") {
				in = false
				if i+1 < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i+1]), "```") {
					e = append(e, lines[i+1])
					i++
				}
			}
			continue
		}
		p = append(p, l)
	}
	return strings.Join(p, "\n"), strings.Join(e, "\n"), paths
}

func appendNew(xs []string, x string) []string {
	for _, y := range xs {
		if y == x {
			return xs
		}
	}
	return append(xs, x)
}

// flushRun emits the pending /run call's output as its result.
func (c *converter) flushRun() {
	p := c.runCall
	if p == nil {
		return
	}
	c.runCall = nil
	out := strings.Join(p.output, "\n")
	c.add(p.line, 2, &events.ToolResult{Item: p.id, CallID: p.id, Tool: p.tool, Output: &out, Source: toolspec.ShellSource(p.command)})
}

// flushEdit emits the pending edit call's result: text (success or
// failure), or nothing when text is "" (the outcome was not logged).
func (c *converter) flushEdit(text string, failed bool, line int) {
	p := c.edit
	if p == nil || text == "" {
		return
	}
	c.edit = nil
	out := text
	res := &events.ToolResult{Item: p.id, CallID: p.id, Tool: p.tool, Output: &out}
	if failed {
		res.IsError = true
		typ := "edit_failed"
		if strings.Contains(text, "SearchReplaceNoExactMatch") {
			typ = "search_replace_no_match"
		}
		res.Error = &events.ToolError{Type: typ, Message: build.ErrorSummary(text)}
	}
	c.add(line, 9, res)
}
