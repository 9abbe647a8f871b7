package agentsetup

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// The files beside a config file setup changed.
const (
	// BackupSuffix names the copy of the original file the first setup
	// that changed it keeps, byte for byte; when a file of that name is
	// there already (prunesched did not record it), setup picks a free
	// name, FILE.prunesched-backup-2, -3, ... Undo restores it.
	BackupSuffix = ".prunesched-backup"
	// StateSuffix names setup's record of a file it changed: whether
	// setup created the file, else which backup holds the original, with
	// its size and SHA-256. Undo trusts a backup only through it, and only
	// when the backup still has that content.
	StateSuffix = ".prunesched-setup"
	// UndoneSuffix names the copy undo keeps of a file that was changed
	// since setup wrote it (by the user or the agent), before restoring
	// the original over it.
	UndoneSuffix = ".prunesched-undone"
)

// ErrNothingToUndo is the error of Undo on a file setup did not change
// (no state file beside it).
var ErrNothingToUndo = errors.New("nothing to undo")

// stateFormat marks a state file as prunesched's.
const stateFormat = "prunesched setup state 1"

// state is what StateSuffix holds, as JSON.
type state struct {
	Format string `json:"format"`
	Agent  string `json:"agent"`
	// File is the base name of the config file it is about.
	File string `json:"file"`
	// Created: there was no file; undo removes it.
	Created bool `json:"created,omitempty"`
	// Backup is the base name of the copy of the original, beside the
	// file, and its size and SHA-256 (hex).
	Backup string `json:"backup,omitempty"`
	Size   int    `json:"size,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	// Dirs counts the directories setup created for a new file: the
	// file's directory and Dirs-1 of its parents, which undo removes
	// again when they are empty.
	Dirs int `json:"dirs,omitempty"`
}

// readState reads the state file beside path and the original file it
// records (nil when setup created the file). No state file is (nil, nil,
// nil). A state file that is not prunesched's, is about another file, or
// whose backup is missing or changed is an error.
func readState(path string) (*state, []byte, error) {
	name := path + StateSuffix
	b, ok, err := readOptional(name)
	if err != nil || !ok {
		return nil, nil, err
	}
	var st state
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil || st.Format != stateFormat {
		return nil, nil, fmt.Errorf("%s is not a state file prunesched wrote", name)
	}
	if st.File != filepath.Base(path) {
		return nil, nil, fmt.Errorf("%s records the file %q, not %s", name, st.File, filepath.Base(path))
	}
	if st.Created {
		return &st, nil, nil
	}
	if st.Backup != filepath.Base(st.Backup) || !strings.HasPrefix(st.Backup, filepath.Base(path)+BackupSuffix) {
		return nil, nil, fmt.Errorf("%s names the backup %q, not one beside the file", name, st.Backup)
	}
	backup := filepath.Join(filepath.Dir(path), st.Backup)
	orig, err := os.ReadFile(backup)
	if err != nil {
		return nil, nil, fmt.Errorf("the backup %s records: %w", name, err)
	}
	if sum := sha256.Sum256(orig); len(orig) != st.Size || hex.EncodeToString(sum[:]) != st.SHA256 {
		return nil, nil, fmt.Errorf("the backup %s changed since setup wrote it (%s records %d bytes, SHA-256 %s)", backup, filepath.Base(name), st.Size, st.SHA256)
	}
	return &st, orig, nil
}

// Result is what Setup or Undo did (or, dry, would do) to one file.
type Result struct {
	Agent string `json:"agent"`
	File  string `json:"file"`
	// Action: written, unchanged, restored, removed, reverted (undo of
	// a file the agent rewrites itself, changed since setup: setup's keys
	// taken out of it); with dry run would-write, would-restore,
	// would-remove, would-revert.
	Action string `json:"action"`
	// Backup is the copy of the original (none when setup created the
	// file); State is setup's record of it.
	Backup  string `json:"backup,omitempty"`
	State   string `json:"state,omitempty"`
	Created bool   `json:"created,omitempty"`
	// Saved is where undo kept the file it replaced, changed since setup.
	Saved   string   `json:"saved,omitempty"`
	Changes []Change `json:"changes,omitempty"`
	// Content is the file as written (or as it would be); nil when undo
	// removes it.
	Content []byte `json:"-"`
}

// fill sets the result's backup and state from st.
func (r *Result) fill(st *state) {
	r.State, r.Created = r.File+StateSuffix, st.Created
	if !st.Created {
		r.Backup = filepath.Join(filepath.Dir(r.File), st.Backup)
	}
}

// probe is the options undo edits both files with to tell whether the
// current file is exactly what setup made of the original.
var probe = Options{Proxy: "http://prunesched-undo.invalid:1", MCP: []string{"/prunesched-undo.invalid/prunesched", "mcp"}}

// resolve follows a symlinked config file (dotfile managers link them), so
// the edit lands in the real file and the link stays. A link to nothing
// is an error: writing the file would replace the link.
func resolve(path string) (string, error) {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return path, nil
	}
	real, err := filepath.EvalSymlinks(path)
	if err == nil {
		return real, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		target, _ := os.Readlink(path)
		return path, fmt.Errorf("it is a symbolic link to %s, which does not exist; prunesched does not replace the link: create the file it points to (an empty one will do) or remove the link, then run it again", target)
	}
	return path, fmt.Errorf("follow the symbolic link: %w", err)
}

// writable refuses a file without its owner's write bit. The mode bits
// are checked, not the OS's answer: root may write any file, but a file
// its owner made read-only is not prunesched's to change.
func writable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if perm := fi.Mode().Perm(); perm&0o200 == 0 {
		return fmt.Errorf("the file is read-only (mode %04o) and prunesched leaves it as it is: make it writable (chmod u+w %s) to go on", perm, path)
	}
	return nil
}

// readOptional reads path; a missing file is (nil, false, nil).
func readOptional(path string) ([]byte, bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read %s: %w", path, err)
	}
	return b, true, nil
}

// Setup sets what o asks in the target's config file. The first time it
// changes the file it keeps the original in a backup beside it
// (path+BackupSuffix, or the first free path+BackupSuffix-N) and records
// it in path+StateSuffix (or records that there was no file); later runs
// keep that backup, so undo always goes back to the file before the first
// setup. A file already set is left untouched. dry computes the result
// without writing anything. Nothing is written, and the error says why,
// when the file is malformed (its line and column named), read-only, a
// symbolic link to nothing, or when a state file beside it is not
// prunesched's or its backup changed.
func Setup(t Target, o Options, dry bool) (Result, error) {
	p, res, err := t.start("setup")
	if err != nil {
		return res, err
	}
	path := res.File
	src, existed, err := readOptional(path)
	if err != nil {
		return res, fmt.Errorf("setup %s: %w", path, err)
	}
	out, changes, err := p.edit(src, o)
	if err != nil {
		var se *SyntaxError
		if errors.As(err, &se) {
			return res, fmt.Errorf("%s:%d:%d: %s (the file is left as it is)", path, se.Line, se.Col, se.Msg)
		}
		return res, fmt.Errorf("%s: %w (the file is left as it is)", path, err)
	}
	res.Content, res.Changes = out, changes
	st, _, err := readState(path)
	if err != nil {
		return res, fmt.Errorf("setup %s: %w; nothing written (move it away and run setup again)", path, err)
	}
	if st != nil {
		res.fill(st)
	}
	if existed && bytes.Equal(out, src) {
		res.Action, res.Changes = "unchanged", nil
		return res, nil
	}
	perm := fs.FileMode(0o600)
	if existed {
		if err := writable(path); err != nil {
			return res, fmt.Errorf("setup %s: %w", path, err)
		}
		fi, err := os.Stat(path)
		if err != nil {
			return res, fmt.Errorf("setup %s: %w", path, err)
		}
		perm = fi.Mode().Perm()
	}
	if st == nil {
		st = &state{Format: stateFormat, Agent: t.Agent, File: filepath.Base(path), Created: !existed}
		if !existed {
			st.Dirs = missingDirs(filepath.Dir(path))
		}
		if existed {
			backup := freeName(path + BackupSuffix)
			sum := sha256.Sum256(src)
			st.Backup, st.Size, st.SHA256 = filepath.Base(backup), len(src), hex.EncodeToString(sum[:])
		}
		res.fill(st)
	} else {
		st = nil // recorded already
	}
	if dry {
		res.Action = "would-write"
		return res, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return res, fmt.Errorf("setup %s: create %s: %w", path, filepath.Dir(path), err)
	}
	if st != nil {
		if existed {
			if err := writeNew(res.Backup, src, 0o600); err != nil {
				return res, fmt.Errorf("setup %s: backup: %w", path, err)
			}
		}
		data, _ := json.MarshalIndent(st, "", "  ")
		if err := writeNew(res.State, append(data, '\n'), 0o600); err != nil {
			if existed {
				os.Remove(res.Backup) // recorded nowhere: not a backup
			}
			return res, fmt.Errorf("setup %s: state: %w", path, err)
		}
	}
	if err := writeAtomic(path, out, perm); err != nil {
		return res, fmt.Errorf("setup %s: %w", path, err)
	}
	res.Action = "written"
	return res, nil
}

// Undo restores the target's config file as it was before the first
// setup: the backup its state file records goes back byte for byte (or
// the file setup created is removed), and the backup and state file are
// deleted. When the file was changed since setup wrote it, the changed
// file is kept as path+UndoneSuffix first, so nothing is lost; and in a
// file the agent rewrites itself (Claude Code's ~/.claude.json) only
// setup's keys are taken out of the changed file, the rest kept. A
// backup that changed since setup wrote it, a state file prunesched did
// not write, and a read-only file are errors, and nothing is touched.
// With no state file the error is ErrNothingToUndo. dry writes nothing.
func Undo(t Target, dry bool) (Result, error) {
	p, res, err := t.start("undo")
	if err != nil {
		return res, err
	}
	path := res.File
	st, orig, err := readState(path)
	if err != nil {
		return res, fmt.Errorf("undo %s: %w; nothing restored", path, err)
	}
	if st == nil {
		err := fmt.Errorf("%w for %s: no %s beside it (setup did not change it, or undo ran already)", ErrNothingToUndo, path, filepath.Base(path+StateSuffix))
		if exists(path + BackupSuffix) {
			err = fmt.Errorf("%w; %s is not one prunesched recorded: if it is the original, restore it by hand", err, filepath.Base(path+BackupSuffix))
		}
		return res, err
	}
	res.fill(st)
	cur, curExists, err := readOptional(path)
	if err != nil {
		return res, fmt.Errorf("undo %s: %w", path, err)
	}
	changed := false
	if curExists {
		// The file is what setup made of the original when editing both
		// the same way gives the same bytes.
		want, _, err1 := p.edit(orig, probe)
		got, _, err2 := p.edit(cur, probe)
		if changed = err1 != nil || err2 != nil || !bytes.Equal(want, got); changed {
			res.Saved = freeName(path + UndoneSuffix)
		}
		if err := writable(path); err != nil {
			return res, fmt.Errorf("undo %s: %w", path, err)
		}
	}
	switch {
	case changed && p.live != nil:
		res.Action = "reverted"
		if res.Content, err = revert(cur, orig, p.live); err != nil {
			return res, fmt.Errorf("undo %s: %w; nothing restored", path, err)
		}
	case st.Created:
		res.Action = "removed"
	default:
		res.Action, res.Content = "restored", orig
	}
	if dry {
		res.Action = map[string]string{"reverted": "would-revert", "removed": "would-remove", "restored": "would-restore"}[res.Action]
		return res, nil
	}
	if res.Saved != "" {
		if err := writeAtomic(res.Saved, cur, 0o600); err != nil {
			return res, fmt.Errorf("undo %s: %w", path, err)
		}
	}
	if res.Action == "removed" {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return res, fmt.Errorf("undo %s: %w", path, err)
		}
	} else {
		perm := fs.FileMode(0o600)
		if fi, err := os.Stat(path); err == nil {
			perm = fi.Mode().Perm()
		} else if fi, err := os.Stat(res.Backup); err == nil && !st.Created {
			perm = fi.Mode().Perm()
		}
		if err := writeAtomic(path, res.Content, perm); err != nil {
			return res, fmt.Errorf("undo %s: %w", path, err)
		}
	}
	// The state first: a backup it no longer records is not trusted.
	if err := os.Remove(res.State); err != nil {
		return res, fmt.Errorf("undo %s: remove %s: %w", path, res.State, err)
	}
	if !st.Created {
		if err := os.Remove(res.Backup); err != nil {
			return res, fmt.Errorf("undo %s: remove %s: %w", path, res.Backup, err)
		}
	}
	if res.Action == "removed" {
		removeEmptyDirs(filepath.Dir(path), st.Dirs)
	}
	return res, nil
}

// revert takes setup's values at paths out of cur: each gets the value
// orig had (nil: no file), or is removed with the objects setup added
// for it.
func revert(cur, orig []byte, paths [][]string) ([]byte, error) {
	out := cur
	for _, path := range paths {
		v, had, err := getJSON(orig, path)
		if err != nil {
			return nil, err
		}
		if had {
			var done bool
			if out, done, err = replaceJSON(out, orig, path); err == nil && !done {
				out, _, _, err = setJSON(out, path, v)
			}
		} else {
			out, err = deleteJSON(out, path, func(prefix []string) bool {
				_, ok, _ := getJSON(orig, prefix)
				return ok
			})
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// freeName returns path, or path-2, path-3, ... the first that does not
// exist, so an earlier copy is not overwritten.
func freeName(path string) string {
	p := path
	for i := 2; exists(p); i++ {
		p = fmt.Sprintf("%s-%d", path, i)
	}
	return p
}

// writeNew creates path with data; an existing file is an error (a backup
// or state file is never overwritten).
func writeNew(path string, data []byte, perm fs.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// writeAtomic replaces path with data: a temporary file in the same
// directory, synced, then renamed over it, so a crash leaves the old file
// or the new one, never half of one.
func writeAtomic(path string, data []byte, perm fs.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if err := f.Chmod(perm); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// missingDirs counts the directories of dir's path, from dir up, that do
// not exist yet (what MkdirAll will create).
func missingDirs(dir string) int {
	n := 0
	for {
		if _, err := os.Lstat(dir); err == nil {
			return n
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return n
		}
		n++
		dir = parent
	}
}

// removeEmptyDirs removes dir and up to n-1 of its parents, innermost
// first, while they are empty: the directories setup created and nothing
// else has used since. A directory that is not empty stops it.
func removeEmptyDirs(dir string, n int) {
	for range n {
		if os.Remove(dir) != nil {
			return
		}
		dir = filepath.Dir(dir)
	}
}

// start resolves t for verb ("setup", "undo"): the agent's part of the
// edit and the result naming the file, symbolic links followed.
func (t Target) start(verb string) (part, Result, error) {
	p, err := t.part()
	if err != nil {
		return part{}, Result{}, err
	}
	res := Result{Agent: t.Agent, File: t.File}
	path, err := resolve(t.File)
	if err != nil {
		return part{}, res, fmt.Errorf("%s %s: %w", verb, t.File, err)
	}
	res.File = path
	return p, res, nil
}
