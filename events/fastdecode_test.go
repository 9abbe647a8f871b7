package events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prunesched/prunesched/events/internal/fastgen"
	"github.com/prunesched/prunesched/internal/testutil"
)

// sampleFiles are the sessions checked in across the repository.
var sampleFiles = []string{
	"testdata/sample.jsonl",
	"../examples/sample-session.jsonl",
	"../projections/testdata/session.jsonl",
}

// sampleLines returns every event line of the sample sessions.
func sampleLines(tb testing.TB) [][]byte {
	tb.Helper()
	var out [][]byte
	for _, f := range sampleFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		for _, l := range bytes.Split(b, []byte("\n")) {
			l = bytes.TrimSpace(l)
			if len(l) > 0 && l[0] != '#' {
				out = append(out, l)
			}
		}
	}
	return out
}

// fullEvents returns events of every type with every payload field set,
// strings holding what json.Marshal escapes.
func fullEvents() []Event {
	at := time.Date(2026, 11, 30, 9, 0, 0, 123456789, time.FixedZone("x", 3600))
	hash := HashBytes([]byte("x"))
	out := "line 1\n\t\"quoted\" <tag> & \\ back\u2028sep\u2029 é 漢 \U0001F600 \x01 \x7f"
	code := -2
	ps := []Payload{
		&SessionStarted{Format: "native", SourcePath: "/a b/c.jsonl", SourceID: "sid", Agent: "claude", CWD: "/repo", Provider: "anthropic", Model: "m", Title: "T <1> & \"2\""},
		&Message{Item: "m1", Role: RoleAssistant, Kind: KindThinking, Text: out, Signature: "sig==", Tokens: 12, TokensExact: 11, Meta: true},
		&ToolCall{Item: "c1/input", CallID: "c1", Tool: "Read", Input: json.RawMessage(`{"a":[1,2.5e-3,true,false,null,{"b":"x\"y\u00e9"}],"c":""}`), InputTokens: 7, InputTokensExact: 9},
		&ToolCall{Item: "c2/input", CallID: "c2", Tool: "Bash", Input: json.RawMessage(`"just a string"`)},
		&ToolCall{Item: "c3/input", CallID: "c3", Tool: "Bash", Input: json.RawMessage(`-12.5E+3`)},
		&ToolResult{Item: "c1", CallID: "c1", Tool: "Read", IsError: true, Error: &ToolError{Type: "exit_code", Message: "boom\n"}, Output: &out,
			Source:      &SourceIdentity{Kind: "file", Path: "/p", URL: "http://x/?a=1&b=2", Version: "v1", ContentHash: hash, Offset: 3, Limit: 9},
			Determinism: DeterminismState, ExitCode: &code, HostPruned: true},
		&ToolResult{Item: "c2", CallID: "c2", OutputRef: &ContentRef{Hash: hash, Bytes: 1 << 40, Tokens: 512, TokensExact: 498}},
		&SubtaskOpened{Subtask: "st1", Title: "do it"},
		&SubtaskClosed{Subtask: "st1", VerifiedBy: &Verification{Kind: "test_run", Item: "c1", Detail: "ok"}, Consequence: []string{"m1", "c1", ""}},
		&Pin{Item: "m1", By: "me", Reason: "why"},
		&Unpin{Item: "m1", By: "me"},
		&ModelRequest{Request: "r1", Provider: "anthropic", Model: "m", Usage: &Usage{InputTokens: 1, CacheReadTokens: 2, CacheWriteTokens: 3, CacheWrite1hTokens: 4, OutputTokens: 5}, CacheTTL: "1h", SourceID: "req_1"},
		&Mark{Item: "c1", Decision: Prune, Rung: L0, Reason: ReasonDuplicateOutput, Part: "output",
			Evidence:        []Evidence{{Kind: "content_hash", Item: "c2", Hash: hash, Value: "v", Detail: "d"}, {Kind: "k"}},
			Recoverability:  &Recoverability{Log: "e1", Blob: hash, Source: "/p@v1", Survivor: "c2", Command: "prunesched restore c1"},
			Protection:      []Reason{ReasonPinned, ReasonRecentTurn},
			Residue:         &Residue{Tool: "Read", ErrorType: "t", ErrorMessage: "msg", Skeleton: "{a}"},
			TokensEstimated: 500, Cause: "e1", CauseIndex: 4, PolicyVersion: "pv1", By: "eligibility"},
		&Mark{Item: "c2", Decision: Keep, Reason: ReasonSurvivingCopy, Evidence: []Evidence{{Kind: "surviving_copy", Hash: hash}},
			Cause: "e2", CauseIndex: 5, PolicyVersion: "pv1"},
		&Mark{Item: "c1", Decision: Abstain, Reason: ReasonDifferentOutput, Part: "output",
			Evidence: []Evidence{{Kind: "canonical_args", Item: "c2", Value: `{"command":"go test ./..."}`}, {Kind: "content_hash", Hash: hash}, {Kind: "span", Value: "1-4=2-5"}},
			Cause:    "e3", CauseIndex: 6, PolicyVersion: "pv1", By: "eligibility"},
		&Application{Request: "r1", Marks: []string{"k1", "k2"}, Items: []string{"c1", "c2"}, Trigger: TriggerBreakEven, FirstDivergence: 10, MutationRadius: 20,
			TokensRemoved: 30, PlaceholderTokens: 4, CacheCost: 0.0012345, ExpectedSaving: 1e21, AfterIndex: 9, PolicyVersion: "pv1"},
		&Application{Request: "r2", Marks: []string{"k1"}, Items: []string{"c1"}, Trigger: TriggerManual, CacheCost: 1e-7, ExpectedSaving: -0.5, PolicyVersion: "pv1"},
		&Restore{Item: "c1", By: "me", Reason: "needed"},
		&HostCompaction{Host: "claude-code", SourceID: "x", PreTokens: 150000},
		&PruneRequest{Item: "c1", By: "me", Reason: "noise"},
		&FlushRequest{By: "me", Reason: "now"},
	}
	evs := make([]Event, len(ps))
	for i, p := range ps {
		tenant := ""
		if i%2 == 0 {
			tenant = "acme_1"
		}
		evs[i] = New("e-"+string(p.EventType()), tenant, "s-1", at.Add(time.Duration(i)*time.Second), p)
	}
	return evs
}

// checkFast fails when decodeFast accepts b and the strict decoder does
// not, or decodes it differently.
func checkFast(t *testing.T, b []byte) (accepted bool) {
	t.Helper()
	fe, ok := decodeFast(b)
	if !ok {
		return false
	}
	se, err := decodeSlow(b)
	if err != nil {
		t.Fatalf("fast path accepted what the strict decoder rejects (%v):\n%s", err, b)
	}
	if !reflect.DeepEqual(fe, se) {
		t.Fatalf("fast and strict decoders differ on\n%s\nfast:   %#v\nstrict: %#v", b, fe, se)
	}
	return true
}

// TestFastDecodeRoundTrip: every canonical encoding, of every sample event
// and of events with every field set, takes the fast path and decodes to
// what the strict decoder gives.
func TestFastDecodeRoundTrip(t *testing.T) {
	var evs []Event
	for _, l := range sampleLines(t) {
		checkFast(t, l) // input form: may or may not take the fast path
		e, err := Decode(l)
		if err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		evs = append(evs, e)
	}
	evs = append(evs, fullEvents()...)
	seen := map[Type]bool{}
	for _, e := range evs {
		b, err := Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		if !checkFast(t, b) {
			t.Fatalf("canonical encoding not taken by the fast path:\n%s", b)
		}
		// What the store writes (EncodeValidated) takes the fast path too.
		if v, err := EncodeValidated(e); err != nil || !checkFast(t, v) {
			t.Fatalf("EncodeValidated bytes not taken by the fast path (%v):\n%s", err, v)
		}
		got, _ := decodeFast(b)
		again, err := Encode(got)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("re-encoding changed bytes (%v):\n%s\n%s", err, b, again)
		}
		seen[e.Type] = true
	}
	for _, typ := range Types {
		if !seen[typ] {
			t.Errorf("no event of type %s checked", typ)
		}
	}
}

// TestFastEventsSetEveryField keeps fullEvents honest: each payload field
// (and each field of a nested struct) is non-zero in some event.
func TestFastEventsSetEveryField(t *testing.T) {
	set := map[string]bool{}
	var walk func(prefix string, v reflect.Value)
	walk = func(prefix string, v reflect.Value) {
		for v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return
			}
			v = v.Elem()
		}
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Struct {
			for i := 0; i < v.Len(); i++ {
				walk(prefix, v.Index(i))
			}
			return
		}
		if v.Kind() != reflect.Struct {
			return
		}
		for i := 0; i < v.NumField(); i++ {
			name := prefix + "." + v.Type().Field(i).Name
			if !v.Field(i).IsZero() {
				set[name] = true
			}
			walk(name, v.Field(i))
		}
	}
	var need []string
	var list func(prefix string, t reflect.Type)
	list = func(prefix string, t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return
		}
		for i := 0; i < t.NumField(); i++ {
			name := prefix + "." + t.Field(i).Name
			need = append(need, name)
			list(name, t.Field(i).Type)
		}
	}
	for _, e := range fullEvents() {
		walk(string(e.Type), reflect.ValueOf(e.Data))
	}
	for _, typ := range Types {
		p, _ := newPayload(typ)
		list(string(typ), reflect.TypeOf(p))
	}
	for _, n := range need {
		if n == "tool_result.OutputBase64" {
			continue // wire form only: decoding moves it into Output
		}
		if !set[n] {
			t.Errorf("fullEvents never sets %s", n)
		}
	}
}

// TestFastFieldsCoverStructs checks the fast field tables against the json
// tags: same keys, same order. A key the struct lost would otherwise be
// accepted by the fast path and rejected by the strict decoder.
func TestFastFieldsCoverStructs(t *testing.T) {
	keys := func(t reflect.Type) []string {
		var out []string
		for i := 0; i < t.NumField(); i++ {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
			out = append(out, name)
		}
		return out
	}
	tableKeys := func(fields any) []string {
		v := reflect.ValueOf(fields)
		var out []string
		for i := 0; i < v.Len(); i++ {
			q := v.Index(i).Field(0).String() // quoteKey's form
			k := strings.TrimSuffix(strings.TrimPrefix(q, `"`), `":`)
			if quoteKey(k) != q {
				t.Errorf("fast field key %q is not in quoteKey's form", q)
			}
			out = append(out, k)
		}
		return out
	}
	cases := []struct {
		typ    any
		fields any
	}{
		{SessionStarted{}, sessionStartedFields},
		{Message{}, messageFields},
		{ToolCall{}, toolCallFields},
		{ToolError{}, toolErrorFields},
		{ContentRef{}, contentRefFields},
		{SourceIdentity{}, sourceIdentityFields},
		{ToolResult{}, toolResultFields},
		{Verification{}, verificationFields},
		{SubtaskOpened{}, subtaskOpenedFields},
		{SubtaskClosed{}, subtaskClosedFields},
		{Pin{}, pinFields},
		{Unpin{}, unpinFields},
		{Usage{}, usageFields},
		{ModelRequest{}, modelRequestFields},
		{Evidence{}, evidenceFields},
		{Recoverability{}, recoverabilityFields},
		{Residue{}, residueFields},
		{Mark{}, markFields},
		{Application{}, applicationFields},
		{Restore{}, restoreFields},
		{HostCompaction{}, hostCompactionFields},
		{PruneRequest{}, pruneRequestFields},
		{FlushRequest{}, flushRequestFields},
	}
	covered := map[reflect.Type]bool{}
	for _, c := range cases {
		rt := reflect.TypeOf(c.typ)
		covered[rt] = true
		if got, want := tableKeys(c.fields), keys(rt); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: fast fields %q, json keys %q", rt.Name(), got, want)
		}
	}
	// Every payload type and every struct inside one has a table.
	var check func(rt reflect.Type)
	check = func(rt reflect.Type) {
		for rt.Kind() == reflect.Pointer || rt.Kind() == reflect.Slice {
			rt = rt.Elem()
		}
		if rt.Kind() != reflect.Struct {
			return
		}
		if !covered[rt] {
			t.Errorf("no fast field table for %s", rt.Name())
		}
		for i := 0; i < rt.NumField(); i++ {
			check(rt.Field(i).Type)
		}
	}
	for _, typ := range Types {
		p, _ := newPayload(typ)
		check(reflect.TypeOf(p))
	}
	// The envelope keys decodeFast reads, in order.
	if got, want := keys(reflect.TypeOf(wireEvent{})), []string{"v", "id", "type", "tenant", "session", "time", "data"}; !reflect.DeepEqual(got, want) {
		t.Errorf("envelope keys %q, decodeFast reads %q", got, want)
	}
}

// TestFastDecodeFallsBack: deviations from the canonical form are left to
// the strict decoder, which gives its own result or error.
func TestFastDecodeFallsBack(t *testing.T) {
	good := `{"v":1,"id":"e1","type":"message","session":"s","time":"2026-11-30T10:00:00Z","data":{"item":"m","role":"user","text":"hi"}}`
	if !checkFast(t, []byte(good)) {
		t.Fatal("canonical input not taken by the fast path")
	}
	cases := []string{
		" " + good,
		good + " ",
		good + "\n",
		strings.Replace(good, `"id":"e1",`, ``, 1) + ``,
		strings.Replace(good, `{"v":1,"id":"e1"`, `{"id":"e1","v":1`, 1),
		strings.Replace(good, `"v":1`, `"V":1`, 1),
		strings.Replace(good, `"v":1`, `"v":1.0`, 1),
		strings.Replace(good, `"v":1`, `"v":01`, 1),
		strings.Replace(good, `"v":1`, `"v":null`, 1),
		strings.Replace(good, `"item":"m"`, `"ITEM":"m"`, 1),
		strings.Replace(good, `"item":"m"`, `"item":"m","item":"m"`, 1),
		strings.Replace(good, `"item":"m"`, `"it\u0065m":"m"`, 1),
		strings.Replace(good, `"role":"user"`, `"role":"user","colour":1`, 1),
		strings.Replace(good, `"text":"hi"`, `"text":null`, 1),
		strings.Replace(good, `"text":"hi"`, `"text":"\ud83d\ude00"`, 1),
		strings.Replace(good, `"text":"hi"`, `"text":"\ud83d"`, 1),
		strings.Replace(good, `"text":"hi"`, "\"text\":\"h\xffi\"", 1),
		strings.Replace(good, `"text":"hi"`, "\"text\":\"h\ti\"", 1),
		strings.Replace(good, `"text":"hi"`, `"text":"h\'i"`, 1),
		strings.Replace(good, `"text":"hi"`, `"text":"hi","tokens":-0`, 1),
		strings.Replace(good, `"text":"hi"`, `"text":"hi","tokens":1e2`, 1),
		strings.Replace(good, `"text":"hi"`, `"text":"hi","tokens":99999999999999999999`, 1),
		strings.Replace(good, `"text":"hi"`, `"text":"hi","tokens":9223372036854775807`, 1),
		strings.Replace(good, `"text":"hi"`, `"text":"hi","meta":false`, 1),
		strings.Replace(good, `"2026-11-30T10:00:00Z"`, `"2026-11-30T10:00:00\u005a"`, 1),
		strings.Replace(good, `"2026-11-30T10:00:00Z"`, `"2026-11-30T11:00:00+01:00"`, 1),
		strings.Replace(good, `"2026-11-30T10:00:00Z"`, `"2026-11-30 10:00:00Z"`, 1),
		strings.Replace(good, `"session":"s"`, `"tenant":"","session":"s"`, 1),
		strings.Replace(good, `}}`, `} }`, 1),
		strings.Replace(good, `}}`, `}}}`, 1),
		good[:len(good)-1],
	}
	for _, c := range cases {
		checkFast(t, []byte(c))
		// Errors are the strict decoder's.
		_, err1 := Decode([]byte(c))
		_, err2 := decodeSlow([]byte(c))
		if (err1 == nil) != (err2 == nil) || err1 != nil && err1.Error() != err2.Error() {
			t.Errorf("%s: Decode error %v, strict error %v", c, err1, err2)
		}
	}
}

// FuzzFastDecode compares the fast path with the strict decoder on
// arbitrary input: whatever the fast path accepts, the strict decoder
// accepts and decodes to an equal Event. And whatever the strict decoder
// accepts, re-encoded, the fast path accepts.
func FuzzFastDecode(f *testing.F) {
	for _, l := range sampleLines(f) {
		f.Add(l)
		if e, err := Decode(l); err == nil {
			if b, err := Encode(e); err == nil {
				f.Add(b)
			}
		}
	}
	for _, e := range fullEvents() {
		b, err := Encode(e)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkFast(t, b)
		e, err := decodeSlow(b)
		if err != nil {
			return
		}
		c, err := Encode(e)
		if err != nil {
			t.Fatalf("decoded event does not encode: %v", err)
		}
		if !checkFast(t, c) {
			t.Fatalf("canonical encoding not taken by the fast path:\n%s", c)
		}
	})
}

// The regular expressions validID and ValidToken were written from.
var (
	idRe    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@+=-]{0,199}$`)
	tokenRe = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)
)

func TestValidIDMatchesRegexp(t *testing.T) {
	cases := []string{"", "a", "-a", "a-", "_a", "a_b", "A.b:c/d@e+f=g-h", "a b", "é", "a\xff", "a\n", "a$", "a#b", "a,b",
		strings.Repeat("a", 128), strings.Repeat("a", 129), strings.Repeat("a", 200), strings.Repeat("a", 201)}
	for c := byte(0); c < 0x80; c++ {
		cases = append(cases, string([]byte{c}), "a"+string([]byte{c}), "a"+string([]byte{c})+"b")
	}
	for _, s := range cases {
		if got, want := validID(s), idRe.MatchString(s); got != want {
			t.Errorf("validID(%q) = %v, regexp says %v", s, got, want)
		}
		if got, want := ValidToken(s), tokenRe.MatchString(s); got != want {
			t.Errorf("ValidToken(%q) = %v, regexp says %v", s, got, want)
		}
	}
}

func FuzzValidID(f *testing.F) {
	f.Add("a-b.c")
	f.Add("toolu_01/input")
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := validID(s), idRe.MatchString(s); got != want {
			t.Errorf("validID(%q) = %v, regexp says %v", s, got, want)
		}
		if got, want := ValidToken(s), tokenRe.MatchString(s); got != want {
			t.Errorf("ValidToken(%q) = %v, regexp says %v", s, got, want)
		}
	})
}

// TestFastDecodeMutations mutates every byte of every canonical encoding
// (deleted, doubled, replaced by bytes that matter to JSON) and checks
// that whatever the fast path still accepts, the strict decoder decodes
// the same way.
//
// Under -race it mutates every third byte of each encoding (a different
// third for each event, so that every kind of position is still mutated
// somewhere): the detector adds nothing to this single goroutine and
// makes every byte cost seconds (9 s in a loaded race stage); .ci/run's
// stage "full input sets, without -race" mutates every byte.
func TestFastDecodeMutations(t *testing.T) {
	stride := 1
	if testutil.Race {
		stride = 3
	}
	var raws [][]byte
	for _, e := range fullEvents() {
		b, err := Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		raws = append(raws, b)
	}
	repl := []byte{' ', '"', '\\', ',', ':', '{', '}', '[', ']', '0', '1', '-', '.', 'e', 'n', 'u', 'A', 0, 0x1f, 0x80, 0xff}
	accepted, tried := 0, 0
	for k, b := range raws {
		for i := range b {
			if i%stride != k%stride {
				continue
			}
			var muts [][]byte
			muts = append(muts, append(append([]byte{}, b[:i]...), b[i+1:]...))
			muts = append(muts, append(append([]byte{}, b[:i+1]...), b[i:]...))
			for _, c := range repl {
				if c != b[i] {
					m := append([]byte{}, b...)
					m[i] = c
					muts = append(muts, m)
				}
			}
			for _, m := range muts {
				tried++
				if checkFast(t, m) {
					accepted++
				}
			}
		}
	}
	t.Logf("%d mutations, %d taken by the fast path", tried, accepted)
}

// TestFastFieldsGenerated: fastdecode_fields.go is what go generate writes
// from the payload structs now (the schema has one source).
func TestFastFieldsGenerated(t *testing.T) {
	want, err := fastgen.Generate(".")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(fastgen.Output)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is out of date: run go generate ./events/", fastgen.Output)
	}
}

// TestFastDecodeMarkNested: a mark's evidence (none, [], fewer entries
// than markAlloc has room for, as many, more) and recoverability decode
// on the fast path to what the strict decoder gives, through Decode and
// through a Decoder, and the evidence has no spare capacity (an append
// to one mark's evidence must not write into another's).
func TestFastDecodeMarkNested(t *testing.T) {
	head := `{"v":1,"id":"mk1","type":"mark","session":"s-1","time":"2026-11-30T09:00:00Z","data":{"item":"c1","decision":"PRUNE","rung":"L0","reason":"DUPLICATE_OUTPUT"`
	tail := `"tokens_estimated":3,"cause":"e1","cause_index":0,"policy_version":"pv1"}}`
	rec := `"recoverability":{"log":"e1","survivor":"c2"},`
	var d Decoder
	for n := range markEvidence + 3 {
		ev := make([]string, n)
		for i := range ev {
			ev[i] = fmt.Sprintf(`{"kind":"content_hash","item":"c%d","detail":"d\"%d"}`, i, i)
		}
		for _, r := range []string{"", rec} {
			b := []byte(head + `,"evidence":[` + strings.Join(ev, ",") + `],` + r + tail)
			if n == 0 && r == "" {
				b = []byte(head + "," + tail) // no evidence key at all
			}
			if !checkFast(t, b) {
				t.Fatalf("not on the fast path:\n%s", b)
			}
			checkDecoder(t, &d, b)
			e, _ := d.Decode(b)
			m := e.Data.(*Mark)
			if len(m.Evidence) != n || cap(m.Evidence) != len(m.Evidence) {
				t.Fatalf("%d entries: evidence len %d cap %d", n, len(m.Evidence), cap(m.Evidence))
			}
			if (m.Recoverability != nil) != (r != "") {
				t.Fatalf("recoverability %v for %q", m.Recoverability, r)
			}
		}
	}
}

// TestFObjs: fObjs, which no table uses now but fastgen writes for a
// slice of structs, decodes arrays of objects as encoding/json does.
func TestFObjs(t *testing.T) {
	type holder struct{ E []Evidence }
	f := fObjs("e", func(v *holder) *[]Evidence { return &v.E }, &evidenceFields)
	for _, in := range []string{`[]`, `[{"kind":"k"}]`, `[{"kind":"k","item":"a"},{"kind":"l"},{"kind":"m","detail":"d"}]`} {
		var got, want holder
		p := fastParser{b: []byte(in)}
		if !f.dec(&p, &got) || p.i != len(in) {
			t.Fatalf("%s: not decoded", in)
		}
		if err := json.Unmarshal([]byte(in), &want.E); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) || cap(got.E) != len(got.E) {
			t.Fatalf("%s: got %#v (cap %d), want %#v", in, got, cap(got.E), want)
		}
	}
}

// TestFRaw: the generic json.RawMessage decoder fastgen writes (no field
// uses it now) copies a valid value and refuses an invalid one; the tool
// call's input decoder, which leaves the check to ToolCall.validate, takes
// the same extent, and an event with invalid input is refused by the
// fast path (Validate) and by Decode.
func TestFRaw(t *testing.T) {
	type holder struct{ R json.RawMessage }
	f := fRaw("r", func(v *holder) *json.RawMessage { return &v.R })
	for in, valid := range map[string]bool{`{"a":[1,"x"]}`: true, `null`: true, `"s"`: true, `12`: true, `{"a":}`: false, `[1,]`: false, `tru`: false} {
		var got holder
		p := fastParser{b: []byte(in)}
		if ok := f.dec(&p, &got); ok != valid || valid && (string(got.R) != in || p.i != len(in)) {
			t.Fatalf("fRaw %s: %v %q, want %v", in, ok, got.R, valid)
		}
		var call ToolCall
		p = fastParser{b: []byte(in)}
		if !fToolCallInput().dec(&p, &call) || string(call.Input) != in {
			t.Fatalf("fToolCallInput %s: %q", in, call.Input)
		}
		ev := `{"v":1,"id":"e1","type":"tool_call","session":"s","time":"2026-01-02T03:04:05Z","data":{"item":"c1/input","call_id":"c1","tool":"Read","input":` + in + `}}`
		if _, ok := decodeFast([]byte(ev)); ok != valid {
			t.Fatalf("decodeFast with input %s: %v, want %v", in, ok, valid)
		}
		if _, err := Decode([]byte(ev)); (err == nil) != valid {
			t.Fatalf("Decode with input %s: %v", in, err)
		}
	}
}

// TestFastDecodeApplicationRoom: applications of none, one (what
// appAlloc has room for) and more marks, plain or escaped, decode on the
// fast path to what the strict decoder gives, through Decode and a
// Decoder.
func TestFastDecodeApplicationRoom(t *testing.T) {
	var d Decoder
	for n := range 4 {
		for _, esc := range []bool{false, true} {
			ids := make([]string, n)
			for i := range ids {
				ids[i] = fmt.Sprintf(`"k%d"`, i)
				if esc && i == n-1 {
					ids[i] = `"k\u0031"`
				}
			}
			list := "[" + strings.Join(ids, ",") + "]"
			b := []byte(`{"v":1,"id":"ap1","type":"application","session":"s-1","time":"2026-11-30T09:00:00Z","data":{"request":"r1","marks":` + list +
				`,"items":` + list + `,"trigger":"pressure","first_divergence":0,"mutation_radius":0,"tokens_removed":0,"placeholder_tokens":0,"cache_cost":0,"expected_saving":0,"after_index":0,"policy_version":"pv1"}}`)
			if !checkFast(t, b) && n > 0 { // none: refused by Validate, on both paths
				t.Fatalf("not on the fast path:\n%s", b)
			}
			checkDecoder(t, &d, b)
			if e, err := d.Decode(b); err == nil {
				a := e.Data.(*Application)
				if len(a.Marks) != n || len(a.Items) != n {
					t.Fatalf("%s: %d marks, %d items", list, len(a.Marks), len(a.Items))
				}
			}
		}
	}
}
