package events

// The field tables (fastdecode_fields.go) are generated from the payload
// structs and their enum and fastdecode tags; TestFastFieldsGenerated fails
// when they are out of date.
//go:generate go run ./internal/fastgen/cmd/fastgen

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prunesched/prunesched/internal/jsonplain"
)

// decodeFast decodes b when it is in the form Encode writes: one compact
// JSON object with the envelope keys v, id, type, tenant (optional),
// session, time and data in that order, and payload keys in struct field
// order (each optional). Strings may hold the escapes encoding/json writes.
//
// It reports false on anything else (white space outside a tool call's
// input, another key order, an unknown or repeated key, a key in another
// case or with escapes, null where the strict decoder would leave a field
// alone, a surrogate escape, invalid UTF-8, a number that is not an
// integer where one is wanted, ...) and on any validation failure; the
// caller then decodes b with the strict decoder, which produces the
// error. It reports true only for input the strict decoder accepts and
// decodes to the same Event: it reads a subset of the JSON grammar,
// matches keys exactly (the strict decoder also matches them
// case-insensitively), converts numbers with the same strconv calls,
// reads the time literal as time.Time.UnmarshalJSON does (fastTime, or
// UnmarshalJSON itself) and validates the result with Event.Validate.
// FuzzFastDecode and TestFastDecodeMutations check this against the
// strict decoder.
func decodeFast(b []byte) (Event, bool) {
	var p fastParser // escapes (the field decoders are func values): one allocation
	return p.event(b)
}

// event is decodeFast with the parser p, which keeps no reference to b
// once it returns.
func (p *fastParser) event(b []byte) (Event, bool) {
	*p = fastParser{b: b, shared: p.shared}
	e, ok := p.envelope()
	p.b = nil
	return e, ok
}

// envelope decodes p.b from the start (see decodeFast).
func (p *fastParser) envelope() (Event, bool) {
	var e Event
	var ok bool
	if !p.lit(`{"v":`) {
		return Event{}, false
	}
	if e.V, ok = p.int(); !ok {
		return Event{}, false
	}
	if !p.lit(`,"id":`) {
		return Event{}, false
	}
	if e.ID, ok = p.strUnshared(); !ok {
		return Event{}, false
	}
	if !p.lit(`,"type":`) {
		return Event{}, false
	}
	var typ string
	if typ, ok = p.enum(knownTypes); !ok {
		return Event{}, false
	}
	e.Type = Type(typ)
	if p.lit(`,"tenant":`) {
		if e.Tenant, ok = p.enum(knownTenants); !ok {
			return Event{}, false
		}
	}
	if !p.lit(`,"session":`) {
		return Event{}, false
	}
	if e.Session, ok = p.str(); !ok {
		return Event{}, false
	}
	if !p.lit(`,"time":`) {
		return Event{}, false
	}
	lit, ok := p.plainStr()
	if !ok {
		return Event{}, false
	}
	t, ok := fastTime(lit)
	if !ok {
		if err := t.UnmarshalJSON(lit); err != nil {
			return Event{}, false
		}
	}
	e.Time = t.UTC()
	if !p.lit(`,"data":`) {
		return Event{}, false
	}
	if e.Data, ok = p.payload(e.Type); !ok {
		return Event{}, false
	}
	if !p.lit(`}`) || p.i != len(p.b) {
		return Event{}, false
	}
	if e.Validate() != nil {
		return Event{}, false
	}
	return e, true
}

// fastTime reads a time literal (quotes included) in the form Encode
// writes, UTC with 0 to 9 digits of fraction ("2006-01-02T15:04:05Z",
// "2006-01-02T15:04:05.999999999Z"), to the time t.UnmarshalJSON would
// give; it reports false for anything else (another form, an offset, a
// day or hour out of range...), which the caller leaves to UnmarshalJSON.
// FuzzFastTime compares the two.
func fastTime(lit []byte) (time.Time, bool) {
	const n = len(`"2006-01-02T15:04:05Z"`)
	if len(lit) < n || lit[0] != '"' || lit[len(lit)-2] != 'Z' || lit[len(lit)-1] != '"' {
		return time.Time{}, false
	}
	b := lit[1 : len(lit)-2]
	if b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' {
		return time.Time{}, false
	}
	year, ok1 := digitsAt(b, 0, 4)
	month, ok2 := digitsAt(b, 5, 2)
	day, ok3 := digitsAt(b, 8, 2)
	hour, ok4 := digitsAt(b, 11, 2)
	minute, ok5 := digitsAt(b, 14, 2)
	sec, ok6 := digitsAt(b, 17, 2)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || month < 1 || month > 12 || day < 1 || day > daysIn(month, year) ||
		hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	ns := 0
	if frac := b[19:]; len(frac) > 0 {
		digits := len(frac) - 1
		if frac[0] != '.' || digits < 1 || digits > 9 {
			return time.Time{}, false
		}
		v, ok := digitsAt(frac, 1, digits)
		if !ok {
			return time.Time{}, false
		}
		ns = v
		for range 9 - digits {
			ns *= 10
		}
	}
	// time.Date in UTC (the same time.Time, without its normalization).
	unix := (daysFromCivil(year, month, day)*24+int64(hour))*3600 + int64(minute)*60 + int64(sec)
	return time.Unix(unix, int64(ns)).UTC(), true
}

// daysFromCivil returns the number of days from 1970-01-01 to the given
// date of the proleptic Gregorian calendar (valid month and day).
// Howard Hinnant's days_from_civil, for years 0-9999 (eras of 400 years
// from March, so February's leap day falls at an era's year end).
func daysFromCivil(year, month, day int) int64 {
	y := int64(year)
	if month <= 2 {
		y--
	}
	era := (y + 400) / 400 // y >= -1: shifted so the division floors
	era--
	yoe := y - era*400                     // [0, 399]
	mp := int64((month + 9) % 12)          // March = 0
	doy := (153*mp+2)/5 + int64(day) - 1   // [0, 365]
	doe := yoe*365 + yoe/4 - yoe/100 + doy // [0, 146096]
	return era*146097 + doe - 719468
}

// digitsAt reads n decimal digits of b at i.
func digitsAt(b []byte, i, n int) (int, bool) {
	v := 0
	for _, c := range b[i : i+n] {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return v, true
}

// daysIn returns the number of days of month in year (proleptic
// Gregorian, as package time).
func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// payload decodes the object of the payload of type t.
func (p *fastParser) payload(t Type) (Payload, bool) {
	switch t {
	case TypeSessionStarted:
		return fastPayload(p, sessionStartedFields)
	case TypeMessage:
		return fastPayload(p, messageFields)
	case TypeToolCall:
		return fastPayload(p, toolCallFields)
	case TypeToolResult:
		return p.toolResult()
	case TypeSubtaskOpened:
		return fastPayload(p, subtaskOpenedFields)
	case TypeSubtaskClosed:
		return fastPayload(p, subtaskClosedFields)
	case TypePin:
		return fastPayload(p, pinFields)
	case TypeUnpin:
		return fastPayload(p, unpinFields)
	case TypeModelRequest:
		return fastPayload(p, modelRequestFields)
	case TypeMark:
		return p.mark()
	case TypeApplication:
		return p.application()
	case TypeRestore:
		return fastPayload(p, restoreFields)
	case TypeHostCompaction:
		return fastPayload(p, hostCompactionFields)
	case TypePruneRequest:
		return fastPayload(p, pruneRequestFields)
	case TypeFlushRequest:
		return fastPayload(p, flushRequestFields)
	}
	return nil, false
}

// fastPayload decodes one payload object into a fresh *T.
func fastPayload[T any, PT interface {
	*T
	Payload
}](p *fastParser, fields []fastField[T]) (Payload, bool) {
	v := PT(new(T))
	if !fastObject(p, (*T)(v), fields) {
		return nil, false
	}
	return v, true
}

// mark decodes the object of a mark's payload into one markAlloc.
func (p *fastParser) mark() (Payload, bool) {
	a := new(markAlloc)
	return &a.m, fastObjectIn(p, &p.inMark, a, &a.m, markFields)
}

// fastObjectIn decodes an object into v, part of a, with *in pointing at
// a meanwhile: the room v's nested objects decode into.
func fastObjectIn[A, T any](p *fastParser, in **A, a *A, v *T, fields []fastField[T]) bool {
	*in = a
	ok := fastObject(p, v, fields)
	*in = nil
	return ok
}

// fMarkEvidence decodes a mark's evidence into the room its markAlloc
// has for it (see fObjs).
func fMarkEvidence() fastField[Mark] {
	return fastField[Mark]{quoteKey("evidence"), func(p *fastParser, v *Mark) bool {
		var room []Evidence
		if p.inMark != nil {
			room = p.inMark.ev[:0]
		}
		out, ok := fastObjects(p, room, evidenceFields)
		v.Evidence = out
		return ok
	}}
}

// fMarkRecoverability decodes a mark's recoverability into its
// markAlloc.
func fMarkRecoverability() fastField[Mark] {
	return fObjIn("recoverability", func(v *Mark) **Recoverability { return &v.Recoverability }, &recoverabilityFields,
		func(p *fastParser) *markAlloc { return p.inMark }, func(a *markAlloc) *Recoverability { return &a.rec })
}

// resultAlloc is a decoded tool result together with room for its
// output_ref (what every tool result read back from the log has),
// allocated at once.
type resultAlloc struct {
	r   ToolResult
	ref ContentRef
}

// toolResult decodes the object of a tool result's payload into one
// resultAlloc.
func (p *fastParser) toolResult() (Payload, bool) {
	a := new(resultAlloc)
	return &a.r, fastObjectIn(p, &p.inResult, a, &a.r, toolResultFields)
}

// fResultOutputRef decodes a tool result's output_ref into its
// resultAlloc.
func fResultOutputRef() fastField[ToolResult] {
	return fObjIn("output_ref", func(v *ToolResult) **ContentRef { return &v.OutputRef }, &contentRefFields,
		func(p *fastParser) *resultAlloc { return p.inResult }, func(a *resultAlloc) *ContentRef { return &a.ref })
}

// appAlloc is a decoded application together with room for one mark
// id and one item (most applications apply one mark), allocated at once.
type appAlloc struct {
	a    Application
	mark [1]string
	item [1]string
}

// application decodes the object of an application's payload into one
// appAlloc.
func (p *fastParser) application() (Payload, bool) {
	a := new(appAlloc)
	return &a.a, fastObjectIn(p, &p.inApp, a, &a.a, applicationFields)
}

// fAppMarks decodes an application's mark ids, into its appAlloc when
// there is room: each a copy (a mark's id is an event id, read once
// more here, which would only push shared values out of the cache).
func fAppMarks() fastField[Application] {
	return fStrsIn("marks", func(v *Application) *[]string { return &v.Marks },
		func(p *fastParser) *appAlloc { return p.inApp }, func(a *appAlloc) []string { return a.mark[:0] }, false)
}

// fAppItems decodes an application's items, into its appAlloc when
// there is room, shared as str shares them.
func fAppItems() fastField[Application] {
	return fStrsIn("items", func(v *Application) *[]string { return &v.Items },
		func(p *fastParser) *appAlloc { return p.inApp }, func(a *appAlloc) []string { return a.item[:0] }, true)
}

// fStrsIn is fStrs decoding into the room of the allocation in gives
// (see strs), each value shared as str shares it when share is set.
func fStrsIn[T, A any](key string, get func(*T) *[]string, in func(*fastParser) *A, room func(*A) []string, share bool) fastField[T] {
	return fastField[T]{quoteKey(key), func(p *fastParser, v *T) bool {
		var r []string
		if a := in(p); a != nil {
			r = room(a)
		}
		var c *strCache
		if share {
			c = p.shared
		}
		out, ok := p.strs(nil, r, c)
		*get(v) = out
		return ok
	}}
}

// fObjIn is fObj decoding into the part (room) of the allocation in
// gives, that of the payload being decoded, or into a new object when in
// gives nil.
func fObjIn[T, A, U any](key string, get func(*T) **U, fields *[]fastField[U], in func(*fastParser) *A, room func(*A) *U) fastField[T] {
	return fastField[T]{quoteKey(key), func(p *fastParser, v *T) bool {
		var u *U
		if a := in(p); a != nil {
			u = room(a)
		} else {
			u = new(U)
		}
		*get(v) = u
		return fastObject(p, u, *fields)
	}}
}

// fastParser reads the canonical subset of JSON from b at i. With
// shared (a Decoder's), str returns equal short values as one string.
// While a mark, a tool result or an application is decoded, inMark,
// inResult or inApp holds it with room for what it holds (see markAlloc,
// resultAlloc, appAlloc).
type fastParser struct {
	b        []byte
	i        int
	shared   *strCache
	inMark   *markAlloc
	inResult *resultAlloc
	inApp    *appAlloc
}

// markAlloc is a decoded mark together with room for its recoverability
// and its first markEvidence evidence entries, allocated at once: what
// the mark's nested objects would otherwise take one allocation each for
// (and its evidence one per entry, as fObjs decodes them through a
// pointer). Whatever keeps the mark keeps them; the mark's Evidence has
// no spare capacity (an append copies), as encoding/json leaves it.
type markAlloc struct {
	m   Mark
	rec Recoverability
	ev  [markEvidence]Evidence
}

// markEvidence is how many evidence entries markAlloc holds: most marks
// cite one or two things (a copy and its hash, a call's arguments and
// its output); more go to a slice of their own.
const markEvidence = 2

// fastField decodes the value of one key of a T. key is the key as the
// input spells it, quoted and followed by the colon (`"item":`, see
// quoteKey), so that matching it is one comparison at the input.
type fastField[T any] struct {
	key string
	dec func(p *fastParser, v *T) bool
}

// quoteKey returns the form of a key fastField matches.
func quoteKey(key string) string {
	return `"` + key + `":`
}

// fastObject decodes an object whose keys are a subsequence of fields, in
// order, into v.
func fastObject[T any](p *fastParser, v *T, fields []fastField[T]) bool {
	if !p.lit(`{`) {
		return false
	}
	if p.lit(`}`) {
		return true
	}
	next := 0
	for {
		// The next key is one of fields[next:] (plain ASCII, so the
		// input holds it exactly as quoteKey spells it), or the object
		// is not in the canonical form.
		j := next
		for j < len(fields) && !p.lit(fields[j].key) {
			j++
		}
		if j == len(fields) || !fields[j].dec(p, v) {
			return false
		}
		next = j + 1
		if p.lit(`,`) {
			continue
		}
		return p.lit(`}`)
	}
}

// lit consumes s if the input continues with it.
func (p *fastParser) lit(s string) bool {
	if len(p.b)-p.i < len(s) || string(p.b[p.i:p.i+len(s)]) != s {
		return false
	}
	p.i += len(s)
	return true
}

// plainStr returns a whole string literal, quotes included, that holds
// neither escapes nor control characters.
func (p *fastParser) plainStr() ([]byte, bool) {
	start := p.i
	if !p.lit(`"`) {
		return nil, false
	}
	for p.i < len(p.b) {
		c := p.b[p.i]
		p.i++
		if c == '"' {
			return p.b[start:p.i], true
		}
		if c < 0x20 || c == '\\' {
			return nil, false
		}
	}
	return nil, false
}

// str reads a string literal and returns its value, as encoding/json
// would, or false (the strict decoder then decides). A value without
// escapes comes from p.shared when there is one.
func (p *fastParser) str() (string, bool) { return p.strFrom(p.shared) }

// strUnshared is str for values unique to each event (its id), which
// would only push shared values out of p.shared.
func (p *fastParser) strUnshared() (string, bool) { return p.strFrom(nil) }

// strFrom is str taking a value without escapes from c (nil: a copy).
func (p *fastParser) strFrom(c *strCache) (string, bool) {
	start, end, ok := p.plainSpan()
	if !ok {
		return "", false
	}
	if end < 0 {
		return p.strEscaped(start)
	}
	if c != nil {
		return c.get(p.b[start:end]), true
	}
	return string(p.b[start:end]), true
}

// plainSpan reads a string literal without escapes and returns the span
// of its value, or end -1 with p at the first backslash. It reports false
// for what the fast path leaves to encoding/json: control characters and
// invalid UTF-8 (which encoding/json replaces).
func (p *fastParser) plainSpan() (start, end int, ok bool) {
	if !p.lit(`"`) {
		return 0, 0, false
	}
	start = p.i
	b := p.b
	i := p.i
	for i < len(b) {
		if i = jsonplain.Skip(b, i); i == len(b) {
			break
		}
		switch c := b[i]; {
		case c == '"':
			p.i = i + 1
			return start, i, true
		case c == '\\':
			p.i = i
			return start, -1, true
		case c < 0x20:
			return 0, 0, false
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return 0, 0, false
			}
			i += size
		}
	}
	return 0, 0, false
}

// enum reads a string literal and returns it as one of known when it is
// one (no allocation), else as a new string.
func (p *fastParser) enum(known []string) (string, bool) {
	start, end, ok := p.plainSpan()
	if !ok {
		return "", false
	}
	if end < 0 {
		return p.strEscaped(start)
	}
	return internOr(known, p.b[start:end]), true
}

// strEscaped continues str at the first backslash; the value starts at
// start.
func (p *fastParser) strEscaped(start int) (string, bool) {
	// The value is at most as long as the rest of the literal.
	end := p.i
	for end < len(p.b) && p.b[end] != '"' {
		if p.b[end] == '\\' {
			end++
		}
		end++
	}
	var buf strings.Builder
	buf.Grow(end - start)
	buf.Write(p.b[start:p.i])
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return buf.String(), true
		case c == '\\':
			if p.i+1 >= len(p.b) {
				return "", false
			}
			switch p.b[p.i+1] {
			case '"', '\\', '/':
				buf.WriteByte(p.b[p.i+1])
			case 'b':
				buf.WriteByte('\b')
			case 'f':
				buf.WriteByte('\f')
			case 'n':
				buf.WriteByte('\n')
			case 'r':
				buf.WriteByte('\r')
			case 't':
				buf.WriteByte('\t')
			case 'u':
				r, ok := hex4(p.b[p.i+2:])
				// Surrogates (pairs or lone) are left to encoding/json.
				if !ok || r >= 0xD800 && r < 0xE000 {
					return "", false
				}
				buf.WriteRune(r)
				p.i += 4
			default:
				return "", false
			}
			p.i += 2
		case c < 0x20:
			return "", false
		case c < utf8.RuneSelf:
			buf.WriteByte(c)
			p.i++
		default:
			r, size := utf8.DecodeRune(p.b[p.i:])
			if r == utf8.RuneError && size == 1 {
				return "", false
			}
			buf.Write(p.b[p.i : p.i+size])
			p.i += size
		}
	}
	return "", false
}

// hex4 decodes four hex digits.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r*16 + rune(c)
	}
	return r, true
}

// maxIntDigits is the most digits that cannot overflow an int.
const maxIntDigits = 18*(strconv.IntSize/64) + 9*(1-strconv.IntSize/64)

// int reads an integer literal (-?(0|[1-9][0-9]*)) that fits an int.
// Longer literals may overflow v during the loop, but are then converted
// again with strconv.
// A fraction or exponent is not consumed, so the caller's next expected
// byte fails.
func (p *fastParser) int() (int, bool) {
	neg := p.lit(`-`)
	start := p.i
	v := 0
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		v = v*10 + int(p.b[p.i]-'0')
		p.i++
	}
	n := p.i - start
	if n == 0 || n > 1 && p.b[start] == '0' {
		return 0, false
	}
	if n > maxIntDigits {
		// Possibly out of range: convert as encoding/json does.
		if neg {
			start--
		}
		v, err := strconv.ParseInt(string(p.b[start:p.i]), 10, strconv.IntSize)
		return int(v), err == nil
	}
	if neg {
		v = -v
	}
	return v, true
}

// float reads a JSON number and converts it as encoding/json does.
func (p *fastParser) float() (float64, bool) {
	start := p.i
	p.lit(`-`)
	switch {
	case p.lit(`0`):
	case p.digits() == 0:
		return 0, false
	}
	if p.lit(`.`) && p.digits() == 0 {
		return 0, false
	}
	if p.lit(`e`) || p.lit(`E`) {
		if !p.lit(`+`) {
			p.lit(`-`)
		}
		if p.digits() == 0 {
			return 0, false
		}
	}
	f, err := strconv.ParseFloat(string(p.b[start:p.i]), 64)
	return f, err == nil
}

// digits consumes decimal digits and returns how many.
func (p *fastParser) digits() int {
	start := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	return p.i - start
}

// boolean reads true or false.
func (p *fastParser) boolean() (bool, bool) {
	if p.lit(`true`) {
		return true, true
	}
	return false, p.lit(`false`)
}

// raw reads any JSON value (null included: json.RawMessage keeps it) and
// returns a copy of its bytes, as json.RawMessage.UnmarshalJSON does.
func (p *fastParser) raw() (json.RawMessage, bool) {
	v, ok := p.rawSpan()
	if !ok || !json.Valid(v) {
		return nil, false
	}
	return append(json.RawMessage(nil), v...), true
}

// fToolCallInput decodes a tool call's input as fRaw does, without
// checking that it is valid JSON: ToolCall.validate checks exactly that,
// and the fast path refuses any event Validate refuses (envelope), so a
// second json.Valid of the same bytes would change no outcome (it was
// ~3% of decoding a log's events).
func fToolCallInput() fastField[ToolCall] {
	return fastField[ToolCall]{quoteKey("input"), func(p *fastParser, v *ToolCall) bool {
		r, ok := p.rawSpan()
		if !ok {
			return false
		}
		v.Input = append(json.RawMessage(nil), r...)
		return true
	}}
}

// rawSpan reads the extent of any JSON value and returns its bytes in
// the input, not checked to be valid JSON (the caller does, or leaves it
// to Validate).
func (p *fastParser) rawSpan() ([]byte, bool) {
	start := p.i
	if p.i >= len(p.b) {
		return nil, false
	}
	switch p.b[p.i] {
	case '{', '[':
		depth := 0
	scan:
		for p.i < len(p.b) {
			switch p.b[p.i] {
			case '"':
				if !p.skipStr() {
					return nil, false
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
			p.i++
			if depth == 0 {
				break scan
			}
		}
		if depth != 0 {
			return nil, false
		}
	case '"':
		if !p.skipStr() {
			return nil, false
		}
	case ' ', '\t', '\r', '\n':
		return nil, false
	default:
		for p.i < len(p.b) {
			c := p.b[p.i]
			if c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\r' || c == '\n' {
				break
			}
			p.i++
		}
	}
	return p.b[start:p.i], true
}

// skipStr moves past a string literal without decoding it (only its
// extent matters; the caller validates the value).
func (p *fastParser) skipStr() bool {
	p.i++
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case '"':
			p.i++
			return true
		case '\\':
			p.i += 2
		default:
			p.i++
		}
	}
	return false
}

// Field decoders.

func fStr[T any](key string, get func(*T) *string) fastField[T] {
	return fastField[T]{quoteKey(key), func(p *fastParser, v *T) bool {
		s, ok := p.str()
		*get(v) = s
		return ok
	}}
}

func fEnum[T any](key string, get func(*T) *string, known []string) fastField[T] {
	return fastField[T]{quoteKey(key), func(p *fastParser, v *T) bool {
		s, ok := p.enum(known)
		*get(v) = s
		return ok
	}}
}

func fStrPtr[T any](key string, get func(*T) **string) fastField[T] {
	return fastField[T]{quoteKey(key), func(p *fastParser, v *T) bool {
		s, ok := p.str()
		*get(v) = &s
		return ok
	}}
}

// fOutputBase64 decodes output_base64 (a tool output that is not valid
// UTF-8) straight into Output, as fromWireForm does after the strict
// decoder.
func fOutputBase64() fastField[ToolResult] {
	return fastField[ToolResult]{quoteKey("output_base64"), func(p *fastParser, v *ToolResult) bool {
		lit, ok := p.plainStr()
		if !ok || v.Output != nil {
			return false
		}
		b, err := base64.StdEncoding.DecodeString(string(lit[1 : len(lit)-1]))
		if err != nil {
			return false
		}
		out := string(b)
		v.Output = &out
		return true
	}}
}

func fInt[T any](key string, get func(*T) *int) fastField[T] {
	return fastField[T]{quoteKey(key), func(p *fastParser, v *T) bool {
		n, ok := p.int()
		*get(v) = n
		return ok
	}}
}

func fIntPtr[T any](key string, get func(*T) **int) fastField[T] {
	return fastField[T]{quoteKey(key), func(p *fastParser, v *T) bool {
		n, ok := p.int()
		*get(v) = &n
		return ok
	}}
}

func fFloat[T any](key string, get func(*T) *float64) fastField[T] {
	return fastField[T]{quoteKey(key), func(p *fastParser, v *T) bool {
		f, ok := p.float()
		*get(v) = f
		return ok
	}}
}

func fBool[T any](key string, get func(*T) *bool) fastField[T] {
	return fastField[T]{quoteKey(key), func(p *fastParser, v *T) bool {
		b, ok := p.boolean()
		*get(v) = b
		return ok
	}}
}

// fRaw decodes a json.RawMessage field, checked to be valid JSON. It is
// what fastgen writes for one; none is left (a tool call's input, the
// only one, decodes with fToolCallInput), but a new one would need it.
//
//lint:ignore U1000 fastgen's entry for a json.RawMessage (see above).
func fRaw[T any](key string, get func(*T) *json.RawMessage) fastField[T] {
	return fastField[T]{quoteKey(key), func(p *fastParser, v *T) bool {
		r, ok := p.raw()
		*get(v) = r
		return ok
	}}
}

// fStrs decodes an array of strings. The values without escapes share
// one allocation (they live and die with the slice).
func fStrs[T any, S ~string](key string, get func(*T) *[]S) fastField[T] {
	return fastField[T]{quoteKey(key), func(p *fastParser, v *T) bool {
		out, ok := p.strs(nil, nil, nil)
		*get(v) = asType[S](out)
		return ok
	}}
}

// fEnums is fStrs for arrays of enumerated values.
func fEnums[T any, S ~string](key string, get func(*T) *[]S, known []string) fastField[T] {
	return fastField[T]{quoteKey(key), func(p *fastParser, v *T) bool {
		out, ok := p.strs(known, nil, nil)
		*get(v) = asType[S](out)
		return ok
	}}
}

func asType[S ~string](l []string) []S {
	if same, ok := any(l).([]S); ok || l == nil {
		return same
	}
	out := make([]S, len(l))
	for i, s := range l {
		out[i] = S(s)
	}
	return out
}

// strs reads an array of strings (a non-nil slice, as encoding/json
// makes for []). With known, values are looked up there first; without,
// when no value has escapes, the values go into room when it has the
// capacity for them (each from c, as strFrom reads it), else they share
// one allocation.
func (p *fastParser) strs(known, room []string, c *strCache) ([]string, bool) {
	if !p.lit(`[`) {
		return nil, false
	}
	if p.lit(`]`) {
		return []string{}, true
	}
	// First pass: count the values and their bytes, if all are plain.
	first := p.i
	n, total, plain := 0, 0, true
	for {
		start, end, ok := p.plainSpan()
		if !ok {
			return nil, false
		}
		if end < 0 {
			plain = false
			break
		}
		n++
		total += end - start
		if p.lit(`]`) {
			break
		}
		if !p.lit(`,`) {
			return nil, false
		}
	}
	p.i = first
	if plain && known == nil && n <= cap(room) {
		out := room[:n:n]
		for i := range out {
			out[i], _ = p.strFrom(c)
			p.i++ // ',' or ']'
		}
		return out, true
	}
	if !plain || known != nil {
		out := make([]string, 0, n+1)
		for {
			s, ok := p.enum(known)
			if !ok {
				return nil, false
			}
			out = append(out, s)
			if p.lit(`]`) {
				return out, true
			}
			if !p.lit(`,`) {
				return nil, false
			}
		}
	}
	// Second pass over values known to be plain and well formed.
	var buf strings.Builder
	buf.Grow(total)
	var small [128]int
	lens := small[:0]
	for range n {
		start, end, _ := p.plainSpan()
		buf.Write(p.b[start:end])
		lens = append(lens, end-start)
		p.i++ // ',' or ']'
	}
	all := buf.String()
	out := make([]string, n)
	off := 0
	for i, l := range lens {
		out[i] = all[off : off+l]
		off += l
	}
	return out, true
}

// internOr returns b as one of known, or as a new string.
func internOr(known []string, b []byte) string {
	for _, k := range known {
		if string(b) == k {
			return k
		}
	}
	return string(b)
}

func fObj[T, U any](key string, get func(*T) **U, fields *[]fastField[U]) fastField[T] {
	return fastField[T]{quoteKey(key), func(p *fastParser, v *T) bool {
		u := new(U)
		*get(v) = u
		return fastObject(p, u, *fields)
	}}
}

// fObjs decodes an array of objects. It is what fastgen writes for a
// slice of structs; none is left (a mark's evidence, the only one,
// decodes with fMarkEvidence), but a new one would need it.
//
//lint:ignore U1000 fastgen's entry for a slice of structs (see above).
func fObjs[T, U any](key string, get func(*T) *[]U, fields *[]fastField[U]) fastField[T] {
	return fastField[T]{quoteKey(key), func(p *fastParser, v *T) bool {
		out, ok := fastObjects(p, nil, *fields)
		*get(v) = out
		return ok
	}}
}

// fastObjects decodes an array of objects into the elements of room's
// backing array while it has room, then into a grown copy (each object
// is decoded in place: one decoded on the stack would escape through the
// field decoders). The slice returned has no spare capacity, and is not
// nil for [] (as encoding/json makes it).
func fastObjects[U any](p *fastParser, room []U, fields []fastField[U]) ([]U, bool) {
	if !p.lit(`[`) {
		return nil, false
	}
	out := room[:0]
	if p.lit(`]`) {
		if out == nil {
			return []U{}, true
		}
		return out[:0:0], true
	}
	for {
		var zero U
		out = append(out, zero)
		if !fastObject(p, &out[len(out)-1], fields) {
			return nil, false
		}
		if p.lit(`]`) {
			return out[:len(out):len(out)], true
		}
		if !p.lit(`,`) {
			return nil, false
		}
	}
}

// Values of enumerated fields, returned without allocating a string.
var (
	knownTypes       = asStrings(Types)
	knownTenants     = []string{DefaultTenant}
	knownRoles       = []string{string(RoleSystem), string(RoleUser), string(RoleAssistant)}
	knownKinds       = []string{string(KindText), string(KindThinking)}
	knownDeterminism = []string{string(DeterminismPure), string(DeterminismVersioned), string(DeterminismState), string(DeterminismSideEffect)}
	knownDecisions   = asStrings(Decisions)
	knownRungs       = asStrings(Rungs)
	knownReasons     = func() []string {
		out := make([]string, len(ReasonTable))
		for i, r := range ReasonTable {
			out[i] = string(r.Code)
		}
		return out
	}()
	knownParts     = []string{"output", "input"}
	knownTriggers  = asStrings(Triggers)
	knownEvidence  = []string{"content_hash", "canonical_args", "source_version", "source_content_hash", "source_range", "subsumption", "verification", "consequence", "protection", "determinism", "error_horizon", "surviving_copy", "references", "candidate", "manual_request", "restore", "no_evidence", "span", "keep_copy", "age", "quiet", "recovery", "agent_request"}
	knownSources   = []string{"file", "url", "search", "command", "other"}
	knownVerifiers = []string{"test_run", "check", "user", "agent"}
	knownBy        = []string{"eligibility"}
)

func asStrings[S ~string](l []S) []string {
	out := make([]string, len(l))
	for i, v := range l {
		out[i] = string(v)
	}
	return out
}
