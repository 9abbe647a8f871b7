package store

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/nats-io/nats-server/v2/server"
)

// Identities of the embedded server. No client connects without one.
const (
	// ServiceUser is prunesched's own identity: its workers, API and
	// proxy. Its password is kept in the data directory (CredentialsFile).
	ServiceUser = "prunesched"
	// AdminUser may do anything, only in-process; its password is random
	// per start and never stored.
	AdminUser = "prunesched-admin"
	// CredentialsFile, inside the data directory, holds the service user's
	// password (mode 0600, generated on first start, reused after).
	CredentialsFile = "nats-service.password"
	// LockFile, inside the data directory, is held (flock) while a process
	// has the directory open.
	LockFile = "prunesched.lock"
)

// connTypeInProcess is jwt.ConnectionTypeInProcess: the admin user may only
// connect in-process.
const connTypeInProcess = "IN_PROCESS"

// ServiceDenied lists the JetStream API subjects the service user may not
// publish to: deleting, purging or reconfiguring a stream (lowering a limit
// drops events), deleting a message, restoring over a stream, purging the
// account, and cluster administration. prunesched never does these; the
// admin identity creates and updates the stream.
var ServiceDenied = []string{
	"$JS.API.STREAM.DELETE.>",
	"$JS.API.STREAM.PURGE.>",
	"$JS.API.STREAM.UPDATE.>",
	"$JS.API.STREAM.MSG.DELETE.>",
	"$JS.API.STREAM.RESTORE.>",
	"$JS.API.ACCOUNT.PURGE.>",
	"$JS.API.SERVER.>",
	"$JS.API.META.>",
	"$SYS.>",
}

// ServicePermissions are the service user's permissions: everything but
// ServiceDenied.
func ServicePermissions() *server.Permissions {
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: []string{">"}, Deny: ServiceDenied},
		Subscribe: &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"$SYS.>"}},
	}
}

// randomSecret returns 32 random bytes, base64url-encoded.
func randomSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate secret: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// loadOrCreateSecret returns the secret kept in path, creating it (mode
// 0600) when missing. A file others may read or write is refused.
func loadOrCreateSecret(path string) (string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		secret, err := randomSecret()
		if err != nil {
			return "", err
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return "", fmt.Errorf("create credentials %s: %w", path, err)
		}
		_, werr := f.WriteString(secret + "\n")
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			_ = os.Remove(path)
			return "", fmt.Errorf("write credentials %s: %w", path, werr)
		}
		return secret, nil
	}
	if err != nil {
		return "", fmt.Errorf("read credentials %s: %w", path, err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("credentials %s: %w", path, err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("credentials %s: mode %04o lets others read it; chmod 600 it", path, st.Mode().Perm())
	}
	secret := strings.TrimSpace(string(b))
	if len(secret) < 16 {
		return "", fmt.Errorf("credentials %s: secret shorter than 16 characters", path)
	}
	return secret, nil
}

// dirLock is an exclusive flock on a data directory's LockFile, held on
// its own open file description, so a second open fails even in the same
// process.
type dirLock struct{ f *os.File }

// lockDataDir takes the data directory's lock or says who holds it.
func lockDataDir(dir string) (*dirLock, error) {
	path := dir + string(os.PathSeparator) + LockFile
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock data dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			who := strings.TrimSpace(string(holder))
			if who != "" {
				who = " (pid " + who + ")"
			}
			return nil, fmt.Errorf("data directory %s is in use by another prunesched process%s: stop it, or use another --data", dir, who)
		}
		return nil, fmt.Errorf("lock data dir %s: %w", dir, err)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return &dirLock{f: f}, nil
}

// release drops the lock; safe on nil and more than once.
func (l *dirLock) release() {
	if l == nil || l.f == nil {
		return
	}
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	_ = l.f.Close()
	l.f = nil
}
