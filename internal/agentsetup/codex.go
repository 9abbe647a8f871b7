package agentsetup

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// Codex's config.toml is edited by lines, not by decoding and encoding it
// (go-toml, like every TOML encoder, drops comments and reorders tables).
// go-toml parses the file only: to report a malformed file with its line,
// to find the top-level model_provider key whatever its quoting or
// spacing (a line-based search could be fooled by a multi-line string),
// and to check that the edited file still parses.
//
// The edit is two blocks between marker comments: at the top of the file
// (top-level keys must come before the first table) the line that selects
// the provider, and at the end the provider's table. A top-level
// model_provider of the user is commented out with a "# prunesched: "
// prefix (TOML forbids a key twice). Running setup again first removes the
// blocks it wrote, so nothing stacks.

// CodexProvider is the id of the model provider setup adds to config.toml.
const CodexProvider = "prunesched"

const (
	codexBegin     = "# >>> prunesched setup: managed block (prunesched setup codex --undo restores the original file) >>>\n"
	codexEnd       = "# <<< prunesched setup <<<\n"
	codexCommented = "# prunesched: "
)

// codexBlock matches one managed block, with the blank line setup puts
// before the table block.
var codexBlock = regexp.MustCompile(`(?m)\n?^# >>> prunesched setup: .*>>>\n(?:.*\n)*?^# <<< prunesched setup <<<\n`)

// tomlString quotes s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// tomlError turns a go-toml error into a SyntaxError with its position.
func tomlError(src []byte, err error) error {
	var de *toml.DecodeError
	if errors.As(err, &de) {
		l, c := de.Position()
		return &SyntaxError{Line: l, Col: c, Msg: de.Error()}
	}
	var pe *unstable.ParserError
	if errors.As(err, &pe) && len(pe.Highlight) > 0 && cap(src) >= cap(pe.Highlight) {
		l, c := position(src, cap(src)-cap(pe.Highlight))
		return &SyntaxError{Line: l, Col: c, Msg: pe.Message}
	}
	return err
}

// tomlArray quotes ss as a TOML array of basic strings.
func tomlArray(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = tomlString(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// codexMCP returns the command line of the [mcp_servers.prunesched]
// table in doc, if there is one with a string command.
func codexMCP(doc map[string]any) ([]string, bool) {
	servers, _ := doc["mcp_servers"].(map[string]any)
	mine, ok := servers[MCPServer].(map[string]any)
	if !ok {
		return nil, false
	}
	cmd, _ := mine["command"].(string)
	line := []string{cmd}
	args, _ := mine["args"].([]any)
	for _, a := range args {
		s, _ := a.(string)
		line = append(line, s)
	}
	return line, true
}

// editCodex returns config.toml with the prunesched provider at baseURL
// selected and, when mcp is not nil, the MCP server registered as
// [mcp_servers.prunesched]. Without mcp, a server an earlier setup
// registered stays.
func editCodex(src []byte, baseURL string, mcp []string) ([]byte, []Change, error) {
	var doc map[string]any
	if err := toml.Unmarshal(src, &doc); err != nil {
		return nil, nil, tomlError(src, err)
	}
	var changes []Change
	prevURL := ""
	if p, ok := doc["model_providers"].(map[string]any); ok {
		if mine, ok := p[CodexProvider].(map[string]any); ok {
			prevURL, _ = mine["base_url"].(string)
		}
	}
	prevMCP, hadMCP := codexMCP(doc)
	stripped := codexBlock.ReplaceAll(src, nil)
	if bytes.Equal(stripped, src) && prevURL != "" {
		// A [model_providers.prunesched] table the user wrote: leave it.
		return nil, nil, fmt.Errorf("[model_providers.%s] is already defined outside prunesched's managed block; remove it or rename it", CodexProvider)
	}
	if hadMCP {
		var rest map[string]any
		if err := toml.Unmarshal(stripped, &rest); err == nil {
			if _, theirs := codexMCP(rest); theirs {
				if mcp != nil {
					return nil, nil, fmt.Errorf("[mcp_servers.%s] is already defined outside prunesched's managed block; remove it or rename it (or run setup with --no-mcp)", MCPServer)
				}
				hadMCP = false // the user's own: not ours to keep
			}
		}
	}
	lines, err := topLevelKey(stripped, "model_provider")
	if err != nil {
		return nil, nil, err
	}
	// Comment out the user's own selection, line by line.
	if len(lines) > 0 {
		all := strings.SplitAfter(string(stripped), "\n")
		for _, l := range lines {
			all[l-1] = codexCommented + all[l-1]
		}
		stripped = []byte(strings.Join(all, ""))
	}
	prev, _ := doc["model_provider"].(string)
	if prev == "" {
		prev = "openai (the default)"
	}
	if prev != CodexProvider {
		changes = append(changes, Change{Key: "model_provider", Old: prev, New: CodexProvider})
	}
	if prevURL != baseURL {
		changes = append(changes, Change{Key: "model_providers." + CodexProvider + ".base_url", Old: prevURL, New: baseURL})
	}
	if mcp == nil && hadMCP {
		mcp = prevMCP // an earlier setup's server stays
	}
	if mcp != nil && !slices.Equal(mcp, prevMCP) {
		c := Change{Key: "mcp_servers." + MCPServer, New: codexMCPLine(mcp)}
		if hadMCP {
			c.Old = codexMCPLine(prevMCP)
		}
		changes = append(changes, c)
	}
	var out bytes.Buffer
	out.WriteString(codexBegin)
	fmt.Fprintf(&out, "model_provider = %s\n", tomlString(CodexProvider))
	out.WriteString(codexEnd)
	out.Write(stripped)
	if len(stripped) > 0 && stripped[len(stripped)-1] != '\n' {
		out.WriteByte('\n')
	}
	out.WriteString("\n" + codexBegin)
	fmt.Fprintf(&out, "[model_providers.%s]\n", CodexProvider)
	fmt.Fprintf(&out, "name = %s\n", tomlString("OpenAI via prunesched"))
	fmt.Fprintf(&out, "base_url = %s\n", tomlString(baseURL))
	fmt.Fprintf(&out, "env_key = %s\n", tomlString("OPENAI_API_KEY"))
	fmt.Fprintf(&out, "wire_api = %s\n", tomlString("responses"))
	if mcp != nil {
		fmt.Fprintf(&out, "\n[mcp_servers.%s]\n", MCPServer)
		fmt.Fprintf(&out, "command = %s\n", tomlString(mcp[0]))
		fmt.Fprintf(&out, "args = %s\n", tomlArray(mcp[1:]))
	}
	out.WriteString(codexEnd)
	// The result must parse, and select the provider at baseURL.
	var check struct {
		ModelProvider  string `toml:"model_provider"`
		ModelProviders map[string]struct {
			BaseURL string `toml:"base_url"`
		} `toml:"model_providers"`
	}
	if err := toml.Unmarshal(out.Bytes(), &check); err != nil {
		return nil, nil, fmt.Errorf("the edited file would not parse (%v); nothing written", tomlError(out.Bytes(), err))
	}
	if check.ModelProvider != CodexProvider || check.ModelProviders[CodexProvider].BaseURL != baseURL {
		return nil, nil, fmt.Errorf("the edited file would not select the %s provider; nothing written", CodexProvider)
	}
	return out.Bytes(), changes, nil
}

// codexMCPLine shows an MCP server's command line as the table's
// values.
func codexMCPLine(line []string) string {
	if len(line) == 0 {
		return ""
	}
	return fmt.Sprintf("command = %s, args = %s", tomlString(line[0]), tomlArray(line[1:]))
}

// topLevelKey returns the 1-based lines spanned by the top-level (before
// any table) assignments of key.
func topLevelKey(src []byte, key string) (lines []int, err error) {
	var p unstable.Parser
	p.Reset(src)
	for p.NextExpression() {
		e := p.Expression()
		if e.Kind == unstable.Table || e.Kind == unstable.ArrayTable {
			break
		}
		if e.Kind != unstable.KeyValue {
			continue
		}
		it := e.Key()
		var parts []string
		for it.Next() {
			parts = append(parts, string(it.Node().Data))
		}
		if len(parts) != 1 || parts[0] != key {
			continue
		}
		sh := p.Shape(e.Raw)
		for l := sh.Start.Line; l <= sh.End.Line; l++ {
			lines = append(lines, l)
		}
	}
	if err := p.Error(); err != nil {
		return nil, tomlError(src, err)
	}
	return lines, nil
}
