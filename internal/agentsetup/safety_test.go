package agentsetup

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// dirNames lists the names in dir.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// TestDanglingSymlinkRefused: a config file that is a link to nothing is
// refused, by setup and undo, with an error naming the link and its
// target; the link stays and nothing is written.
func TestDanglingSymlinkRefused(t *testing.T) {
	for _, name := range Agents() {
		dir := t.TempDir()
		link := filepath.Join(dir, "conf")
		target := filepath.Join(dir, "dotfiles", "conf")
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		tg := Target{Agent: name, File: link}
		for _, dry := range []bool{true, false} {
			_, err := Setup(tg, withMCP, dry)
			if err == nil || !strings.Contains(err.Error(), link) || !strings.Contains(err.Error(), target+", which does not exist") {
				t.Errorf("%s setup (dry %v): %v", name, dry, err)
			}
		}
		if _, err := Undo(tg, false); err == nil || !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("%s undo: %v", name, err)
		}
		if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Fatalf("%s: the link is gone", name)
		}
		if got := dirNames(t, dir); !slices.Equal(got, []string{"conf"}) {
			t.Errorf("%s: wrote %v", name, got)
		}
		// Once the file it points to is there (empty will do), setup
		// edits it through the link.
		if err := os.MkdirAll(filepath.Dir(target), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(target, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if res, err := Setup(tg, withMCP, false); err != nil || res.File != target {
			t.Fatalf("%s setup through the link: %+v, %v", name, res, err)
		}
		if _, err := Undo(tg, false); err != nil || read(t, target) != "" {
			t.Fatalf("%s undo through the link: %v", name, err)
		}
		if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Fatalf("%s: the link is gone after undo", name)
		}
	}
}

// TestReadOnlyRefused: a file without its owner's write bit is refused
// by setup (dry or not) and by undo, with an error naming the file; it is
// left as it is, and no backup or state file is written. The mode bits
// decide, not the OS: the tests run as root, who may write anyway.
func TestReadOnlyRefused(t *testing.T) {
	for _, name := range Agents() {
		dir := t.TempDir()
		path := filepath.Join(dir, "conf")
		if err := os.WriteFile(path, []byte(originals[name]), 0o444); err != nil {
			t.Fatal(err)
		}
		tg := Target{Agent: name, File: path}
		for _, dry := range []bool{true, false} {
			_, err := Setup(tg, withMCP, dry)
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "read-only (mode 0444)") {
				t.Errorf("%s setup (dry %v): %v", name, dry, err)
			}
		}
		if got := dirNames(t, dir); !slices.Equal(got, []string{"conf"}) || read(t, path) != originals[name] {
			t.Errorf("%s: wrote %v", name, got)
		}
		// Made read-only after setup: undo refuses too, and keeps its
		// backup for a later undo.
		if err := os.Chmod(path, 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := Setup(tg, withMCP, false)
		if err != nil {
			t.Fatal(err)
		}
		written := read(t, path)
		if err := os.Chmod(path, 0o400); err != nil {
			t.Fatal(err)
		}
		if _, err := Undo(tg, false); err == nil || !strings.Contains(err.Error(), "read-only (mode 0400)") || read(t, path) != written || !exists(res.Backup) {
			t.Errorf("%s undo of a read-only file: %v", name, err)
		}
		if err := os.Chmod(path, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Undo(tg, false); err != nil || read(t, path) != originals[name] {
			t.Errorf("%s undo: %v", name, err)
		}
	}
}

// TestForeignBackupNotTrusted: a FILE.prunesched-backup that setup did
// not record (an older copy, another tool's, a dotfiles sync) is left
// alone: setup writes the original to a new name and records it, and undo
// restores that one.
func TestForeignBackupNotTrusted(t *testing.T) {
	for _, name := range Agents() {
		dir := t.TempDir()
		path := filepath.Join(dir, "conf")
		foreign := "not the original\n"
		if err := os.WriteFile(path, []byte(originals[name]), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{path + BackupSuffix, path + BackupSuffix + "-2"} {
			if err := os.WriteFile(f, []byte(foreign), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		tg := Target{Agent: name, File: path}
		// With no state file, undo has nothing to undo, and says why the
		// backup there is not used.
		_, err := Undo(tg, false)
		if !errors.Is(err, ErrNothingToUndo) || !strings.Contains(err.Error(), "not one prunesched recorded") {
			t.Errorf("%s undo before setup: %v", name, err)
		}
		res, err := Setup(tg, withMCP, false)
		if err != nil || res.Backup != path+BackupSuffix+"-3" || res.State != path+StateSuffix {
			t.Fatalf("%s setup: %+v, %v", name, res, err)
		}
		if read(t, res.Backup) != originals[name] {
			t.Fatalf("%s: the new backup is not the original", name)
		}
		res, err = Undo(tg, false)
		if err != nil || res.Action != "restored" || read(t, path) != originals[name] {
			t.Fatalf("%s undo: %+v, %v", name, res, err)
		}
		for _, f := range []string{path + BackupSuffix, path + BackupSuffix + "-2"} {
			if read(t, f) != foreign {
				t.Errorf("%s: undo touched %s", name, f)
			}
		}
		if exists(path+BackupSuffix+"-3") || exists(path+StateSuffix) {
			t.Errorf("%s: setup's backup or state left after undo", name)
		}
	}
}

// TestStateNotTrusted: a state file prunesched did not write, or one whose
// backup changed or went since setup, makes setup and undo stop with the
// reason, touching nothing.
func TestStateNotTrusted(t *testing.T) {
	orig := originals["claude-code"]
	setupOnce := func(t *testing.T) (Target, Result) {
		path := filepath.Join(t.TempDir(), "settings.json")
		if err := os.WriteFile(path, []byte(orig), 0o600); err != nil {
			t.Fatal(err)
		}
		tg := Target{Agent: "claude-code", File: path}
		res, err := Setup(tg, withMCP, false)
		if err != nil {
			t.Fatal(err)
		}
		return tg, res
	}
	cases := []struct {
		name   string
		tamper func(t *testing.T, res Result)
		msg    string
	}{
		{"backup changed", func(t *testing.T, res Result) {
			if err := os.WriteFile(res.Backup, []byte("{}"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "changed since setup wrote it"},
		{"backup gone", func(t *testing.T, res Result) {
			if err := os.Remove(res.Backup); err != nil {
				t.Fatal(err)
			}
		}, "no such file"},
		{"state not prunesched's", func(t *testing.T, res Result) {
			if err := os.WriteFile(res.State, []byte("backup=settings.json.prunesched-backup\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "not a state file prunesched wrote"},
		{"state of another file", func(t *testing.T, res Result) {
			b := strings.Replace(read(t, res.State), `"file": "settings.json"`, `"file": "other.json"`, 1)
			if err := os.WriteFile(res.State, []byte(b), 0o600); err != nil {
				t.Fatal(err)
			}
		}, `records the file "other.json"`},
		{"state naming a backup elsewhere", func(t *testing.T, res Result) {
			b := strings.Replace(read(t, res.State), `"backup": "settings.json.prunesched-backup"`, `"backup": "../settings.json.prunesched-backup"`, 1)
			if err := os.WriteFile(res.State, []byte(b), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "not one beside the file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tg, res := setupOnce(t)
			c.tamper(t, res)
			dir := filepath.Dir(tg.File)
			before := dirNames(t, dir)
			written := read(t, tg.File)
			if _, err := Undo(tg, false); err == nil || !strings.Contains(err.Error(), c.msg) || !strings.Contains(err.Error(), "nothing restored") {
				t.Errorf("undo: %v, want %q", err, c.msg)
			}
			if _, err := Setup(tg, Options{Proxy: "http://127.0.0.1:9999"}, false); err == nil || !strings.Contains(err.Error(), c.msg) || !strings.Contains(err.Error(), "nothing written") {
				t.Errorf("setup: %v, want %q", err, c.msg)
			}
			if got := dirNames(t, dir); !slices.Equal(got, before) || read(t, tg.File) != written {
				t.Errorf("files changed: %v, was %v", got, before)
			}
		})
	}
}
