package agentsetup

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// The files beside a config file setup changed.
const (
	// BackupSuffix names the original file, kept byte for byte by the
	// first setup that changed it; undo restores it.
	BackupSuffix = ".prunesched-backup"
	// CreatedSuffix names an empty marker: setup created the file, so
	// undo removes it.
	CreatedSuffix = ".prunesched-created"
	// UndoneSuffix names the copy undo keeps of a file that was changed
	// since setup wrote it (by the user or the agent), before restoring
	// the original over it.
	UndoneSuffix = ".prunesched-undone"
)

// Result is what Setup or Undo did (or, dry, would do) to one file.
type Result struct {
	Agent string `json:"agent"`
	File  string `json:"file"`
	// Action: written, unchanged, restored, removed; with dry run
	// would-write, would-restore, would-remove.
	Action  string   `json:"action"`
	Backup  string   `json:"backup,omitempty"`
	Saved   string   `json:"saved,omitempty"`
	Changes []Change `json:"changes,omitempty"`
	// Content is the file as written (or as it would be); nil when undo
	// removes it.
	Content []byte `json:"-"`
}

// probe is the proxy URL undo edits both files with to tell whether the
// current file is exactly what setup made of the original.
const probe = "http://prunesched-undo.invalid:1"

// resolve follows a symlinked config file (dotfile managers link them), so
// the edit lands in the real file and the link stays.
func resolve(path string) string {
	if p, err := filepath.EvalSymlinks(path); err == nil {
		return p
	}
	return path
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

// Setup points the agent whose config file is path at proxy. The first
// time it changes the file it keeps the original as path+BackupSuffix (or
// marks with path+CreatedSuffix that there was none); later runs keep that
// backup, so undo always goes back to the file before the first setup. A
// file already pointing at proxy is left untouched. dry computes the
// result without writing anything. A malformed file is an error naming
// the file, line and column, and nothing is written.
func Setup(name, path, proxy string, dry bool) (Result, error) {
	a, err := lookup(name)
	if err != nil {
		return Result{}, err
	}
	path = resolve(path)
	res := Result{Agent: name, File: path}
	src, existed, err := readOptional(path)
	if err != nil {
		return res, err
	}
	out, changes, err := a.edit(src, proxy)
	if err != nil {
		var se *SyntaxError
		if errors.As(err, &se) {
			return res, fmt.Errorf("%s:%d:%d: %s (the file is left as it is)", path, se.Line, se.Col, se.Msg)
		}
		return res, fmt.Errorf("%s: %w (the file is left as it is)", path, err)
	}
	res.Content, res.Changes = out, changes
	switch {
	case exists(path + BackupSuffix):
		res.Backup = path + BackupSuffix
	case exists(path + CreatedSuffix):
		res.Backup = path + CreatedSuffix
	}
	if existed && bytes.Equal(out, src) {
		res.Action, res.Changes = "unchanged", nil
		return res, nil
	}
	if dry {
		res.Action = "would-write"
		return res, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return res, fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	perm := fs.FileMode(0o600)
	if res.Backup == "" {
		if existed {
			fi, err := os.Stat(path)
			if err != nil {
				return res, err
			}
			perm = fi.Mode().Perm()
			res.Backup = path + BackupSuffix
			if err := writeNew(res.Backup, src, 0o600); err != nil {
				return res, err
			}
		} else {
			res.Backup = path + CreatedSuffix
			if err := writeNew(res.Backup, nil, 0o600); err != nil {
				return res, err
			}
		}
	} else if fi, err := os.Stat(path); err == nil {
		perm = fi.Mode().Perm()
	}
	if err := writeAtomic(path, out, perm); err != nil {
		return res, err
	}
	res.Action = "written"
	return res, nil
}

// Undo restores the file setup changed: the backup goes back byte for
// byte (or the file setup created is removed) and the backup is deleted.
// When the file was changed since setup wrote it, the changed file is kept
// as path+UndoneSuffix first, so nothing is lost. dry writes nothing.
func Undo(name, path string, dry bool) (Result, error) {
	a, err := lookup(name)
	if err != nil {
		return Result{}, err
	}
	path = resolve(path)
	res := Result{Agent: name, File: path}
	cur, curExists, err := readOptional(path)
	if err != nil {
		return res, err
	}
	var orig []byte
	created := false
	switch {
	case exists(path + BackupSuffix):
		res.Backup = path + BackupSuffix
		if orig, err = os.ReadFile(res.Backup); err != nil {
			return res, fmt.Errorf("read backup: %w", err)
		}
	case exists(path + CreatedSuffix):
		res.Backup, created = path+CreatedSuffix, true
	default:
		return res, fmt.Errorf("nothing to undo for %s: no %s beside it (setup did not change it, or undo ran already)", path, filepath.Base(path+BackupSuffix))
	}
	// The file is what setup made of the original when editing both with
	// the same proxy gives the same bytes.
	if curExists {
		want, _, err1 := a.edit(orig, probe)
		got, _, err2 := a.edit(cur, probe)
		if err1 != nil || err2 != nil || !bytes.Equal(want, got) {
			res.Saved = freeName(path + UndoneSuffix)
		}
	}
	if created {
		res.Action = "removed"
	} else {
		res.Action, res.Content = "restored", orig
	}
	if dry {
		res.Action = "would-" + strings.TrimSuffix(res.Action, "d") // would-restore, would-remove
		return res, nil
	}
	if res.Saved != "" {
		if err := writeAtomic(res.Saved, cur, 0o600); err != nil {
			return res, err
		}
	}
	if created {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return res, fmt.Errorf("remove %s: %w", path, err)
		}
	} else {
		perm := fs.FileMode(0o600)
		if fi, err := os.Stat(path); err == nil {
			perm = fi.Mode().Perm()
		} else if fi, err := os.Stat(res.Backup); err == nil {
			perm = fi.Mode().Perm()
		}
		if err := writeAtomic(path, orig, perm); err != nil {
			return res, err
		}
	}
	if err := os.Remove(res.Backup); err != nil {
		return res, fmt.Errorf("remove %s: %w", res.Backup, err)
	}
	return res, nil
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
// is never overwritten).
func writeNew(path string, data []byte, perm fs.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return fmt.Errorf("create backup: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write backup %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write backup %s: %w", path, err)
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
