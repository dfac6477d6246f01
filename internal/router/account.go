package router

// Accounting: once a request is answered, count it, time it, settle what
// it reserved against its limits, and write its usage record.

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// codeLabels are the code label's values, made once.
var codeLabels = func() (l [600]string) {
	for i := range l {
		l[i] = strconv.Itoa(i)
	}
	return l
}()

func codeLabel(status int) string {
	if status >= 0 && status < len(codeLabels) {
		return codeLabels[status]
	}
	return strconv.Itoa(status)
}

func (r *Router) account(req *parsedRequest, res dispatchResult) {
	took := time.Since(req.start)
	o := res.outcome
	model := r.metricModel(req.Model)
	pool := res.pool
	if pool == "" {
		pool = "none"
	}
	errType := errorType(&o)
	r.m.requests.WithLabelValues(model, pool, codeLabel(o.Status), errType).Inc()
	ex := traceExemplar(req.ctx) // nil unless the request's span is sampled
	if res.pool != "" {
		observeExemplar(r.m.duration.WithLabelValues(model, pool), took.Seconds(), ex)
		if req.Stream && o.TTFT > 0 && o.Usage != nil && o.Usage.CompletionTokens > 0 {
			observeExemplar(r.m.ttft.WithLabelValues(model, pool), o.TTFT.Seconds(), ex)
		}
	}
	r.observeGenAI(req, res, took, errType, ex)
	r.observeTokens(req, res, took)
	if r.log.Enabled(context.Background(), slog.LevelDebug) {
		r.logRequest(req, res, took)
	}
	rec := usageRecord(req, &res, took)
	if req.span != nil {
		r.endSpan(req, &res, &rec, errType)
	}
	if r.access != nil {
		r.writeAccess(req, &rec, errType)
	}

	if req.model == nil {
		return // refused before it was known what it asked for: nothing to bill
	}
	r.rates.note(req.model.Name, o.Status, time.Now())
	if req.model.Admission.Enabled && o.Status != openai.StatusClientClosed && !req.api.counts {
		r.goodput.Add(req.model.Name, req.class, r.metSLO(req, o))
		if tpot, _, ok := tokenTiming(req.Stream, o, 0); ok && tpot > 0 && res.pool != "" {
			if g := r.gates.Of(res.pool); g != nil {
				g.NoteTPOT(req.model.ClassSLO(req.class.String()).TPOTp99, tpot)
			}
		}
	}
	if res.pool != "" && o.Usage != nil {
		c := r.tokenCounters(rec.Model, res.pool)
		c[0].Add(float64(rec.PromptTokens))
		c[1].Add(float64(rec.CompletionTokens))
		c[2].Add(float64(rec.CachedTokens))
	}
	if req.reserved {
		r.opts.Limits.Settle(context.Background(), req.reserve, rec.PromptTokens+rec.CompletionTokens, rec.CostUSD)
	}
	if r.opts.Recorder == nil {
		return
	}
	r.opts.Recorder.Record(rec)
}

// usageRecord is what req came to, as the ledger and the access log take
// it: the model that served it, its usage and cost. A request refused
// before its model was known names no model and costs nothing.
func usageRecord(req *parsedRequest, res *dispatchResult, took time.Duration) usage.Record {
	o := &res.outcome
	rec := usage.Record{
		ID:        req.id,
		Time:      req.start,
		Pool:      res.pool,
		Endpoint:  res.endpoint,
		Estimated: o.Estimated,
		Status:    o.Status,
		TTFT:      o.TTFT,
		Duration:  took,
		Streamed:  req.Stream,
	}
	if u := o.Usage; u != nil {
		rec.PromptTokens, rec.CompletionTokens, rec.CachedTokens = u.PromptTokens, u.CompletionTokens, u.CachedTokens()
	}
	served := req.model
	if res.model != nil {
		served = res.model
	}
	if served != nil {
		rec.Model = served.Name
		rec.CostUSD = served.Price.At(res.tier).Cost(rec.PromptTokens, rec.CompletionTokens)
	}
	if req.key != nil {
		rec.KeyID, rec.Tenant = req.key.ID, req.key.Tenant
	}
	return rec
}

// logRequest writes one line per request: an access log, at debug level.
// It names the key by its id, never the key itself.
func (r *Router) logRequest(req *parsedRequest, res dispatchResult, took time.Duration) {
	o := res.outcome
	model := req.Model
	if !openai.Shown(model) {
		model = "(not shown)"
	}
	attrs := []slog.Attr{
		slog.String("id", req.id), slog.String("model", model), slog.String("pool", res.pool),
		slog.String("endpoint", res.endpoint), slog.Int("status", o.Status), slog.Bool("stream", req.Stream),
		slog.Duration("ttft", o.TTFT), slog.Duration("duration", took),
	}
	if u := o.Usage; u != nil {
		attrs = append(attrs, slog.Int64("prompt_tokens", u.PromptTokens), slog.Int64("completion_tokens", u.CompletionTokens), slog.Bool("estimated", o.Estimated))
	}
	if req.key != nil {
		attrs = append(attrs, slog.String("key_id", req.key.ID), slog.String("tenant", req.key.Tenant))
	}
	if o.Err != nil {
		attrs = append(attrs, slog.String("err", o.Err.Error()))
	}
	r.log.LogAttrs(context.Background(), slog.LevelDebug, "request", attrs...)
}

// tokenKinds are llmgw_tokens_total's kinds, in the order tokenCounters
// holds them.
var tokenKinds = [3]string{"prompt", "completion", "cached"}

// tokenCounters is llmgw_tokens_total's counters for a model served by a
// pool: resolved once per catalog for each model and its pool, and
// resolved here for a pair the catalog no longer has.
func (r *Router) tokenCounters(model, pool string) *[3]prometheus.Counter {
	if s := r.snap.Load(); s != nil {
		if c := s.tokens[model]; c != nil && c.pool == pool {
			return &c.counters
		}
	}
	var c [3]prometheus.Counter
	for i, kind := range tokenKinds {
		c[i] = r.m.tokens.WithLabelValues(model, pool, kind)
	}
	return &c
}

// modelTokens is a model's llmgw_tokens_total counters, for its pool.
type modelTokens struct {
	pool     string
	counters [3]prometheus.Counter
}
