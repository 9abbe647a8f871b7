package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/testutil"
)

// convClient plays a minimal Anthropic client: one credential, optional
// session header, non-streamed answers, full history every turn.
type convClient struct {
	t        *testing.T
	url      string
	key      string
	session  string
	messages []map[string]any
}

// send sends the history and appends the answer to it.
func (c *convClient) send() map[string]any {
	c.t.Helper()
	body, err := json.Marshal(map[string]any{
		"model": "claude-test-1", "max_tokens": 100, "system": "You are a test agent.",
		"tools":    []any{map[string]any{"name": "Read", "input_schema": map[string]any{"type": "object"}}},
		"messages": c.messages,
	})
	testutil.NoError(c.t, err)
	req, err := http.NewRequest("POST", c.url+"/v1/messages", bytes.NewReader(body))
	testutil.NoError(c.t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-api-key", c.key)
	if c.session != "" {
		req.Header.Set("X-Claude-Code-Session-Id", c.session)
	}
	resp, err := http.DefaultClient.Do(req)
	testutil.NoError(c.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	testutil.NoError(c.t, err)
	testutil.True(c.t, resp.StatusCode == 200, "status %d: %s", resp.StatusCode, raw)
	var out map[string]any
	testutil.NoError(c.t, json.Unmarshal(raw, &out))
	c.messages = append(c.messages, map[string]any{"role": "assistant", "content": out["content"]})
	return out
}

func (c *convClient) user(blocks ...map[string]any) {
	c.messages = append(c.messages, map[string]any{"role": "user", "content": blocks})
}

// userScript answers the first request of a conversation with a read of
// a.txt whose tool call id names the user (toolu_AAA1 for key A,
// toolu_BBB1 for key B), and any later request with text.
func userScript(keys map[string]string) func(http.Header, map[string]any) turn {
	return func(h http.Header, req map[string]any) turn {
		if countToolResults(req) == 0 {
			if msgs, _ := req["messages"].([]any); len(msgs) == 1 {
				return turn{tool: "Read", id: "toolu_" + keys[h.Get("x-api-key")] + "1", input: map[string]any{"file_path": "/p/a.txt"}}
			}
		}
		return turn{text: "noted"}
	}
}

// TestTwoUsersSameOpening is the two-users case of issue 15: two API keys,
// the same system prompt and first message, no session header. Each user
// gets a session of their own: B's identical read never prunes A's, and
// nothing of B's conversation reaches A's requests.
func TestTwoUsersSameOpening(t *testing.T) {
	t.Parallel()
	const keyA, keyB = "sk-ant-SECRET-user-a-111", "sk-ant-SECRET-user-b-222"
	f := &fakeUpstream{}
	b := setup(t, testPolicy(t), anthropicFakeH(f, userScript(map[string]string{keyA: "AAA", keyB: "BBB"})), nil)
	content := strings.Repeat("the same file, read by both users\n", 30)
	a := &convClient{t: t, url: b.url, key: keyA}
	bb := &convClient{t: t, url: b.url, key: keyB}
	// B reads first: in a shared session A's identical read would be the
	// newcomer, pruned in favour of B's copy.
	for _, c := range []*convClient{bb, a} {
		c.user(map[string]any{"type": "text", "text": "read a.txt"})
		out := c.send()
		id := out["content"].([]any)[0].(map[string]any)["id"].(string)
		c.user(map[string]any{"type": "tool_result", "tool_use_id": id, "content": content})
		c.send()
	}
	// A's next request.
	a.user(map[string]any{"type": "text", "text": "and now?"})
	a.send()

	sa, sb := b.sessionsOf(t, events.DefaultTenant, "toolu_AAA1"), b.sessionsOf(t, events.DefaultTenant, "toolu_BBB1")
	testutil.True(t, len(sa) == 1 && len(sb) == 1 && sa[0] != sb[0], "A's read in sessions %v, B's in %v: want one session each", sa, sb)
	itemsA := b.items(t, events.DefaultTenant, sa[0])
	testutil.True(t, itemByID(itemsA, "toolu_BBB1") == nil, "B's read in A's session")
	a1 := itemByID(itemsA, "toolu_AAA1")
	testutil.True(t, a1 != nil && !a1.Pruned, "A's only copy pruned: %+v", a1)
	for _, d := range b.decisions(t, events.DefaultTenant, sa[0]) {
		testutil.True(t, !(d.Item == "toolu_AAA1" && d.Decision == events.Prune), "A's read marked: %+v", d)
	}
	for i, r := range f.requests() {
		switch r.header.Get("x-api-key") {
		case keyA:
			testutil.True(t, !bytes.Contains(r.body, []byte("BBB")), "request %d of A mentions B's conversation:\n%s", i, r.body)
		case keyB:
			testutil.True(t, !bytes.Contains(r.body, []byte("AAA")), "request %d of B mentions A's conversation:\n%s", i, r.body)
		}
	}
	// The credential is neither logged nor stored; only its tag is.
	for _, s := range []string{sa[0], sb[0]} {
		evs, err := b.svc.Store.ReadSession(context.Background(), events.DefaultTenant, s)
		testutil.NoError(t, err)
		all, err := json.Marshal(evs)
		testutil.NoError(t, err)
		for _, k := range []string{keyA, keyB, "SECRET"} {
			testutil.True(t, !bytes.Contains(all, []byte(k)), "credential %q stored in session %s", k, s)
			testutil.True(t, !strings.Contains(b.logs.String(), k), "credential %q logged", k)
		}
	}
}

// TestSessionHeaderTwoCredentials: the same client session header sent
// with two credentials is two sessions; without a credential it is the
// header value itself.
func TestSessionHeaderTwoCredentials(t *testing.T) {
	t.Parallel()
	const keyA, keyB = "sk-ant-SECRET-user-a-111", "sk-ant-SECRET-user-b-222"
	f := &fakeUpstream{}
	b := setup(t, testPolicy(t), anthropicFakeH(f, userScript(map[string]string{keyA: "AAA", keyB: "BBB", "": "NNN"})), nil)
	for _, key := range []string{keyA, keyB, ""} {
		c := &convClient{t: t, url: b.url, key: key, session: "shared-session"}
		c.user(map[string]any{"type": "text", "text": "read a.txt"})
		out := c.send()
		id := out["content"].([]any)[0].(map[string]any)["id"].(string)
		c.user(map[string]any{"type": "tool_result", "tool_use_id": id, "content": "same content"})
		c.send()
	}
	hA, hB := http.Header{}, http.Header{}
	hA.Set("x-api-key", keyA)
	hB.Set("x-api-key", keyB)
	sA, sB := b.session("shared-session", hA), b.session("shared-session", hB)
	testutil.True(t, sA != sB && strings.HasPrefix(sA, "shared-session-k") && len(sA) == len("shared-session-k")+12, "sessions %q %q", sA, sB)
	got := map[string][]string{}
	for _, id := range []string{"toolu_AAA1", "toolu_BBB1", "toolu_NNN1"} {
		got[id] = b.sessionsOf(t, events.DefaultTenant, id)
	}
	testutil.True(t, len(got["toolu_AAA1"]) == 1 && got["toolu_AAA1"][0] == sA, "A's call in %v, want %s", got["toolu_AAA1"], sA)
	testutil.True(t, len(got["toolu_BBB1"]) == 1 && got["toolu_BBB1"][0] == sB, "B's call in %v, want %s", got["toolu_BBB1"], sB)
	testutil.True(t, len(got["toolu_NNN1"]) == 1 && got["toolu_NNN1"][0] == "shared-session", "no-credential call in %v", got["toolu_NNN1"])
}

// TestCredentialTag: the tag is deterministic for a key and a credential,
// differs across keys and credentials, and covers Authorization too.
func TestCredentialTag(t *testing.T) {
	t.Parallel()
	mk := func(key []byte) *Proxy {
		p, err := New(Config{Upstream: "http://127.0.0.1:1", Backend: &failingBackend{}, IdentityKey: key})
		testutil.NoError(t, err)
		return p
	}
	k1 := bytes.Repeat([]byte{1}, 32)
	p1, p1b, p2 := mk(k1), mk(k1), mk(bytes.Repeat([]byte{2}, 32))
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			out.Set(kv[i], kv[i+1])
		}
		return out
	}
	x := h("x-api-key", secretKey)
	testutil.True(t, p1.credentialTag(x) == p1b.credentialTag(x), "same key, same credential: tags differ")
	testutil.True(t, p1.credentialTag(x) != p2.credentialTag(x), "another key gives the same tag")
	testutil.True(t, p1.credentialTag(x) != p1.credentialTag(h("x-api-key", secretKey+"x")), "another credential gives the same tag")
	testutil.True(t, p1.credentialTag(h("Authorization", secretAuth)) != p1.credentialTag(h("Authorization", "Bearer other")), "bearer tokens not told apart")
	testutil.True(t, p1.credentialTag(h()) == "" && p1.credentialTag(h("Accept", "x")) == "", "no credential must give no tag")
	testutil.True(t, !strings.Contains(p1.credentialTag(x), secretKey), "tag holds the key")
	// Nil key: New makes a random one.
	r1, r2 := mk(nil), mk(nil)
	testutil.True(t, r1.credentialTag(x) != r2.credentialTag(x), "random keys gave the same tag")
	_, err := New(Config{Upstream: "http://127.0.0.1:1", Backend: &failingBackend{}, IdentityKey: []byte("short")})
	testutil.True(t, err != nil && strings.Contains(err.Error(), "IdentityKey"), "short key accepted: %v", err)
}

// TestIdentityKeyFile: the key is created once with mode 0600 and reused;
// a key others can read is refused.
func TestIdentityKeyFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "proxy-identity.key")
	k1, err := LoadOrCreateIdentityKey(path)
	testutil.NoError(t, err)
	testutil.True(t, len(k1) == IdentityKeySize, "key size %d", len(k1))
	fi, err := os.Stat(path)
	testutil.NoError(t, err)
	testutil.True(t, fi.Mode().Perm() == 0o600, "mode %v", fi.Mode().Perm())
	k2, err := LoadOrCreateIdentityKey(path)
	testutil.NoError(t, err)
	testutil.True(t, bytes.Equal(k1, k2), "key changed at reload")
	testutil.NoError(t, os.Chmod(path, 0o644))
	_, err = LoadOrCreateIdentityKey(path)
	testutil.True(t, err != nil && strings.Contains(err.Error(), "chmod 600"), "readable key accepted: %v", err)
	bad := filepath.Join(dir, "bad.key")
	testutil.NoError(t, os.WriteFile(bad, []byte("not hex\n"), 0o600))
	_, err = LoadOrCreateIdentityKey(bad)
	testutil.True(t, err != nil && strings.Contains(err.Error(), bad), "bad key accepted: %v", err)
	entries, err := os.ReadDir(filepath.Join(dir, "sub"))
	testutil.NoError(t, err)
	testutil.True(t, len(entries) == 1, "temporary files left: %v", entries)
}
