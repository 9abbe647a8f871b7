package proxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prunesched/prunesched/internal/agenttools"
	"github.com/prunesched/prunesched/internal/testutil"
)

// openaiClient plays an agent on an OpenAI API with prunesched's MCP
// server, as the real CLIs do: on Chat Completions like OpenCode's
// openai-compatible providers (tools prunesched_context_*, results as
// strings), on Responses like Codex (the tools in the namespace
// mcp__prunesched, MCP results as arrays of input_text parts). Every
// context tool's result is the MCP server's stub, which the proxy must
// replace.
type openaiClient struct {
	t     *testing.T
	api   API
	url   string
	proj  *ctxProject
	items []map[string]any // messages (Chat) or input items (Responses)
}

func (c *openaiClient) tools() []any {
	schema := map[string]any{"type": "object"}
	if c.api == APIOpenAIChat {
		var out []any
		for _, n := range []string{"read", "prunesched_context_list", "prunesched_context_prune", "prunesched_context_recover"} {
			out = append(out, map[string]any{"type": "function", "function": map[string]any{"name": n, "parameters": schema}})
		}
		return out
	}
	var inner []any
	for _, k := range agenttools.Kinds {
		inner = append(inner, map[string]any{"type": "function", "name": string(k), "strict": false, "parameters": schema})
	}
	return []any{
		map[string]any{"type": "function", "name": "read", "strict": false, "parameters": schema},
		map[string]any{"type": "namespace", "name": "mcp__prunesched", "description": "Tools in the mcp__prunesched namespace.", "tools": inner},
	}
}

// call is one streamed answer: a tool call or text.
type call struct {
	id, name, namespace, args, text string
}

// send posts the conversation and reads the streamed answer.
func (c *openaiClient) send() call {
	c.t.Helper()
	path, key := "/v1/chat/completions", "messages"
	if c.api == APIOpenAIResponses {
		path, key = "/v1/responses", "input"
	}
	body, err := json.Marshal(map[string]any{"model": "gpt-test", "stream": true, key: c.items, "tools": c.tools()})
	testutil.NoError(c.t, err)
	hr, err := http.NewRequest("POST", c.url+path, bytes.NewReader(body))
	testutil.NoError(c.t, err)
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Authorization", "Bearer "+secretKey)
	hr.Header.Set("X-Session-Id", "oa-"+string(c.api))
	resp, err := http.DefaultClient.Do(hr)
	testutil.NoError(c.t, err)
	defer resp.Body.Close()
	testutil.True(c.t, resp.StatusCode == 200, "status %d", resp.StatusCode)
	var out call
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ev struct {
			Type    string `json:"type"`
			Item    map[string]any
			Choices []struct {
				Delta struct {
					Content   string
					ToolCalls []struct {
						ID       string
						Function struct{ Name, Arguments string }
					} `json:"tool_calls"`
				}
			}
		}
		testutil.NoError(c.t, json.Unmarshal([]byte(data), &ev))
		for _, ch := range ev.Choices {
			out.text += ch.Delta.Content
			for _, tc := range ch.Delta.ToolCalls {
				out.id, out.name, out.args = tc.ID, tc.Function.Name, tc.Function.Arguments
			}
		}
		if ev.Type == "response.output_item.done" {
			it := ev.Item
			switch it["type"] {
			case "function_call":
				out.id, _ = it["call_id"].(string)
				out.name, _ = it["name"].(string)
				out.namespace, _ = it["namespace"].(string)
				out.args, _ = it["arguments"].(string)
			case "message":
				raw, _ := json.Marshal(it["content"])
				var parts []struct{ Text string }
				_ = json.Unmarshal(raw, &parts)
				for _, p := range parts {
					out.text += p.Text
				}
			}
		}
	}
	testutil.NoError(c.t, sc.Err())
	return out
}

// step sends the conversation and plays the answer's tool call; false at
// the final text.
func (c *openaiClient) step() bool {
	c.t.Helper()
	cl := c.send()
	if cl.name == "" {
		testutil.True(c.t, cl.text == "done", "the model ended with %q", cl.text)
		return false
	}
	var result any
	if k, ok := agenttools.Match(cl.name); ok {
		result = agenttools.Stub(k)
		if c.api == APIOpenAIResponses {
			result = []any{map[string]any{"type": "input_text", "text": "Wall time: 0.0081 seconds\nOutput:"}, map[string]any{"type": "input_text", "text": agenttools.Stub(k)}}
		}
	} else {
		var in struct{ FilePath string }
		testutil.NoError(c.t, json.Unmarshal([]byte(cl.args), &in))
		result = map[string]string{
			filepath.Join(c.proj.dir, "a.txt"): c.proj.a, filepath.Join(c.proj.dir, "test.log"): c.proj.log,
			filepath.Join(c.proj.dir, c.proj.rulesName): c.proj.rules, filepath.Join(c.proj.dir, "x.txt"): "one more file\n",
		}[in.FilePath]
	}
	if c.api == APIOpenAIChat {
		c.items = append(c.items,
			map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"id": cl.id, "type": "function", "function": map[string]any{"name": cl.name, "arguments": cl.args}}}},
			map[string]any{"role": "tool", "tool_call_id": cl.id, "content": result})
		return true
	}
	fc := map[string]any{"type": "function_call", "status": "completed", "call_id": cl.id, "name": cl.name, "arguments": cl.args}
	if cl.namespace != "" {
		fc["namespace"] = cl.namespace
	}
	c.items = append(c.items, fc, map[string]any{"type": "function_call_output", "call_id": cl.id, "output": result})
	return true
}

// TestAgentContextToolsOpenAI is the CLI tests' script (agent_cli_test.go)
// on the OpenAI shapes with a simulated client, so they are covered where
// the real CLIs are not installed, and Chat Completions at all (no CLI
// 'setup' configures speaks it: OpenCode goes through its anthropic
// provider).
func TestAgentContextToolsOpenAI(t *testing.T) {
	t.Parallel()
	for _, api := range []API{APIOpenAIChat, APIOpenAIResponses} {
		t.Run(string(api), func(t *testing.T) {
			t.Parallel()
			c := newCtxBench(t, api)
			proj := newCtxProject(t, "AGENTS.md")
			r := &ctxRun{prefix: "call_" + string(api) + "_", proj: proj, read: func(name string) turn {
				return turn{tool: "read", input: map[string]any{"filePath": filepath.Join(proj.dir, name)}}
			}}
			c.start(r)
			cl := &openaiClient{t: t, api: api, url: c.url, proj: proj}
			// Above the provider's minimum cacheable prompt (1024 tokens),
			// so the reported cache is warm from the first request, as
			// with the CLIs' long system prompts.
			system := strings.Repeat("You are a test agent. ", 400)
			if api == APIOpenAIChat {
				cl.items = []map[string]any{{"role": "system", "content": system}, {"role": "user", "content": "tidy up the context"}}
			} else {
				cl.items = []map[string]any{{"type": "message", "role": "developer", "content": []any{map[string]any{"type": "input_text", "text": system}}},
					{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "tidy up the context"}}}}
			}
			for n := 0; cl.step(); n++ {
				testutil.True(t, n < 20, "the conversation did not end")
			}
			view := chatView
			if api == APIOpenAIResponses {
				view = responsesView
			}
			checkCtxRun(t, c.bench, r, c.f.requests(), view)
			want := map[agenttools.Kind]toolName{}
			for _, k := range agenttools.Kinds {
				want[k] = toolName{name: "prunesched_" + string(k)}
				if api == APIOpenAIResponses {
					want[k] = toolName{ns: "mcp__prunesched", name: string(k)}
				}
			}
			for k, n := range r.names {
				testutil.True(t, n == want[k], "%s called as %s", k, n)
			}
		})
	}
}

// TestAgentContextToolsNamespace: Codex calls an MCP server's tool by its
// bare name in the server's namespace (mcp__SERVER). Only prunesched's
// namespace holds the context tools: another server's context_list keeps
// its own result.
func TestAgentContextToolsNamespace(t *testing.T) {
	t.Parallel()
	f := &fakeUpstream{}
	b := setup(t, testPolicy(t), responsesFake(f, func(map[string]any) turn { return turn{text: "ok"} }), nil)
	msg := func(role, text string) map[string]any {
		return map[string]any{"type": "message", "role": role, "content": []any{map[string]any{"type": "input_text", "text": text}}}
	}
	input := []any{msg("developer", "You are a test agent."), msg("user", "list the context twice")}
	for _, c := range []struct{ id, ns string }{{"call_other", "mcp__other"}, {"call_ours", "mcp__prunesched"}} {
		input = append(input,
			map[string]any{"type": "function_call", "call_id": c.id, "name": "context_list", "namespace": c.ns, "arguments": "{}"},
			map[string]any{"type": "function_call_output", "call_id": c.id, "output": []any{map[string]any{"type": "input_text", "text": c.ns + " says: " + agenttools.Stub(agenttools.List)}}})
	}
	body, err := json.Marshal(map[string]any{"model": "gpt-test", "stream": true, "input": input,
		"tools": []any{map[string]any{"type": "function", "name": "read", "parameters": map[string]any{"type": "object"}}}})
	testutil.NoError(t, err)
	hr, err := http.NewRequest("POST", b.url+"/v1/responses", bytes.NewReader(body))
	testutil.NoError(t, err)
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Authorization", "Bearer "+secretKey)
	resp, err := http.DefaultClient.Do(hr)
	testutil.NoError(t, err)
	resp.Body.Close()
	testutil.True(t, resp.StatusCode == 200, "status %d", resp.StatusCode)
	reqs := f.requests()
	testutil.True(t, len(reqs) == 1, "%d requests upstream", len(reqs))
	var req map[string]any
	testutil.NoError(t, json.Unmarshal(reqs[0].body, &req))
	got := responsesView(req).results
	testutil.True(t, got["call_other"] == "mcp__other says: "+agenttools.Stub(agenttools.List), "another server's context_list was answered by prunesched: %.200q", got["call_other"])
	testutil.True(t, strings.HasPrefix(got["call_ours"], "prunesched: the "), "prunesched's context_list was not answered: %.200q", got["call_ours"])
}
