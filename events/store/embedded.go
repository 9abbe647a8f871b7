package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"golang.org/x/crypto/bcrypt"
)

// DefaultMaxPayload is the largest message the embedded server accepts
// (8 MB), so a large event fits even before its tool output moves to the
// blob store.
const DefaultMaxPayload = 8 << 20

// EmbeddedConfig configures the in-process nats-server of the single-binary
// mode. The zero value, with a DataDir, listens on no port (clients connect
// in-process, with credentials) and uses JetStream's default fsync interval.
type EmbeddedConfig struct {
	// DataDir is where JetStream keeps its files (the server's store_dir;
	// the server itself creates a "jetstream" directory inside it).
	// Required: restarting on the same DataDir keeps every stream and
	// message.
	DataDir string
	// Listen opens a TCP client listener on Host:Port. Off by default: the
	// server then listens on no port at all and clients connect in-process
	// (Connect), so no other process can reach the log. Either way every
	// client must authenticate (see Connect and CredentialsFile).
	Listen bool
	// Host is the client listen address when Listen is set. Default
	// "127.0.0.1": the server is not reachable from other machines unless
	// asked.
	Host string
	// Port is the client port when Listen is set. Zero or -1 picks a random
	// free port; serve passes 4222-like values.
	Port int
	// SyncAlways makes JetStream fsync every write before acknowledging it.
	// Off by default: JetStream then fsyncs every SyncInterval, so
	// acknowledged writes from the last interval can be lost on power failure
	// (not on a process crash). On, appends get about 7-10x slower, batched
	// or not: the server syncs every stored message, so batching wins
	// little back (measured by `prunesched bench`, BenchmarkAppendSyncAlways;
	// see docs/performance.md).
	SyncAlways bool
	// SyncInterval is the fsync interval when SyncAlways is off. Zero keeps
	// the server default (2 minutes).
	SyncInterval time.Duration
	// ServerName names the server in logs and cluster views. Default
	// "prunesched".
	ServerName string
	// MaxPayload is the largest message the server accepts. Default
	// DefaultMaxPayload (8 MB); nats-server warns above 8 MB.
	MaxPayload int32
	// StartTimeout bounds how long StartEmbedded waits for the server to
	// accept connections when ctx has no earlier deadline. Default 30s
	// (JetStream recovers its files before it listens).
	StartTimeout time.Duration
}

func (c *EmbeddedConfig) setDefaults() {
	if c.Host == "" {
		c.Host = "127.0.0.1"
	}
	if c.Port == 0 {
		c.Port = server.RANDOM_PORT
	}
	if c.ServerName == "" {
		c.ServerName = "prunesched"
	}
	if c.MaxPayload == 0 {
		c.MaxPayload = DefaultMaxPayload
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 30 * time.Second
	}
}

// Validate reports a configuration the server would refuse or misuse. It is
// called by StartEmbedded after defaults are applied.
func (c EmbeddedConfig) Validate() error {
	var errs []error
	if c.DataDir == "" {
		errs = append(errs, errors.New("data dir: missing"))
	}
	if c.Port < server.RANDOM_PORT || c.Port > 65535 {
		errs = append(errs, fmt.Errorf("port: %d out of range (-1 for random, 1-65535)", c.Port))
	}
	if c.SyncInterval < 0 {
		errs = append(errs, fmt.Errorf("sync interval: negative (%s)", c.SyncInterval))
	}
	if c.MaxPayload < 0 {
		errs = append(errs, fmt.Errorf("max payload: negative (%d)", c.MaxPayload))
	}
	if c.StartTimeout < 0 {
		errs = append(errs, fmt.Errorf("start timeout: negative (%s)", c.StartTimeout))
	}
	if len(errs) > 0 {
		return fmt.Errorf("embedded nats config: %w", errors.Join(errs...))
	}
	return nil
}

// Embedded is a running in-process nats-server with JetStream file storage.
type Embedded struct {
	srv *server.Server
	cfg EmbeddedConfig
	log *slog.Logger
	// servicePass is the service user's password (CredentialsFile);
	// adminPass the admin's, random per start and never stored.
	servicePass, adminPass string
	lock                   *dirLock
}

// StartEmbedded starts nats-server in-process with JetStream on cfg.DataDir
// and returns once it accepts client connections. Server log lines go to
// logger (nil discards them) with component=nats-server.
func StartEmbedded(ctx context.Context, cfg EmbeddedConfig, logger *slog.Logger) (*Embedded, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	lock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	servicePass, err := loadOrCreateSecret(filepath.Join(cfg.DataDir, CredentialsFile))
	if err != nil {
		lock.release()
		return nil, err
	}
	adminPass, err := randomSecret()
	if err != nil {
		lock.release()
		return nil, err
	}
	// The server holds bcrypt hashes, never the passwords: nats-server
	// warns about plaintext passwords otherwise. The secrets are random
	// (32 bytes), so the lowest cost is enough and keeps each connection's
	// check cheap.
	adminHash, err := bcrypt.GenerateFromPassword([]byte(adminPass), bcrypt.MinCost)
	if err != nil {
		lock.release()
		return nil, fmt.Errorf("hash the admin secret: %w", err)
	}
	serviceHash, err := bcrypt.GenerateFromPassword([]byte(servicePass), bcrypt.MinCost)
	if err != nil {
		lock.release()
		return nil, fmt.Errorf("hash the service secret: %w", err)
	}
	opts := &server.Options{
		ServerName:   cfg.ServerName,
		Host:         cfg.Host,
		Port:         cfg.Port,
		DontListen:   !cfg.Listen,
		JetStream:    true,
		StoreDir:     cfg.DataDir,
		SyncAlways:   cfg.SyncAlways,
		SyncInterval: cfg.SyncInterval,
		MaxPayload:   cfg.MaxPayload,
		NoSigs:       true, // the host process owns signal handling
		// The server's first PING to a client comes 2 s after it connects
		// (an RTT sample) unless this is set; when the client's handshake
		// (CONNECT, PING, wait for PONG) takes longer, as on a loaded
		// machine under -race, the client reads that PING first and fails
		// "nats: expected 'PONG', got 'PING'" (nats-server issue 1174).
		// Without it the first PING comes at the PingInterval.
		DisableShortFirstPing: true,
		Users: []*server.User{
			{Username: AdminUser, Password: string(adminHash),
				AllowedConnectionTypes: map[string]struct{}{connTypeInProcess: {}}},
			{Username: ServiceUser, Password: string(serviceHash), Permissions: ServicePermissions()},
		},
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		lock.release()
		return nil, fmt.Errorf("create embedded nats-server: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			lock.release()
		}
	}()
	slogger := logger.With(slog.String("component", "nats-server"))
	srv.SetLoggerV2(&serverLogger{l: slogger}, slogger.Enabled(ctx, slog.LevelDebug), false, false)
	srv.Start()

	deadline := time.Now().Add(cfg.StartTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	for !srv.ReadyForConnections(100 * time.Millisecond) {
		if err := ctx.Err(); err != nil {
			srv.Shutdown()
			srv.WaitForShutdown()
			return nil, fmt.Errorf("start embedded nats-server: %w", err)
		}
		if time.Now().After(deadline) {
			srv.Shutdown()
			srv.WaitForShutdown()
			return nil, fmt.Errorf("start embedded nats-server: not ready after %s", cfg.StartTimeout)
		}
	}
	if !srv.JetStreamEnabled() {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, fmt.Errorf("start embedded nats-server: JetStream not enabled (store dir %s)", cfg.DataDir)
	}
	ok = true
	e := &Embedded{srv: srv, cfg: cfg, log: logger, servicePass: servicePass, adminPass: adminPass, lock: lock}
	logger.Info("embedded nats-server started",
		slog.String("url", e.ClientURL()),
		slog.String("data_dir", cfg.DataDir),
		slog.Bool("sync_always", cfg.SyncAlways))
	return e, nil
}

// ClientURL is the URL TCP clients use to reach the server (without
// credentials), or "" when it does not listen (the default). When the
// server listens on every interface (0.0.0.0 or ::) it names loopback.
func (e *Embedded) ClientURL() string {
	if !e.cfg.Listen {
		return ""
	}
	u := e.srv.ClientURL()
	switch e.cfg.Host {
	case "0.0.0.0":
		return strings.Replace(u, "0.0.0.0", "127.0.0.1", 1)
	case "::":
		return strings.Replace(u, "[::]", "[::1]", 1)
	}
	return u
}

// ServiceURL is ClientURL with the service user's credentials in it, for a
// client in another process (empty when the server does not listen). It
// holds a secret: never log it.
func (e *Embedded) ServiceURL() string {
	u := e.ClientURL()
	if u == "" {
		return ""
	}
	return strings.Replace(u, "nats://", "nats://"+ServiceUser+":"+e.servicePass+"@", 1)
}

// CredentialsPath is the file holding the service user's password.
func (e *Embedded) CredentialsPath() string { return filepath.Join(e.cfg.DataDir, CredentialsFile) }

// Connect opens an in-process connection as the service user: it may
// publish, consume and create streams and consumers, but not update,
// delete or purge a stream (ServicePermissions).
func (e *Embedded) Connect(name string, opts ...nats.Option) (*nats.Conn, error) {
	return e.connect(name, ServiceUser, e.servicePass, opts)
}

// ConnectAdmin opens an in-process connection as the admin user, which
// may do anything (the service uses it once at start, to create or update
// the stream and buckets). Only in-process connections may use it.
func (e *Embedded) ConnectAdmin(name string, opts ...nats.Option) (*nats.Conn, error) {
	return e.connect(name, AdminUser, e.adminPass, opts)
}

func (e *Embedded) connect(name, user, pass string, opts []nats.Option) (*nats.Conn, error) {
	all := append([]nats.Option{nats.Name(name), nats.InProcessServer(e.srv), nats.UserInfo(user, pass), nats.Timeout(ConnectTimeout)}, opts...)
	nc, err := nats.Connect("", all...)
	if err != nil {
		return nil, fmt.Errorf("connect in-process as %s: %w", user, err)
	}
	return nc, nil
}

// Server returns the underlying nats-server for advanced use (monitoring,
// in-process connections). Callers must not shut it down behind the
// Embedded's back.
func (e *Embedded) Server() *server.Server { return e.srv }

// Shutdown stops the server gracefully: it closes client connections, lets
// JetStream flush and close its files, and returns when the server is down.
// It is safe to call more than once.
func (e *Embedded) Shutdown() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
	e.lock.release()
	e.log.Info("embedded nats-server stopped", slog.String("data_dir", e.cfg.DataDir))
}

// serverLogger adapts nats-server's Logger to slog. Traces are dropped:
// they log message payloads, which can hold user content.
type serverLogger struct{ l *slog.Logger }

// Noticef logs at Debug: nats-server's notices are its start-up banner
// (ASCII art, version, limits, store directory) and routine chatter; the
// one line that matters, "embedded nats-server started", is logged at Info
// by StartEmbedded. Warnings and errors keep their levels.
func (s *serverLogger) Noticef(format string, v ...any) { s.l.Debug(fmt.Sprintf(format, v...)) }

// Warnf logs at Warn.
func (s *serverLogger) Warnf(format string, v ...any) { s.l.Warn(fmt.Sprintf(format, v...)) }

// Fatalf logs at Error; it never exits the host process.
func (s *serverLogger) Fatalf(format string, v ...any) {
	s.l.Error(fmt.Sprintf(format, v...), slog.Bool("fatal", true))
}

// Errorf logs at Error.
func (s *serverLogger) Errorf(format string, v ...any) { s.l.Error(fmt.Sprintf(format, v...)) }

// Debugf logs at Debug.
func (s *serverLogger) Debugf(format string, v ...any) { s.l.Debug(fmt.Sprintf(format, v...)) }

// Tracef drops the line (traces can carry payloads).
func (s *serverLogger) Tracef(string, ...any) {}
