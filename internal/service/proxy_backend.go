package service

import (
	"context"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/pipeline"
	"github.com/prunesched/prunesched/projections"
)

// ProxyBackend is the proxy's Backend over a store and a running pipeline:
// the log, the live decision and the projection. It lives here, with the
// service that owns both, so the proxy reaches the log and the pipeline
// only through its Backend interface (proxy.Backend and the optional
// interfaces the proxy asserts: deciding in memory, a fleet). It is safe
// for concurrent use as its store and pipeline are.
type ProxyBackend struct {
	st *store.Store
	p  *pipeline.Pipeline
}

// NewProxyBackend returns the proxy's Backend over st and the running
// pipeline p.
func NewProxyBackend(st *store.Store, p *pipeline.Pipeline) *ProxyBackend {
	return &ProxyBackend{st: st, p: p}
}

// Append stores facts and returns them stored (Seq set).
func (b *ProxyBackend) Append(ctx context.Context, evs []events.Event) ([]events.Event, error) {
	return b.st.Append(ctx, evs)
}

// LastFactSeq is the stream sequence of the session's last fact (0: none),
// as the stream's leader knows it (store.LastSeqLeader): never behind a
// fact whose publish was acknowledged, which a replica answering a direct
// get can be, so a fleet proxy that catches up before deciding sees the
// previous request's record.
func (b *ProxyBackend) LastFactSeq(ctx context.Context, tenant, session string) (uint64, error) {
	return b.st.LastSeqLeader(ctx, tenant, session, events.KindFact)
}

// FirstFactSeq is the stream sequence of the session's first fact (0:
// none known; a fleet proxy checking that its tail holds the session
// from its start).
func (b *ProxyBackend) FirstFactSeq(ctx context.Context, tenant, session string) (uint64, error) {
	return b.st.FirstSeq(ctx, tenant, session, events.KindFact)
}

// DecideLive has the scheduler worker decide the request from the log.
func (b *ProxyBackend) DecideLive(ctx context.Context, tenant, session string, lastFact uint64, at time.Time, req string) (*events.Event, error) {
	return b.p.Scheduler.DecideLiveAfter(ctx, tenant, session, lastFact, at, req)
}

// WaitSeq blocks until the projection has applied seq.
func (b *ProxyBackend) WaitSeq(ctx context.Context, seq uint64) error {
	return b.p.Projection.WaitSeq(ctx, seq)
}

// View runs fn on the session's projection; false when unknown.
func (b *ProxyBackend) View(tenant, session string, fn func(*projections.Session)) bool {
	return b.p.Projection.View(tenant, session, fn)
}

// Judged blocks until eligibility has judged the session's facts up to
// lastFact and the projection holds the marks it made for them.
func (b *ProxyBackend) Judged(ctx context.Context, tenant, session string, lastFact uint64) error {
	seq, err := b.p.Scheduler.WaitJudged(ctx, tenant, session, lastFact)
	if err != nil {
		return err
	}
	return b.p.Projection.WaitSeq(ctx, seq)
}

// Blob returns a payload stored by content address.
func (b *ProxyBackend) Blob(ctx context.Context, hash string) ([]byte, error) {
	return b.st.GetBlob(ctx, hash)
}

// FactsAndApplicationsAfter returns the session's facts and applications
// after stream sequence after, in log order (a fleet proxy catching up);
// lastFact, when not 0, is the session's last fact sequence as the caller
// just read it.
func (b *ProxyBackend) FactsAndApplicationsAfter(ctx context.Context, tenant, session string, after, lastFact uint64) ([]events.Event, error) {
	return b.st.FactsAndApplicationsAfter(ctx, tenant, session, after, lastFact)
}

// AppendAfter appends events of one session in order (facts, then at
// most an application), each only if the session's last fact is still the
// one before it (the first: at expect; 0: no fact yet): store.AppendChain,
// one atomic batch where the stream takes them. It returns the events
// stored before a failure; a failed expectation wraps events.ErrConflict.
func (b *ProxyBackend) AppendAfter(ctx context.Context, evs []events.Event, expect uint64) ([]events.Event, error) {
	return b.st.AppendChain(ctx, evs, expect)
}

// TailFactsAndApplications follows the log from now on
// (store.TailFactsAndApplications): a fleet proxy's tail.
func (b *ProxyBackend) TailFactsAndApplications(ctx context.Context, started func(), want func(tenant, session string) bool, fn func(seq uint64, tenant, session string, e *events.Event)) error {
	return b.st.TailFactsAndApplications(ctx, started, want, fn)
}

// ReadSession returns every event of the session in log order (the proxy
// rebuilding its in-memory state).
func (b *ProxyBackend) ReadSession(ctx context.Context, tenant, session string) ([]events.Event, error) {
	return b.st.ReadSession(ctx, tenant, session)
}

// ReadSessionLeader returns every event of the session in log order
// through its last event as the stream's leader knows it
// (store.ReadSessionLeader): a fleet proxy rebuilding its in-memory state
// while its tail of the log keeps the session's later events.
func (b *ProxyBackend) ReadSessionLeader(ctx context.Context, tenant, session string) ([]events.Event, error) {
	return b.st.ReadSessionLeader(ctx, tenant, session)
}

// Tokens is the token counter Append uses.
func (b *ProxyBackend) Tokens() events.TokenCounter { return b.st.Tokens() }

// SessionFacts says how many facts of the session the pipeline holds
// through stream sequence lastFact.
func (b *ProxyBackend) SessionFacts(tenant, session string, lastFact uint64) (int, bool) {
	return b.p.Scheduler.SessionFacts(tenant, session, lastFact)
}

// PutBlob stores a payload by content address.
func (b *ProxyBackend) PutBlob(ctx context.Context, hash string, data []byte) error {
	return b.st.PutBlob(ctx, hash, data)
}

// PutBlobString stores an output held as a string without copying it
// whole (events.StringBlobPutter).
func (b *ProxyBackend) PutBlobString(ctx context.Context, hash string, data string) error {
	return b.st.PutBlobString(ctx, hash, data)
}
