package proxy

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/testutil"
)

// convSummary renders everything a parse yields that the proxy uses, with
// absolute offsets, so two parses of one body compare as strings.
func convSummary(c *conversation) string {
	var b strings.Builder
	fmt.Fprintf(&b, "api=%s model=%q stream=%v tools=%v first=%q system=%q bp=%d ttl=%q\n",
		c.api, c.model, c.stream, c.tools, c.firstUser, c.system, c.breakpoints, c.cacheTTL)
	for _, bl := range c.blocks {
		vs, ve := c.span(bl)
		fmt.Fprintf(&b, "%d %s %s text=%q sig=%q call=%q tool=%q in=%q callIn=%q err=%v payload=%q arr=%v val=%d:%d str=%v obj=%d cache=%v cc=%q\n",
			bl.kind, bl.role, bl.item, bl.text, bl.signature, bl.callID, bl.tool, bl.input, bl.callInput, bl.isError,
			bl.payloadText(), bl.rawArr, vs, ve, bl.inputIsString, c.objEndOf(bl), bl.cache, bl.cc)
		if vs >= 0 && (vs > ve || ve > len(c.body)) {
			fmt.Fprintf(&b, "  span out of range\n")
		}
	}
	return b.String()
}

// parseWith parses body as api through pc (nil: no cache), without the
// text check parseChecked adds.
func parseWith(api API, body []byte, pc *parseCache) (*conversation, error) {
	return parseScan(&arrScan{pc: pc, api: api, body: body})
}

// checkReuse parses each body in turn through one cache and compares every
// result (and every error) with a parse without the cache. Each cached
// parse reads its own copy of the body, overwritten once compared (as a
// freed buffer is reused), so a cache that kept a slice of a body would
// parse the next one differently. It returns how many blocks the cached
// parses reused.
func checkReuse(t testing.TB, api API, bodies ...[]byte) (reused int) {
	t.Helper()
	pc := &parseCache{}
	seen := map[*block]bool{}
	for i, body := range bodies {
		fresh, ferr := parseWith(api, body, nil)
		own := bytes.Clone(body)
		var last *parsed
		if len(pc.entries) > 0 {
			last = pc.entries[0]
		}
		got, gerr := parseWith(api, own, pc)
		if len(pc.entries) > 0 && pc.entries[0] != last {
			// The new entry's array is the body's, byte for byte (its
			// copy reuses the replaced entry's buffer).
			e := pc.entries[0]
			testutil.True(t, gerr == nil && got.arrOff+len(e.arr) <= len(body) && bytes.Equal(e.arr, body[got.arrOff:got.arrOff+len(e.arr)]),
				"body %d: the cached array is not the body's:\n%s\n%s", i, e.arr, body)
		}
		scribble := func() { clear(own) }
		if (ferr == nil) != (gerr == nil) || ferr != nil && ferr.Error() != gerr.Error() {
			t.Fatalf("body %d: error %v, with the cache %v", i, ferr, gerr)
		}
		if ferr != nil {
			scribble()
			continue
		}
		if f, g := convSummary(fresh), convSummary(got); f != g {
			t.Fatalf("body %d (%s) differs with the cache:\nfresh:\n%s\ncached:\n%s", i, body, f, g)
		}
		for _, b := range got.blocks {
			if seen[b] {
				reused++
			}
			seen[b] = true
		}
		scribble()
	}
	return reused
}

// anthBody is an Anthropic request with the messages given as JSON
// objects; the last block of the last message gets a breakpoint, as
// Claude Code does.
func anthBody(msgs []string, moveBreakpoint bool) []byte {
	out := append([]string(nil), msgs...)
	if moveBreakpoint && len(out) > 0 {
		last := out[len(out)-1]
		i := strings.LastIndex(last, `}]}`)
		if i > 0 {
			out[len(out)-1] = last[:i] + `,"cache_control":{"type":"ephemeral"}}]}`
		}
	}
	return []byte(`{"model":"m","system":[{"type":"text","text":"sys","cache_control":{"type":"ephemeral","ttl":"1h"}}],"tools":[{"name":"Read"}],"messages":[` + strings.Join(out, ",") + `],"stream":true}`)
}

func TestParseReuseAnthropic(t *testing.T) {
	t.Parallel()
	msgs := []string{`{"role":"user","content":"task"}`}
	var bodies [][]byte
	for i := 0; i < 12; i++ {
		msgs = append(msgs,
			fmt.Sprintf(`{"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"s%d"},{"type":"text","text":"again"},{"type":"tool_use","id":"toolu_%d","name":"Read","input":{"p":%d}}]}`, i%3, i, i),
			fmt.Sprintf(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_%d","content":[{"type":"text","text":"out %d"}]},{"type":"text","text":"again"},{"type":"image","source":{},"cache_control":null}]}`, i, i%4))
		bodies = append(bodies, anthBody(msgs, true))
		if i%4 == 0 {
			bodies = append(bodies, anthBody(msgs, false)) // a retry without the breakpoint
		}
	}
	// A conversation edited half way, another one, and the first again.
	edited := append([]string(nil), msgs...)
	edited[5] = `{"role":"user","content":"changed"}`
	bodies = append(bodies, anthBody(edited, true), anthBody([]string{`{"role":"user","content":"other"}`}, true), anthBody(msgs, true))
	// Whitespace and a malformed tail after a cached prefix.
	good := anthBody(msgs, false)
	bodies = append(bodies, bytes.Replace(good, []byte(`}],"stream"`), []byte("} \n ],\"stream\""), 1),
		append(bytes.TrimSuffix(good, []byte(`],"stream":true}`)), []byte(`,{"role":"user","content":"x"} {"role":"user"}],"stream":true}`)...),
		append(bytes.TrimSuffix(good, []byte(`],"stream":true}`)), []byte(`,{"role":"robot","content":"x"}],"stream":true}`)...))
	n := checkReuse(t, APIAnthropic, bodies...)
	testutil.True(t, n > 0, "no block reused")
	t.Logf("%d blocks reused", n)
}

func TestParseReuseOpenAIChat(t *testing.T) {
	t.Parallel()
	msgs := []string{`{"role":"system","content":[{"type":"image_url"}]}`, `{"role":"user","content":"task"}`}
	var bodies [][]byte
	mk := func(msgs []string) []byte {
		return []byte(`{"model":"gpt","tools":[{"type":"function"}],"messages":[` + strings.Join(msgs, ",") + `]}`)
	}
	for i := 0; i < 10; i++ {
		msgs = append(msgs,
			fmt.Sprintf(`{"role":"assistant","content":"same","tool_calls":[{"id":"call_%d","type":"function","function":{"name":"f%d","arguments":"{\"a\":%d}"}}]}`, i, i, i),
			fmt.Sprintf(`{"role":"tool","tool_call_id":"call_%d","content":"r%d"}`, i/2, i%3))
		if i == 3 {
			msgs = append(msgs, `{"role":"system","content":"late system"}`)
		}
		bodies = append(bodies, mk(msgs))
	}
	n := checkReuse(t, APIOpenAIChat, bodies...)
	testutil.True(t, n > 0, "no block reused")
	t.Logf("%d blocks reused", n)
}

func TestParseReuseOpenAIResponses(t *testing.T) {
	t.Parallel()
	items := []string{`{"type":"message","role":"developer","content":[{"type":"input_text","text":"inst"}]}`, `{"type":"message","role":"user","content":[{"type":"input_text","text":"task"}]}`}
	mk := func(inst string, items []string) []byte {
		return []byte(`{"model":"codex",` + inst + `"tools":[{"type":"function"}],"input":[` + strings.Join(items, ",") + `],"store":false}`)
	}
	var bodies [][]byte
	for i := 0; i < 10; i++ {
		items = append(items,
			fmt.Sprintf(`{"type":"function_call","call_id":"c%d","name":"exec_command","arguments":"{\"cmd\":\"cat f%d\"}"}`, i, i%2),
			fmt.Sprintf(`{"type":"function_call_output","call_id":"c%d","output":"Process exited with code 0\nOutput:\nx%d"}`, i, i%2))
		if i%3 == 0 {
			items = append(items, `{"type":"message","role":"developer","content":"inst"}`)
		}
		bodies = append(bodies, mk(`"instructions":"inst",`, items))
		if i%4 == 0 {
			bodies = append(bodies, mk(`"instructions":"other",`, items), mk(``, items))
		}
	}
	bodies = append(bodies, mk(`"instructions":"inst",`, items)[:40], []byte(`{"input":"just text","tools":[{}]}`))
	n := checkReuse(t, APIOpenAIResponses, bodies...)
	testutil.True(t, n > 0, "no block reused")
	t.Logf("%d blocks reused", n)
}

// TestParseBlocksOwnTheirBytes: blocks are shared by later requests, so
// they must not alias the body they were parsed from.
func TestParseBlocksOwnTheirBytes(t *testing.T) {
	t.Parallel()
	for api, body := range map[API]string{
		APIAnthropic:       `{"tools":[{}],"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"R","input":{"a":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"out","cache_control":{"type":"ephemeral"}}]}]}`,
		APIOpenAIChat:      `{"tools":[{}],"messages":[{"role":"assistant","tool_calls":[{"id":"c1","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":[{"type":"text","text":"out"}]}]}`,
		APIOpenAIResponses: `{"tools":[{}],"input":[{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"out"}]}`,
	} {
		b := []byte(body)
		c, err := parseWith(api, b, &parseCache{})
		testutil.NoError(t, err)
		before := convSummary(c)
		for i := range b {
			b[i] = 'x'
		}
		c.body = []byte(body)
		testutil.True(t, convSummary(c) == before, "%s: blocks alias the body", api)
	}
}

// TestParseCacheShared: requests of one conversation parsed at once
// through one cache (retries, a fleet's proxies' clients) parse as they do
// alone, while the entries they read are replaced and their buffers taken
// over (the race detector sees a buffer written while a lookup reads it).
func TestParseCacheShared(t *testing.T) {
	t.Parallel()
	msgs := []string{`{"role":"user","content":"task"}`}
	var bodies [][]byte
	for i := 0; i < 24; i++ {
		msgs = append(msgs,
			fmt.Sprintf(`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_%d","name":"Read","input":{"p":%d}}]}`, i, i),
			fmt.Sprintf(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_%d","content":"%s"}]}`, i, strings.Repeat("x", 100*i)))
		bodies = append(bodies, anthBody(msgs, true))
	}
	want := make([]string, len(bodies))
	for i, b := range bodies {
		c, err := parseWith(APIAnthropic, b, nil)
		testutil.NoError(t, err)
		want[i] = convSummary(c)
	}
	pc := &parseCache{}
	errs := make(chan error, 4)
	for g := 0; g < 4; g++ {
		go func() {
			for i, b := range bodies {
				own := bytes.Clone(b)
				c, err := parseWith(APIAnthropic, own, pc)
				switch {
				case err != nil:
					errs <- err
					return
				case convSummary(c) != want[i]:
					errs <- fmt.Errorf("body %d parsed differently through the shared cache", i)
					return
				}
				clear(own)
			}
			errs <- nil
		}()
	}
	for g := 0; g < 4; g++ {
		testutil.NoError(t, <-errs)
	}
}

// TestParseCacheBounds: the cache keeps at most parseCacheEntries parses,
// and a parse that reused another replaces it.
func TestParseCacheBounds(t *testing.T) {
	t.Parallel()
	pc := &parseCache{}
	for i := 0; i < parseCacheEntries+10; i++ {
		_, err := parseWith(APIAnthropic, anthBody([]string{fmt.Sprintf(`{"role":"user","content":"task %d"}`, i)}, false), pc)
		testutil.NoError(t, err)
	}
	testutil.True(t, len(pc.entries) == parseCacheEntries, "%d entries", len(pc.entries))
	msgs := []string{`{"role":"user","content":"task 0"}`}
	for i := 0; i < 5; i++ {
		msgs = append(msgs, `{"role":"assistant","content":"x"}`)
		_, err := parseWith(APIAnthropic, anthBody(msgs, true), pc)
		testutil.NoError(t, err)
	}
	n := 0
	for _, e := range pc.entries {
		if bytes.HasPrefix(e.arr, []byte(`[{"role":"user","content":"task 0"}`)) {
			n++
		}
	}
	testutil.True(t, n == 1, "%d entries for one conversation", n)
}

// TestSessionSweep: idle session states are dropped (at most once a
// minute; once a second while there are many); held ones stay.
func TestSessionSweep(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_000_000, 0)
	p := &Proxy{sessions: map[sessionKey]*sessState{}, cfg: Config{Now: func() time.Time { return now }, SessionIdle: DefaultSessionIdle}}
	for i := 0; i < maxSessions; i++ {
		p.state("t", fmt.Sprintf("s%d", i))
	}
	old := now.Add(-2 * DefaultSessionIdle)
	for _, st := range p.sessions {
		st.lastUse = old
	}
	held := p.sessions[sessionKey{"t", "s1"}]
	held.mu.Lock()
	p.state("t", "new")
	testutil.True(t, len(p.sessions) == maxSessions+1, "swept within the second: %d sessions", len(p.sessions))
	now = now.Add(time.Second)
	p.state("t", "new")
	held.mu.Unlock()
	testutil.True(t, len(p.sessions) == 2 && p.sessions[sessionKey{"t", "s1"}] == held, "%d sessions left", len(p.sessions))
	// Few sessions: swept once a minute.
	now = now.Add(DefaultSessionIdle)
	testutil.True(t, p.EvictIdle() == 2 && len(p.sessions) == 0, "%d sessions left", len(p.sessions))
}

// FuzzParseReuse: a body parsed after another (whose parse it may reuse)
// parses exactly as it does alone.
func FuzzParseReuse(f *testing.F) {
	a := anthBody([]string{`{"role":"user","content":"task"}`, `{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"tool_use","id":"t1","name":"R","input":{}}]}`}, true)
	b := anthBody([]string{`{"role":"user","content":"task"}`, `{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"tool_use","id":"t1","name":"R","input":{}}]}`, `{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"o"},{"type":"text","text":"task"}]}`}, true)
	f.Add(uint8(0), a, b)
	f.Add(uint8(1), []byte(`{"tools":[{}],"messages":[{"role":"system","content":"s"},{"role":"assistant","tool_calls":[{"id":"c1","function":{"name":"f","arguments":"{}"}}]}]}`),
		[]byte(`{"tools":[{}],"messages":[{"role":"system","content":"s"},{"role":"assistant","tool_calls":[{"id":"c1","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"r"},{"role":"system","content":"s"}]}`))
	f.Add(uint8(2), []byte(`{"instructions":"i","tools":[{}],"input":[{"role":"developer","content":"i"},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}]}`),
		[]byte(`{"instructions":"i","tools":[{}],"input":[{"role":"developer","content":"i"},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"o"},{"role":"developer","content":"i"}]}`))
	apis := []API{APIAnthropic, APIOpenAIChat, APIOpenAIResponses}
	f.Fuzz(func(t *testing.T, api uint8, a, b []byte) {
		checkReuse(t, apis[int(api)%len(apis)], a, b, a)
	})
}

// TestParseCheckedText: parseChecked refuses exactly the bodies
// events.CheckText refuses, with its error, whether the body's prefix was
// reused from a checked body or not, and never caches a refused body.
// Strings after the reused prefix (in the array, and after it) are checked;
// a prefix that needed the full check (a surrogate pair) is not trusted.
func TestParseCheckedText(t *testing.T) {
	t.Parallel()
	msg := func(text string) string {
		return `{"role":"user","content":[{"type":"text","text":"` + text + `"}]}`
	}
	base := []string{msg("task"), `{"role":"assistant","content":[{"type":"text","text":"ok"}]}`}
	with := func(prefix []string, more ...string) []string {
		return append(append([]string(nil), prefix...), more...)
	}
	pair := with(base, msg(`smile \ud83d\ude00`))
	cases := []struct {
		name  string
		first []string // parsed (and cached) first, when set
		body  []byte
	}{
		{"plain after plain prefix", base, anthBody(with(base, msg("next")), false)},
		{"bad UTF-8 after plain prefix", base, anthBody(with(base, msg("bad \xff byte")), false)},
		{"lone surrogate after plain prefix", base, anthBody(with(base, msg(`lone \ud800 x`)), false)},
		{"pair after plain prefix", base, anthBody(pair, false)},
		{"lone surrogate after pair prefix", pair, anthBody(with(pair, msg(`lone \udc00`)), false)},
		{"plain after pair prefix", pair, anthBody(with(pair, msg("next")), false)},
		{"bad UTF-8 after the array", base, []byte(strings.Replace(string(anthBody(with(base, msg("next")), false)), `"stream":true`, `"stream":true,"x":"`+"\xfe"+`"`, 1))},
		{"bad UTF-8 in a malformed body", base, []byte(strings.TrimSuffix(string(anthBody(with(base, msg("bad \xff")), false)), "}"))},
		{"no prefix, bad UTF-8", nil, anthBody([]string{msg("bad \xc3")}, false)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pc := &parseCache{}
			if tc.first != nil {
				_, err := parseChecked(APIAnthropic, anthBody(tc.first, false), pc)
				testutil.NoError(t, err)
			}
			before := append([]*parsed(nil), pc.entries...)
			_, err := parseChecked(APIAnthropic, tc.body, pc)
			want := events.CheckText(tc.body)
			if want != nil {
				testutil.True(t, err != nil && err.Error() == want.Error(), "parseChecked error %v, want CheckText's %v", err, want)
				testutil.True(t, len(pc.entries) == len(before) && (len(before) == 0 || pc.entries[0] == before[0]), "a refused body was cached")
				return
			}
			testutil.NoError(t, err)
			// Cached, trusted as plain only when the whole body is.
			testutil.True(t, len(pc.entries) > 0 && pc.entries[0].plain == events.PlainText(tc.body),
				"cached plain=%v, body plain=%v", len(pc.entries) > 0 && pc.entries[0].plain, events.PlainText(tc.body))
		})
	}
}

// FuzzParseChecked: a body parsed with parseChecked after another (whose
// checked parse it may reuse) is refused exactly when events.CheckText
// refuses it, with its error; otherwise it parses as it does alone.
func FuzzParseChecked(f *testing.F) {
	a := anthBody([]string{`{"role":"user","content":"task"}`, `{"role":"assistant","content":[{"type":"text","text":"ok"}]}`}, false)
	f.Add(uint8(0), a, anthBody([]string{`{"role":"user","content":"task"}`, `{"role":"assistant","content":[{"type":"text","text":"ok"}]}`, `{"role":"user","content":"x \ud800"}`}, false))
	f.Add(uint8(0), a, anthBody([]string{`{"role":"user","content":"task"}`, `{"role":"assistant","content":[{"type":"text","text":"ok"}]}`, "{\"role\":\"user\",\"content\":\"\xff\"}"}, false))
	f.Add(uint8(1), []byte(`{"tools":[{}],"messages":[{"role":"system","content":"s \ud83d\ude00"}]}`),
		[]byte(`{"tools":[{}],"messages":[{"role":"system","content":"s \ud83d\ude00"},{"role":"user","content":"\udfff"}]}`))
	apis := []API{APIAnthropic, APIOpenAIChat, APIOpenAIResponses}
	f.Fuzz(func(t *testing.T, api uint8, a, b []byte) {
		ap := apis[int(api)%len(apis)]
		pc := &parseCache{}
		_, _ = parseChecked(ap, a, pc)
		got, err := parseChecked(ap, b, pc)
		if terr := events.CheckText(b); terr != nil {
			if err == nil || err.Error() != terr.Error() {
				t.Fatalf("parseChecked error %v, want CheckText's %v", err, terr)
			}
			return
		}
		alone, aerr := parseChecked(ap, b, nil)
		if (err == nil) != (aerr == nil) {
			t.Fatalf("after a: err %v; alone: err %v", err, aerr)
		}
		if err == nil && convSummary(got) != convSummary(alone) {
			t.Fatalf("parse after a differs from alone:\n%s\nvs\n%s", convSummary(got), convSummary(alone))
		}
	})
}
