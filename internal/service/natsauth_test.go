package service

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/internal/permtest"
)

var deployPasswords = map[string]string{
	"PS_ADMIN_PASSWORD": "admin-pw-0123456789", "PS_SERVICE_PASSWORD": "service-pw-0123456789",
	"PS_TENANT_ACME_PASSWORD": "acme-pw-0123456789", "PS_TENANT_GLOBEX_PASSWORD": "globex-pw-0123456789",
	"PS_ROUTE_PASSWORD": "route-pw-0123456789",
}

// setDeployPasswords gives deploy/nats/auth.conf and n*.conf their
// environment.
func setDeployPasswords(t *testing.T) {
	for k, v := range deployPasswords {
		t.Setenv(k, v)
	}
}

// startDeployAuthServer starts a single nats-server with deploy/nats's
// users and permissions (auth.conf, as the cluster nodes include it).
func startDeployAuthServer(t *testing.T) *server.Server {
	t.Helper()
	setDeployPasswords(t)
	dir := t.TempDir()
	auth, err := os.ReadFile("../../deploy/nats/auth.conf")
	if err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf("include ./auth.conf\nlisten: 127.0.0.1:-1\nmax_payload: 8MB\njetstream { store_dir: %q }\n", filepath.Join(dir, "js"))
	if err := os.WriteFile(filepath.Join(dir, "auth.conf"), auth, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "n.conf"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(filepath.Join(dir, "n.conf"))
	if err != nil {
		t.Fatal(err)
	}
	opts.NoSigs, opts.NoLog = true, true
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	if !srv.ReadyForConnections(30 * time.Second) {
		t.Fatal("server not ready")
	}
	return srv
}

// TestDeployServiceUserMatchesEmbedded: the cluster's service user has the
// same permissions as the embedded server's (one rule, two places).
func TestDeployServiceUserMatchesEmbedded(t *testing.T) {
	setDeployPasswords(t)
	opts, err := server.ProcessConfigFile("../../deploy/nats/n1.conf")
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range opts.Users {
		if u.Username == store.ServiceUser {
			if !reflect.DeepEqual(u.Permissions, store.ServicePermissions()) {
				t.Errorf("deploy/nats/auth.conf service permissions %+v %+v differ from store.ServicePermissions %+v %+v",
					u.Permissions.Publish, u.Permissions.Subscribe, store.ServicePermissions().Publish, store.ServicePermissions().Subscribe)
			}
			return
		}
	}
	t.Errorf("no user %q in deploy/nats", store.ServiceUser)
}

// TestDeployTenantUsersIsolated: with deploy/nats's permissions a tenant's
// user reads its own sessions (live and replayed) and nothing of another
// tenant's, cannot write to the log or reach the workers' consumers, and a
// client without credentials is refused.
func TestDeployTenantUsersIsolated(t *testing.T) {
	srv := startDeployAuthServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := srv.ClientURL()
	connect := func(user string, opts ...nats.Option) (*nats.Conn, error) {
		pw := map[string]string{"admin": deployPasswords["PS_ADMIN_PASSWORD"], store.ServiceUser: deployPasswords["PS_SERVICE_PASSWORD"],
			"acme": deployPasswords["PS_TENANT_ACME_PASSWORD"]}[user]
		return nats.Connect(url, append([]nats.Option{nats.UserInfo(user, pw), nats.Timeout(store.ConnectTimeout)}, opts...)...)
	}
	for name, opts := range map[string][]nats.Option{
		"no credentials": nil, "acme with globex's password": {nats.UserInfo("acme", deployPasswords["PS_TENANT_GLOBEX_PASSWORD"])},
	} {
		if nc, err := nats.Connect(url, opts...); err == nil {
			nc.Close()
			t.Errorf("%s: connected", name)
		}
	}
	admin, err := connect("admin")
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := store.Open(ctx, admin, store.Config{}, nil); err != nil {
		t.Fatal(err)
	}
	svc, err := connect(store.ServiceUser)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	st, err := store.Open(ctx, svc, store.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	var evs []events.Event
	for _, tenant := range []string{"acme", "globex"} {
		for i := range 3 {
			evs = append(evs, events.New(fmt.Sprintf("e%d", i), tenant, "s-"+tenant, t0, &events.Message{Item: fmt.Sprintf("m%d", i), Role: events.RoleUser, Text: "secret of " + tenant}))
		}
	}
	if _, err := st.Append(ctx, evs); err != nil {
		t.Fatal(err)
	}

	onErr, viol := permtest.Violations()
	acme, err := connect("acme", nats.CustomInboxPrefix("_INBOX_acme"), onErr)
	if err != nil {
		t.Fatal(err)
	}
	defer acme.Close()
	denied := func(what string, op func(ctx context.Context) error) {
		t.Helper()
		permtest.Denied(t, ctx, viol, what, "", op)
	}
	js, err := jetstream.New(acme)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := js.CreateConsumer(ctx, events.StreamName, jetstream.ConsumerConfig{Name: "acme", FilterSubject: "ps.acme.>", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatalf("acme's own consumer: %v", err)
	}
	batch, err := cons.FetchNoWait(100)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for m := range batch.Messages() {
		if !strings.HasPrefix(m.Subject(), "ps.acme.") {
			t.Errorf("acme read %s", m.Subject())
		}
		_ = m.Ack()
		n++
	}
	if n != 3 {
		t.Errorf("acme replayed %d of its 3 events", n)
	}
	for _, filter := range []string{"ps.globex.>", "ps.>", "ps.*.s-globex.>"} {
		denied("consumer on "+filter, func(ctx context.Context) error {
			_, err := js.CreateConsumer(ctx, events.StreamName, jetstream.ConsumerConfig{Name: "acme", FilterSubject: filter})
			return err
		})
	}
	denied("the workers' consumer", func(ctx context.Context) error {
		_, err := js.Consumer(ctx, events.StreamName, "eligibility-0")
		return err
	})
	denied("get a message by sequence", func(ctx context.Context) error {
		_, err := acme.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+events.StreamName, []byte(`{"seq":4}`))
		return err
	})
	denied("delete the stream", func(ctx context.Context) error { return js.DeleteStream(ctx, events.StreamName) })
	denied("subscribe to globex", func(ctx context.Context) error {
		sub, err := acme.Subscribe("ps.globex.>", func(*nats.Msg) {})
		if err != nil {
			return err
		}
		_ = acme.Flush()
		<-ctx.Done() // the violation cancels it
		_ = sub.Unsubscribe()
		return nil
	})
	denied("subscribe to other inboxes", func(ctx context.Context) error {
		if _, err := acme.Subscribe("_INBOX.>", func(*nats.Msg) {}); err != nil {
			return err
		}
		_ = acme.Flush()
		<-ctx.Done()
		return nil
	})
	for _, subj := range []string{"ps.acme.s-acme.fact", "ps.globex.s-globex.fact"} {
		denied("publish to "+subj, func(ctx context.Context) error {
			if err := acme.Publish(subj, []byte(`{}`)); err != nil {
				return err
			}
			_ = acme.Flush()
			<-ctx.Done()
			return nil
		})
	}
	if got, err := st.ReadSession(ctx, "acme", "s-acme"); err != nil || len(got) != 3 {
		t.Errorf("acme's session after the attempts: %d events, %v", len(got), err)
	}
}
