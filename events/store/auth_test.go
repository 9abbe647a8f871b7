package store

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/permtest"
	"github.com/prunesched/prunesched/internal/testutil"
)

// TestEmbeddedListensNowhereByDefault: without Listen the server has no
// TCP listener; clients connect in-process, with credentials.
func TestEmbeddedListensNowhereByDefault(t *testing.T) {
	t.Parallel()
	e := startEmbedded(t, "", false)
	testutil.Equal(t, e.ClientURL(), "")
	testutil.True(t, e.Server().Addr() == nil, "server listens on %v", e.Server().Addr())
	// In-process without credentials is refused too.
	_, err := nats.Connect("", nats.InProcessServer(unblockedPipe{e.Server()}))
	testutil.Error(t, err, nats.ErrAuthorization)
	nc, err := e.Connect("test")
	testutil.NoError(t, err)
	nc.Close()
}

// unblockedPipe hands the client an in-process connection whose writes
// never block. Over the bare pipe a refused client waits ten seconds
// for its error: the client is still writing its PING when the server,
// which has read CONNECT, writes -ERR; neither reads until the server's
// write deadline closes the pipe, and the client then sees a closed
// pipe instead of the authorization error.
type unblockedPipe struct{ srv *server.Server }

func (p unblockedPipe) InProcessConn() (net.Conn, error) {
	c, err := p.srv.InProcessConn()
	if err != nil {
		return nil, err
	}
	u := &unblockedConn{Conn: c, out: make(chan []byte, 16), done: make(chan struct{})}
	go func() {
		for {
			select {
			case b := <-u.out:
				if _, err := c.Write(b); err != nil {
					return
				}
			case <-u.done:
				return
			}
		}
	}()
	return u, nil
}

// unblockedConn queues its writes for a goroutine that writes them in
// order (see unblockedPipe).
type unblockedConn struct {
	net.Conn
	out  chan []byte
	done chan struct{}
	once sync.Once
}

func (u *unblockedConn) Write(b []byte) (int, error) {
	select {
	case u.out <- append([]byte(nil), b...):
		return len(b), nil
	case <-u.done:
		return 0, net.ErrClosed
	}
}

func (u *unblockedConn) Close() error {
	u.once.Do(func() { close(u.done) })
	return u.Conn.Close()
}

// TestEmbeddedRefusesUnauthenticatedClients: with a TCP listener, a client
// without credentials or with wrong ones is refused, the admin cannot log
// in over TCP, and the service user's stored credentials work.
func TestEmbeddedRefusesUnauthenticatedClients(t *testing.T) {
	t.Parallel()
	e, err := StartEmbedded(testCtx(t), EmbeddedConfig{DataDir: t.TempDir(), Listen: true}, testLogger(t))
	testutil.NoError(t, err)
	t.Cleanup(e.Shutdown)
	url := e.ClientURL()
	testutil.True(t, url != "", "no client URL while listening")
	for name, opts := range map[string][]nats.Option{
		"no credentials":    nil,
		"wrong password":    {nats.UserInfo(ServiceUser, "guess-guess-guess")},
		"admin over TCP":    {nats.UserInfo(AdminUser, e.adminPass)},
		"unknown user name": {nats.UserInfo("acme", e.servicePass)},
	} {
		nc, err := nats.Connect(url, opts...)
		if err == nil {
			nc.Close()
			t.Errorf("%s: connected", name)
			continue
		}
		testutil.Contains(t, strings.ToLower(err.Error()), "authorization")
	}
	nc, err := nats.Connect(e.ServiceURL(), nats.Timeout(ConnectTimeout))
	testutil.NoError(t, err)
	nc.Close()
}

// TestServiceUserCannotDeleteOrPurge: the service user opens the store an
// admin created and works normally, but deleting, purging or
// reconfiguring the stream (and the id index) is refused, and nothing is
// lost.
func TestServiceUserCannotDeleteOrPurge(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	e := startEmbedded(t, "", false)
	openStore(t, connectAdmin(t, e), Config{})
	onErr, viol := permtest.Violations()
	svc, err := e.Connect("svc", onErr)
	testutil.NoError(t, err)
	t.Cleanup(svc.Close)
	s := openStore(t, svc, Config{})
	stored, err := s.Append(ctx, sessionEvents("acme", "s1"))
	testutil.NoError(t, err)

	js := s.JS()
	denied := func(subject string, op func(ctx context.Context) error) {
		t.Helper()
		permtest.Denied(t, ctx, viol, subject, "\""+subject+"\"", op)
	}
	st, err := js.Stream(ctx, events.StreamName)
	testutil.NoError(t, err)
	cfg := st.CachedInfo().Config
	cfg.MaxMsgs = 1
	denied("$JS.API.STREAM.DELETE.PRUNESCHED", func(ctx context.Context) error { return js.DeleteStream(ctx, events.StreamName) })
	denied("$JS.API.STREAM.DELETE.OBJ_"+DefaultBlobBucket, func(ctx context.Context) error { return js.DeleteObjectStore(ctx, DefaultBlobBucket) })
	denied("$JS.API.STREAM.PURGE.PRUNESCHED", func(ctx context.Context) error { return st.Purge(ctx) })
	denied("$JS.API.STREAM.UPDATE.PRUNESCHED", func(ctx context.Context) error { _, err := js.UpdateStream(ctx, cfg); return err })
	denied("$JS.API.STREAM.MSG.DELETE.PRUNESCHED", func(ctx context.Context) error { return st.DeleteMsg(ctx, stored[0].Seq) })

	got, err := s.ReadSession(ctx, "acme", "s1")
	testutil.NoError(t, err)
	testutil.Equal(t, len(got), len(stored))
	// The service still makes its own durable consumers.
	_, err = js.CreateOrUpdateConsumer(ctx, events.StreamName, jetstream.ConsumerConfig{Durable: "svc-test", AckPolicy: jetstream.AckExplicitPolicy})
	testutil.NoError(t, err)
}

// TestCredentialsFilePrivateAndReused: the service password lives in the
// data dir with mode 0600 and survives a restart; a file others can read
// is refused.
func TestCredentialsFilePrivateAndReused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := startEmbedded(t, dir, false)
	path := filepath.Join(dir, CredentialsFile)
	fi, err := os.Stat(path)
	testutil.NoError(t, err)
	testutil.Equal(t, fi.Mode().Perm(), os.FileMode(0o600))
	first := e.servicePass
	e.Shutdown()
	e2 := startEmbedded(t, dir, false)
	testutil.Equal(t, e2.servicePass, first)
	e2.Shutdown()
	testutil.NoError(t, os.Chmod(path, 0o644))
	_, err = StartEmbedded(testCtx(t), EmbeddedConfig{DataDir: dir}, nil)
	testutil.Error(t, err)
	testutil.Contains(t, err.Error(), "chmod 600")
}

// TestDataDirLocked: a second open of a data directory in use fails with
// an error saying so; after the first shuts down it opens.
func TestDataDirLocked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := startEmbedded(t, dir, false)
	_, err := StartEmbedded(testCtx(t), EmbeddedConfig{DataDir: dir}, nil)
	testutil.Error(t, err)
	testutil.Contains(t, err.Error(), "in use by another prunesched process")
	e.Shutdown()
	e2, err := StartEmbedded(testCtx(t), EmbeddedConfig{DataDir: dir}, nil)
	testutil.NoError(t, err)
	e2.Shutdown()
}
