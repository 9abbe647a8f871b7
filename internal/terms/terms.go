// Package terms owns the one definition of a distinctive term: the words
// of a text (paths, file names, identifiers, numbers, error codes, hashes)
// that a reader could only have from that text, so that seeing one again
// elsewhere says the text was used. The later-use signal (package
// lateruse) and the eligibility core's cold rule (COLD_RECOVERABLE) both
// read it.
//
// It must not import anything of the module: it is a leaf, pure and
// deterministic, shared by the core and offline evaluation.
package terms

import "strings"

// The distinctive terms. Text is cut into chunks, maximal runs of path
// characters (letters, digits and _ . ~ / -), and chunks into words,
// maximal runs of letters, digits and _. A term is:
//
//   - path: a chunk with a "/" and a letter, 4 or more bytes once
//     trailing "." "/" "-" are trimmed ("internal/store/append.go",
//     "/tmp/x/a.txt");
//   - file name: inside a chunk, a word of 2+ characters (or several
//     joined by "-"), a dot, and a word of 1-8 characters starting with a
//     letter that ends the chunk or is followed by a non-word character
//     ("append.go", "package.json", "strings.Split");
//   - identifier: a word of 5+ characters starting with a letter or _
//     that is not a plain word: it has an underscore, a digit, or an
//     upper-case letter after a lower-case one ("ReadSession",
//     "max_tokens", "base64");
//   - number: a word of 4 or more digits ("8788", "20251001");
//   - error code: a word of 1-4 upper-case letters then 3-5 digits
//     ("E0425", "TS2345"), or a POSIX errno name ("ENOENT", "EACCES");
//   - hash: a word of 7-64 lower-case hex digits with at least one digit
//     and one letter ("9e252a2", a sha256).
//
// Plain English words, short words and punctuation never count, so a
// term shared by chance is rare. Terms are compared exactly (case
// matters).

// Of returns the distinctive terms of text, each once, in the order they
// first appear.
func Of(text string) []string {
	var t termSet
	for i := 0; i < len(text); {
		if !isPathByte(text[i]) {
			i++
			continue
		}
		j := i
		for j < len(text) && isPathByte(text[j]) {
			j++
		}
		t.chunk(text[i:j])
		i = j
	}
	return t.out
}

type termSet struct {
	seen map[string]bool
	out  []string
}

func (t *termSet) add(s string) {
	if t.seen == nil {
		t.seen = map[string]bool{}
	}
	if !t.seen[s] {
		t.seen[s] = true
		t.out = append(t.out, s)
	}
}

func (t *termSet) chunk(c string) {
	if p := strings.TrimRight(c, "./-"); len(p) >= 4 && strings.IndexByte(p, '/') >= 0 && strings.IndexFunc(p, isLetter) >= 0 {
		t.add(p)
	}
	// Words, and file names at each dot between two words.
	prevStart, prevEnd := -1, -1 // the word before the current one
	for i := 0; i < len(c); {
		if !isWordByte(c[i]) {
			i++
			continue
		}
		j := i
		for j < len(c) && isWordByte(c[j]) {
			j++
		}
		w := c[i:j]
		t.word(w)
		if prevEnd >= 0 && prevEnd == i-1 && c[prevEnd] == '.' && len(w) <= 8 && isLetter(rune(w[0])) {
			// name.ext: the name runs back over words joined by "-".
			start := prevStart
			for start > 1 && c[start-1] == '-' && isWordByte(c[start-2]) {
				k := start - 2
				for k > 0 && isWordByte(c[k-1]) {
					k--
				}
				start = k
			}
			if prevEnd-start >= 2 {
				t.add(c[start:j])
			}
		}
		prevStart, prevEnd = i, j
		i = j
	}
}

func (t *termSet) word(w string) {
	n := len(w)
	switch {
	case n >= 4 && allDigits(w):
		t.add(w)
		return
	case n >= 7 && n <= 64 && isHash(w):
		t.add(w)
		return
	case isCode(w):
		t.add(w)
		return
	}
	if n >= 5 && (isLetter(rune(w[0])) || w[0] == '_') && notPlain(w) {
		t.add(w)
	}
}

func isPathByte(c byte) bool { return isWordByte(c) || c == '.' || c == '~' || c == '/' || c == '-' }

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

func allDigits(w string) bool {
	for i := 0; i < len(w); i++ {
		if w[i] < '0' || w[i] > '9' {
			return false
		}
	}
	return true
}

// isHash: lower-case hex with at least one digit and one letter.
func isHash(w string) bool {
	digit, letter := false, false
	for i := 0; i < len(w); i++ {
		switch c := w[i]; {
		case c >= '0' && c <= '9':
			digit = true
		case c >= 'a' && c <= 'f':
			letter = true
		default:
			return false
		}
	}
	return digit && letter
}

// errnos are the POSIX errno names an error message may carry.
var errnos = map[string]bool{}

func init() {
	for _, e := range strings.Fields(`E2BIG EACCES EADDRINUSE EADDRNOTAVAIL EAFNOSUPPORT EAGAIN EALREADY EBADF
		EBUSY ECANCELED ECHILD ECONNABORTED ECONNREFUSED ECONNRESET EDEADLK EDESTADDRREQ EDOM EDQUOT
		EEXIST EFAULT EFBIG EHOSTUNREACH EIDRM EILSEQ EINPROGRESS EINTR EINVAL EIO EISCONN EISDIR ELOOP
		EMFILE EMLINK EMSGSIZE ENAMETOOLONG ENETDOWN ENETRESET ENETUNREACH ENFILE ENOBUFS ENODEV ENOENT
		ENOEXEC ENOLCK ENOMEM ENOSPC ENOSYS ENOTCONN ENOTDIR ENOTEMPTY ENOTSOCK ENOTSUP ENOTTY ENXIO
		EOPNOTSUPP EOVERFLOW EPERM EPIPE EPROTO ERANGE EROFS ESPIPE ESRCH ESTALE ETIMEDOUT ETXTBSY
		EWOULDBLOCK EXDEV`) {
		errnos[e] = true
	}
}

// isCode: 1-4 upper-case letters then 3-5 digits, or an errno name.
func isCode(w string) bool {
	if errnos[w] {
		return true
	}
	i := 0
	for i < len(w) && w[i] >= 'A' && w[i] <= 'Z' {
		i++
	}
	d := len(w) - i
	return i >= 1 && i <= 4 && d >= 3 && d <= 5 && allDigits(w[i:])
}
func isLetter(r rune) bool { return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' }

// notPlain reports whether a word is an identifier rather than a plain
// word: it has an underscore, a digit, or an upper-case letter after a
// lower-case one.
func notPlain(w string) bool {
	for i := 0; i < len(w); i++ {
		c := w[i]
		switch {
		case c == '_', c >= '0' && c <= '9':
			return true
		case c >= 'A' && c <= 'Z' && i > 0 && w[i-1] >= 'a' && w[i-1] <= 'z':
			return true
		}
	}
	return false
}
