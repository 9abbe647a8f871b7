package agentsetup

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

const px = "http://127.0.0.1:8788"

// TestEditJSON: the exact bytes setup writes for Claude Code and OpenCode,
// from files as users have them: every other key, its order, comments,
// trailing commas and the indentation stay.
func TestEditJSON(t *testing.T) {
	cases := []struct {
		name, agent, src, want string
		changes                int
	}{
		{"claude no file", "claude-code", "", "{\n  \"env\": {\n    \"ANTHROPIC_BASE_URL\": \"http://127.0.0.1:8788\"\n  }\n}\n", 1},
		{"claude empty object", "claude-code", "{}", "{\n  \"env\": {\n    \"ANTHROPIC_BASE_URL\": \"http://127.0.0.1:8788\"\n  }\n}", 1},
		{"claude keys kept in order", "claude-code",
			"{\n  \"model\": \"opus\",\n  \"permissions\": {\"allow\": [\"Bash(ls:*)\"]},\n  \"hooks\": {}\n}\n",
			"{\n  \"env\": {\n    \"ANTHROPIC_BASE_URL\": \"http://127.0.0.1:8788\"\n  },\n  \"model\": \"opus\",\n  \"permissions\": {\"allow\": [\"Bash(ls:*)\"]},\n  \"hooks\": {}\n}\n", 1},
		{"claude env block kept", "claude-code",
			"{\n    \"env\": {\n        \"DISABLE_TELEMETRY\": \"1\"\n    },\n    \"model\": \"opus\"\n}\n",
			"{\n    \"env\": {\n        \"ANTHROPIC_BASE_URL\": \"http://127.0.0.1:8788\",\n        \"DISABLE_TELEMETRY\": \"1\"\n    },\n    \"model\": \"opus\"\n}\n", 1},
		{"claude base URL replaced in place", "claude-code",
			"{\"env\": {\"ANTHROPIC_BASE_URL\": \"https://gateway.example/anthropic\", \"X\": \"1\"}}",
			"{\"env\": {\"ANTHROPIC_BASE_URL\": \"http://127.0.0.1:8788\", \"X\": \"1\"}}", 1},
		{"claude already set: not a byte changes", "claude-code",
			"{\"env\":{\"ANTHROPIC_BASE_URL\" : \"http:\\/\\/127.0.0.1:8788\"}}",
			"{\"env\":{\"ANTHROPIC_BASE_URL\" : \"http:\\/\\/127.0.0.1:8788\"}}", 0},
		{"claude compact stays compact", "claude-code", `{"model":"opus"}`,
			`{"env": {"ANTHROPIC_BASE_URL":"http://127.0.0.1:8788"}, "model":"opus"}`, 1},
		{"claude tabs", "claude-code", "{\n\t\"model\": \"opus\"\n}",
			"{\n\t\"env\": {\n\t\t\"ANTHROPIC_BASE_URL\": \"http://127.0.0.1:8788\"\n\t},\n\t\"model\": \"opus\"\n}", 1},
		{"claude duplicate key: the last one wins, as in JSON.parse", "claude-code",
			`{"env": {"ANTHROPIC_BASE_URL": "a"}, "env": {"ANTHROPIC_BASE_URL": "b"}}`,
			`{"env": {"ANTHROPIC_BASE_URL": "a"}, "env": {"ANTHROPIC_BASE_URL": "http://127.0.0.1:8788"}}`, 1},
		{"opencode jsonc comments and trailing commas", "opencode",
			"// my config\n{\n  \"$schema\": \"https://opencode.ai/config.json\",\n  /* theme */ \"theme\": \"tokyonight\",\n  \"provider\": {\n    \"anthropic\": {\n      \"options\": {\"timeout\": 600000,}, // long\n    },\n  },\n}\n",
			"// my config\n{\n  \"$schema\": \"https://opencode.ai/config.json\",\n  /* theme */ \"theme\": \"tokyonight\",\n  \"provider\": {\n    \"openai\": {\n      \"options\": {\n        \"baseURL\": \"http://127.0.0.1:8788/v1\"\n      }\n    },\n    \"anthropic\": {\n      \"options\": {\"baseURL\": \"http://127.0.0.1:8788/v1\", \"timeout\": 600000,}, // long\n    },\n  },\n}\n", 2},
		{"line comment ends the file, no newline", "claude-code", `{"model":"opus"} // mine`,
			`{"env": {"ANTHROPIC_BASE_URL":"http://127.0.0.1:8788"}, "model":"opus"} // mine`, 1},
		{"only a comment", "claude-code", "// settings",
			"{\n  \"env\": {\n    \"ANTHROPIC_BASE_URL\": \"http://127.0.0.1:8788\"\n  }\n}\n// settings", 1},
		{"comment in an empty object kept", "claude-code", "{\n  \"env\": { /* none yet */ }\n}",
			"{\n  \"env\": {\n    \"ANTHROPIC_BASE_URL\": \"http://127.0.0.1:8788\"\n   /* none yet */ }\n}", 1},
		{"opencode no file", "opencode", "",
			"{\n  \"provider\": {\n    \"anthropic\": {\n      \"options\": {\n        \"baseURL\": \"http://127.0.0.1:8788/v1\"\n      }\n    },\n    \"openai\": {\n      \"options\": {\n        \"baseURL\": \"http://127.0.0.1:8788/v1\"\n      }\n    }\n  }\n}\n", 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, changes, err := Edit(Target{Agent: c.agent}, []byte(c.src), Options{Proxy: px})
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want {
				t.Fatalf("got\n%s\nwant\n%s", got, c.want)
			}
			if len(changes) != c.changes {
				t.Errorf("changes %+v, want %d", changes, c.changes)
			}
			again, _, err := Edit(Target{Agent: c.agent}, got, Options{Proxy: px})
			if err != nil || string(again) != string(got) {
				t.Errorf("second edit changed the file (err %v):\n%s", err, again)
			}
		})
	}
}

// TestEditJSONErrors: a malformed file, or one whose "env" or "provider"
// is not an object, is an error with its line and column.
func TestEditJSONErrors(t *testing.T) {
	cases := []struct {
		name, agent, src string
		line, col        int
		msg              string
	}{
		{"missing comma", "claude-code", "{\n  \"a\": 1\n  \"b\": 2\n}", 3, 3, "expecting ',' or '}'"},
		{"unterminated", "claude-code", "{\n  \"a\": [1, 2\n", 3, 1, "array after value: unexpected EOF"},
		{"unterminated, no newline at the end", "claude-code", "{\n  \"a\": [1, 2", 2, 13, "unexpected EOF"},
		{"top level array", "claude-code", "[1]", 1, 1, "not a JSON object"},
		{"env is a string", "claude-code", "{\n  \"env\": \"x\"\n}", 2, 10, `"env" is not an object`},
		{"provider is a list", "opencode", "{\"provider\": []}", 1, 14, `"provider" is not an object`},
		{"bad literal", "claude-code", "{\"a\": tru}", 1, 7, "invalid literal"},
		{"garbage after", "claude-code", "{} {}", 1, 4, "after top-level value"},
		{"unterminated comment", "opencode", "{} /* x", 1, 4, "parsing comment: unexpected EOF"},
		{"control char in string", "claude-code", "{\"a\": \"x\ny\"}", 1, 7, "invalid literal"},
		{"bad escape", "claude-code", `{"a": "\q"}`, 1, 7, "invalid literal"},
		{"nested too deep for the parser", "claude-code", "{\"a\":" + strings.Repeat("[", maxBrackets+1), 1, 5 + maxBrackets, "more than 10000 '{' and '['"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := Edit(Target{Agent: c.agent}, []byte(c.src), Options{Proxy: px})
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("err %v, want a SyntaxError", err)
			}
			if se.Line != c.line || se.Col != c.col || !strings.Contains(se.Msg, c.msg) {
				t.Errorf("got %d:%d %q, want %d:%d containing %q", se.Line, se.Col, se.Msg, c.line, c.col, c.msg)
			}
		})
	}
}

// TestEditCodex: the exact config.toml setup writes; the user's own
// model_provider is commented out, everything else stays.
func TestEditCodex(t *testing.T) {
	block := func(url string) (top, table string) {
		top = codexBegin + "model_provider = \"prunesched\"\n" + codexEnd
		table = "\n" + codexBegin + "[model_providers.prunesched]\nname = \"OpenAI via prunesched\"\nbase_url = \"" + url + "\"\nenv_key = \"OPENAI_API_KEY\"\nwire_api = \"responses\"\n" + codexEnd
		return top, table
	}
	top, table := block(px + "/v1")
	cases := []struct{ name, src, want string }{
		{"no file", "", top + table},
		{"comments, tables and the user's provider",
			"# my codex config\nmodel = \"gpt-5.1-codex\"\nmodel_provider = \"openai\" # chosen\napproval_policy = \"never\"\n\n[features]\nplugins = false # off\n",
			top + "# my codex config\nmodel = \"gpt-5.1-codex\"\n# prunesched: model_provider = \"openai\" # chosen\napproval_policy = \"never\"\n\n[features]\nplugins = false # off\n" + table},
		{"no newline at the end", "[a]\nb = 1", top + "[a]\nb = 1\n" + table},
		{"model_provider in a table is not the top-level one",
			"[profiles.x]\nmodel_provider = \"azure\"\n",
			top + "[profiles.x]\nmodel_provider = \"azure\"\n" + table},
		{"quoted key", "'model_provider' = \"openai\"\n", top + "# prunesched: 'model_provider' = \"openai\"\n" + table},
		{"multi-line string value", "model_provider = \"\"\"\nopenai\"\"\"\nx = 1\n", top + "# prunesched: model_provider = \"\"\"\n# prunesched: openai\"\"\"\nx = 1\n" + table},
		{"a table header inside a multi-line string is not a table", "notes = '''\n[model_providers.prunesched]\n'''\nmodel_provider = \"openai\"\n",
			top + "notes = '''\n[model_providers.prunesched]\n'''\n# prunesched: model_provider = \"openai\"\n" + table},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, _, err := Edit(Target{Agent: "codex"}, []byte(c.src), Options{Proxy: px})
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want {
				t.Fatalf("got\n%s\nwant\n%s", got, c.want)
			}
			again, changes, err := Edit(Target{Agent: "codex"}, got, Options{Proxy: px})
			if err != nil || string(again) != string(got) || len(changes) != 0 {
				t.Errorf("second edit: err %v, changes %+v, file:\n%s", err, changes, again)
			}
			// Another proxy replaces the blocks, it does not add any.
			other, _, err := Edit(Target{Agent: "codex"}, got, Options{Proxy: "http://127.0.0.1:9999"})
			_, table2 := block("http://127.0.0.1:9999/v1")
			if err != nil || strings.Count(string(other), codexBegin) != 2 || !strings.HasSuffix(string(other), table2) {
				t.Errorf("edit with another proxy: err %v:\n%s", err, other)
			}
		})
	}
}

func TestEditCodexErrors(t *testing.T) {
	cases := []struct {
		name, src string
		line      int
		msg       string
	}{
		{"unterminated array", "a = 1\nb = [\n", 2, "array"},
		{"duplicate key", "a = 1\na = 2\n", 2, "a"},
		{"bad header", "x = 1\n[tbl\n", 2, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := Edit(Target{Agent: "codex"}, []byte(c.src), Options{Proxy: px})
			var se *SyntaxError
			if !errors.As(err, &se) || se.Line != c.line || !strings.Contains(se.Msg, c.msg) {
				t.Fatalf("err %v, want a SyntaxError at line %d", err, c.line)
			}
		})
	}
	// A [model_providers.prunesched] the user wrote is theirs.
	_, _, err := Edit(Target{Agent: "codex"}, []byte("[model_providers.prunesched]\nbase_url = \"http://x\"\n"), Options{Proxy: px})
	if err == nil || !strings.Contains(err.Error(), "outside prunesched's managed block") {
		t.Fatalf("user-defined provider: err %v", err)
	}
}

func TestNormalizeProxy(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:8788":       "http://127.0.0.1:8788",
		"http://127.0.0.1:8788/":      "http://127.0.0.1:8788",
		"https://proxy.example/team/": "https://proxy.example/team",
		"127.0.0.1:8788":              "",
		"ftp://x":                     "",
		"http://127.0.0.1:8788/v1":    "",
		"http://u:p@127.0.0.1:8788":   "",
		"http://127.0.0.1:8788/?a=1":  "",
	} {
		got, err := NormalizeProxy(in)
		if (want == "") != (err != nil) || got != want {
			t.Errorf("%q: got %q, %v; want %q", in, got, err, want)
		}
	}
}

// FuzzEditJSON: on any input the editor does not panic; when it accepts a
// file, the result sets the value, keeps a valid document, and a second
// edit changes nothing.
func FuzzEditJSON(f *testing.F) {
	for _, s := range []string{"", "{}", `{"env":{"A":"b"}}`, "{\n  \"a\": 1, // c\n}", `{"env":1}`, "[", `{"a":"\u00e9"}`, "{/*x*/}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		out, _, err := Edit(Target{Agent: "claude-code"}, []byte(src), Options{Proxy: px})
		if err != nil {
			return
		}
		// The result, its comments and trailing commas blanked, is JSON
		// holding the value (of duplicate keys the last, as json keeps it);
		// without them it is strict JSON already.
		d, err := parseJSONC(out)
		if err != nil {
			t.Fatalf("edited document does not parse: %v\n%s", err, out)
		}
		std := d.root
		std.Standardize()
		var doc map[string]any
		if err := json.Unmarshal(std.Pack(), &doc); err != nil {
			t.Fatalf("edited document is not JSON once standardized (%v):\n%s", err, out)
		}
		if env, _ := doc["env"].(map[string]any); env["ANTHROPIC_BASE_URL"] != px {
			t.Fatalf("value not set:\n%s", out)
		}
		if (json.Valid([]byte(src)) || strings.TrimSpace(src) == "") && !json.Valid(out) {
			t.Fatalf("strict JSON in, not strict JSON out:\n%s", out)
		}
		again, _, err := Edit(Target{Agent: "claude-code"}, out, Options{Proxy: px})
		if err != nil || string(again) != string(out) {
			t.Fatalf("second edit changed the file (%v)", err)
		}
	})
}

// FuzzEditCodex: on any input the TOML edit does not panic; an accepted
// file gives a parsing result selecting the provider, and a second edit
// changes nothing.
func FuzzEditCodex(f *testing.F) {
	for _, s := range []string{"", "model = \"x\"\n", "model_provider = 'a'\n[t]\nk = 1", "a = \"\"\"\n[x]\n\"\"\"", "[model_providers.prunesched]\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		out, _, err := Edit(Target{Agent: "codex"}, []byte(src), Options{Proxy: px})
		if err != nil {
			return
		}
		var doc map[string]any
		if err := toml.Unmarshal(out, &doc); err != nil || doc["model_provider"] != CodexProvider {
			t.Fatalf("edited file: %v\n%s", err, out)
		}
		again, _, err := Edit(Target{Agent: "codex"}, out, Options{Proxy: px})
		if err != nil || string(again) != string(out) {
			t.Fatalf("second edit changed the file (%v)", err)
		}
	})
}
