// Package proxy is prunesched at the edge of a live agent: an HTTP proxy in
// front of the model that speaks the Anthropic Messages API and the OpenAI
// Chat Completions and Responses APIs.
//
// For each agent request it derives the session (keyed by a secret HMAC
// of the request's credential, so a session never spans two credentials),
// appends the request's new messages, tool calls and tool results to the
// session's log as facts, asks the timing scheduler to decide at the
// request's time (the proxy is where that time is born), splices the
// placeholders of pruned items into the client's own request body (every
// other byte as the client wrote it), forwards it, streams the response
// back unchanged, and records the model request with the usage the
// upstream reported plus the assistant's answer under the session's lock,
// taken before the end of the response reaches the client and held while
// the record runs in the background (so the client's next request, which
// takes the lock too, is recorded after it, and the client does not wait
// for the record).
//
// It owns the wire protocols and the fail-open discipline: when anything
// inside prunesched fails or exceeds its time budget, the original request
// goes upstream unchanged. It must not decide anything itself (eligibility
// and timing belong to the pipeline), must never store or log credentials,
// and must never turn an upstream answer into something else.
package proxy
