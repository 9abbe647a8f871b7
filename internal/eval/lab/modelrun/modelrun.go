// Package modelrun runs the Context Lab's probe tasks against a real model
// behind any OpenAI-compatible chat endpoint (POST {URL}/chat/completions:
// a local vLLM, Ollama or llama.cpp server, or a provider). For each row
// and probe it sends the bundle as the row leaves it for the probe's
// request (the projection's OpenAI rendering; its last user message asks
// the probe's question), offers the context_recover tool (agenttools'
// description and schema) where the row's placeholders name the original,
// answers each call with the original item from the log, byte for byte,
// for a bounded number of calls, and scores the final answer against the
// fixture's ground truth with Score. The report puts task success beside
// the lab's evidence-presence scores.
//
// It must not: print or log the API key, read the wall clock, or hold
// global state (the HTTP client is the caller's).
package modelrun

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"

	"github.com/prunesched/prunesched/internal/agenttools"
	"github.com/prunesched/prunesched/internal/eval/lab"
	"github.com/prunesched/prunesched/internal/terms"
	"github.com/prunesched/prunesched/projections"
)

// Endpoint is an OpenAI-compatible chat endpoint.
type Endpoint struct {
	// URL is the API base, e.g. http://127.0.0.1:8000/v1; requests go to
	// URL + "/chat/completions".
	URL string
	// Model is the request's model name.
	Model string
	// APIKey, when set, is sent as a bearer token. It is never printed.
	APIKey string
	// Flag names the setting URL came from in error messages ("--model").
	Flag string
	// HTTP sends the requests.
	HTTP *http.Client
}

// Config is one model run.
type Config struct {
	Lab lab.Config
	// Conditions are the rows to run, in report order of the lab when
	// empty (every row).
	Conditions []string
	Endpoint   Endpoint
	// MaxRecoveries bounds the context_recover calls answered per probe;
	// past it the model is asked once more without the tool.
	MaxRecoveries int
	// Progress, when set, receives a line per row started and finished.
	Progress io.Writer
}

// Row is one row's outcome with the model.
type Row struct {
	Condition string `json:"condition"`
	Probes    int    `json:"probes"`
	// EvidencePresent and Recoverable are the lab's scores for the same
	// bundles (evidence verbatim in context; absent but behind our
	// placeholder).
	EvidencePresent int `json:"evidence_present"`
	Recoverable     int `json:"recoverable"`
	// Succeeded counts the probes whose final answer Score accepts;
	// SuccessRate their share.
	Succeeded   int     `json:"succeeded"`
	SuccessRate float64 `json:"success_rate"`
	// RecoveryCalls counts the context_recover calls the model made;
	// Recovered those answered with an original; SucceededAfterRecovery
	// the successes of probes where the model recovered something.
	RecoveryCalls          int `json:"recovery_calls"`
	Recovered              int `json:"recovered"`
	SucceededAfterRecovery int `json:"succeeded_after_recovery"`
	// Requests is the chat requests sent.
	Requests int `json:"requests"`
}

// Report is a whole model run.
type Report struct {
	Model  string `json:"model"`
	Seed   uint64 `json:"seed"`
	Scorer string `json:"scorer"`
	Rows   []Row  `json:"rows"`
}

// ScorerNote says how Score decides.
const ScorerNote = "an answer succeeds when it contains the probe's ground-truth evidence (case and runs of white space ignored), " +
	"or every distinctive term of it (paths, file names, identifiers, numbers of 4+ digits, error codes, hashes: terms.Of) when it has any"

// Score reports whether answer gives the probe's ground truth: the
// evidence string itself, compared with case folded and runs of white
// space collapsed, or, when the evidence has distinctive terms
// (terms.Of), every one of them (case folded). Deterministic.
func Score(answer, evidence string) bool {
	a := normalize(answer)
	if e := normalize(evidence); e != "" && strings.Contains(a, e) {
		return true
	}
	ts := terms.Of(evidence)
	if len(ts) == 0 {
		return false
	}
	for _, t := range ts {
		if !strings.Contains(a, strings.ToLower(t)) {
			return false
		}
	}
	return true
}

func normalize(s string) string { return strings.ToLower(strings.Join(strings.Fields(s), " ")) }

// Run runs every probe of cfg.Lab's fixture under each row with the model.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Endpoint.HTTP == nil {
		return nil, fmt.Errorf("model run: no HTTP client")
	}
	if cfg.MaxRecoveries < 0 {
		return nil, fmt.Errorf("model run: negative recovery bound %d", cfg.MaxRecoveries)
	}
	rep := &Report{Model: cfg.Endpoint.Model, Seed: cfg.Lab.Seed, Scorer: ScorerNote}
	var row *Row
	finish := func() {
		if row == nil {
			return
		}
		if row.Probes > 0 {
			row.SuccessRate = float64(int(1e6*float64(row.Succeeded)/float64(row.Probes)+0.5)) / 1e6
		}
		progress(cfg.Progress, "model: row %s done: %d/%d answered correctly (evidence present %d, recoverable %d), %d recovery calls",
			row.Condition, row.Succeeded, row.Probes, row.EvidencePresent, row.Recoverable, row.RecoveryCalls)
		rep.Rows = append(rep.Rows, *row)
	}
	err := lab.WalkProbes(ctx, cfg.Lab, cfg.Conditions, func(pc lab.ProbeContext) error {
		if row == nil || row.Condition != pc.Condition {
			finish()
			row = &Row{Condition: pc.Condition}
			progress(cfg.Progress, "model: row %s: %d probes", pc.Condition, pc.Total)
		}
		out, err := askProbe(ctx, cfg, pc)
		if err != nil {
			return fmt.Errorf("row %s, session %s, probe %s: %w", pc.Condition, pc.Session, pc.Probe.ID, err)
		}
		row.Probes++
		if pc.EvidencePresent {
			row.EvidencePresent++
		}
		if pc.Recoverable {
			row.Recoverable++
		}
		row.Requests += out.requests
		row.RecoveryCalls += out.calls
		row.Recovered += out.recovered
		if Score(out.answer, pc.Probe.Evidence) {
			row.Succeeded++
			if out.recovered > 0 {
				row.SucceededAfterRecovery++
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("model run: %w", err)
	}
	finish()
	return rep, nil
}

func progress(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", args...)
	}
}

// outcome is one probe's exchange with the model.
type outcome struct {
	answer                     string
	requests, calls, recovered int
}

// message is a chat message as sent and received.
type message struct {
	Role       string     `json:"role"`
	Content    *string    `json:"content"`
	ToolCalls  []toolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

type toolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chatRequest struct {
	Model       string            `json:"model"`
	Messages    []json.RawMessage `json:"messages"`
	Tools       []json.RawMessage `json:"tools,omitempty"`
	Temperature float64           `json:"temperature"`
}

type chatResponse struct {
	Choices []struct {
		Message message `json:"message"`
	} `json:"choices"`
}

// recoverTool is context_recover as an OpenAI function tool.
func recoverTool() (json.RawMessage, error) {
	return json.Marshal(map[string]any{"type": "function", "function": map[string]any{
		"name": string(agenttools.Recover), "description": agenttools.Description(agenttools.Recover),
		"parameters": agenttools.Schema(agenttools.Recover),
	}})
}

// askProbe sends the probe's bundle, answers context_recover calls, and
// returns the final answer.
func askProbe(ctx context.Context, cfg Config, pc lab.ProbeContext) (outcome, error) {
	var out outcome
	body, err := projections.RenderOpenAI(ctx, pc.Bundle, pc.Blobs, nil)
	if err != nil {
		return out, fmt.Errorf("render the bundle: %w", err)
	}
	var rendered struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(body, &rendered); err != nil {
		return out, fmt.Errorf("read the rendered bundle: %w", err)
	}
	req := chatRequest{Model: cfg.Endpoint.Model, Messages: rendered.Messages}
	if !endsWithQuestion(rendered.Messages, pc.Probe.Question) {
		q, err := json.Marshal(message{Role: "user", Content: ptr("Task: " + pc.Probe.Question)})
		if err != nil {
			return out, err
		}
		req.Messages = append(req.Messages, q)
	}
	if pc.OwnPlaceholder && cfg.MaxRecoveries > 0 {
		t, err := recoverTool()
		if err != nil {
			return out, err
		}
		req.Tools = []json.RawMessage{t}
	}
	for rounds := 1; ; rounds++ {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		m, err := cfg.Endpoint.chat(ctx, req)
		out.requests++
		if err != nil {
			return out, err
		}
		if len(m.ToolCalls) == 0 || req.Tools == nil {
			if m.Content != nil {
				out.answer = *m.Content
			}
			return out, nil
		}
		m.Role = "assistant"
		am, err := json.Marshal(m)
		if err != nil {
			return out, err
		}
		req.Messages = append(req.Messages, am)
		for _, tcall := range m.ToolCalls {
			text := ""
			k, ok := agenttools.Match(tcall.Function.Name)
			switch {
			case !ok || k != agenttools.Recover:
				text = "prunesched: unknown tool " + tcall.Function.Name + "; only " + string(agenttools.Recover) + " is offered"
			case out.calls >= cfg.MaxRecoveries:
				out.calls++
				text = fmt.Sprintf("prunesched: recovery limit reached (%d calls); answer with what you have", cfg.MaxRecoveries)
			default:
				out.calls++
				var got bool
				text, got = recoverItem(ctx, pc, tcall.Function.Arguments)
				if got {
					out.recovered++
				}
			}
			tm, err := json.Marshal(message{Role: "tool", ToolCallID: tcall.ID, Content: &text})
			if err != nil {
				return out, err
			}
			req.Messages = append(req.Messages, tm)
		}
		if out.calls >= cfg.MaxRecoveries || rounds > cfg.MaxRecoveries {
			req.Tools = nil // the next answer is the final one
		}
	}
}

// endsWithQuestion reports whether the last message is the user's message
// asking the probe's question (the fixture asks it right before the
// probe's request).
func endsWithQuestion(msgs []json.RawMessage, question string) bool {
	if len(msgs) == 0 {
		return false
	}
	var m message
	if json.Unmarshal(msgs[len(msgs)-1], &m) != nil || m.Role != "user" || m.Content == nil {
		return false
	}
	return strings.Contains(*m.Content, question)
}

// recoverItem answers one context_recover call as the proxy does: the
// original of the removed item the handle names, byte for byte from the
// log, or why not. got is true when it is an original.
func recoverItem(ctx context.Context, pc lab.ProbeContext, args string) (text string, got bool) {
	var a agenttools.RecoverArgs
	if err := agenttools.DecodeArgs(agenttools.Recover, []byte(args), &a); err != nil {
		return "prunesched: " + err.Error(), false
	}
	n, err := agenttools.ParseHandle(a.Handle)
	if err != nil {
		return "prunesched: " + err.Error(), false
	}
	for _, bi := range pc.Bundle.Items {
		if bi.Index != n {
			continue
		}
		if !bi.Pruned {
			return fmt.Sprintf("prunesched: #%d is not removed: it is in your context as it was.", n), false
		}
		o, err := bi.Original(ctx, pc.Blobs)
		if err != nil {
			return fmt.Sprintf("prunesched: #%d could not be read from the log (%v)", n, err), false
		}
		return o, true
	}
	return fmt.Sprintf("prunesched: not found: no item #%d in this session", n), false
}

func ptr(s string) *string { return &s }

// maxExcerpt bounds the body quoted in an error.
const maxExcerpt = 300

// chat sends one chat request and returns the first choice's message.
func (e Endpoint) chat(ctx context.Context, req chatRequest) (message, error) {
	var m message
	body, err := json.Marshal(req)
	if err != nil {
		return m, fmt.Errorf("encode the chat request: %w", err)
	}
	url := strings.TrimRight(e.URL, "/") + "/chat/completions"
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return m, fmt.Errorf("model endpoint %s (%s): %w", e.URL, e.flag(), err)
	}
	hr.Header.Set("Content-Type", "application/json")
	if e.APIKey != "" {
		hr.Header.Set("Authorization", "Bearer "+e.APIKey)
	}
	resp, err := e.HTTP.Do(hr)
	if err != nil {
		if ctx.Err() != nil {
			return m, ctx.Err()
		}
		return m, fmt.Errorf("model endpoint %s (%s) unreachable: %s", e.URL, e.flag(), e.redact(err.Error()))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return m, fmt.Errorf("model endpoint %s: read the answer: %s", url, e.redact(err.Error()))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return m, fmt.Errorf("model endpoint %s answered %s: %s", url, resp.Status, e.redact(excerpt(data)))
	}
	var cr chatResponse
	if err := json.Unmarshal(data, &cr); err != nil {
		return m, fmt.Errorf("model endpoint %s: the answer is not a chat completion (%v): %s", url, err, e.redact(excerpt(data)))
	}
	if len(cr.Choices) == 0 {
		return m, fmt.Errorf("model endpoint %s: the answer has no choices: %s", url, e.redact(excerpt(data)))
	}
	return cr.Choices[0].Message, nil
}

func (e Endpoint) flag() string {
	if e.Flag == "" {
		return "the endpoint URL"
	}
	return e.Flag
}

// redact removes the API key from s, should a server or a transport echo it.
func (e Endpoint) redact(s string) string {
	if e.APIKey == "" {
		return s
	}
	return strings.ReplaceAll(s, e.APIKey, "[api key]")
}

func excerpt(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) <= maxExcerpt {
		return s
	}
	n := maxExcerpt
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// WriteTable prints the report: per row, the lab's evidence-presence
// scores beside the model's task success and its recovery calls.
func WriteTable(w io.Writer, r *Report) error {
	fmt.Fprintf(w, "Context Lab with a model: %s, seed %d\n", r.Model, r.Seed)
	fmt.Fprintf(w, "Scorer: %s.\n\n", r.Scorer)
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "row\tprobes\tevidence present\trecoverable\ttask success\trate\trecovery calls\trecovered\tsuccess after recovery\trequests\t")
	for _, x := range r.Rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.3f\t%d\t%d\t%d\t%d\t\n", x.Condition, x.Probes, x.EvidencePresent, x.Recoverable, x.Succeeded, x.SuccessRate, x.RecoveryCalls, x.Recovered, x.SucceededAfterRecovery, x.Requests)
	}
	return tw.Flush()
}
