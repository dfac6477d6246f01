package router

// Traces: one SERVER span per request, named and attributed after the
// OpenTelemetry GenAI semantic conventions (v1.41), and one CLIENT span
// per upstream call — each retry and each hedge its own — whose W3C
// traceparent the call carries. A client's traceparent is linked to,
// not continued: the SERVER span starts a trace of llmgw's, sampled as
// llmgw's sampler decides, with a link to the client's span, and nothing
// the client sent in traceparent, tracestate or baggage reaches an
// upstream. ContinueClientTrace, for clients the operator trusts,
// continues the client's trace instead.
// llmgw's own decisions (admission's, routing's, the tenant path) are
// attributes under llmgw.*. Without a tracer provider none of this runs:
// each step asks only whether the request has a span. The deprecated
// gen_ai.system is never written.

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/admission"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/pool"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/proxy"
)

// TelemetryOptions is what the router emits besides its metrics. The zero
// value emits nothing.
type TelemetryOptions struct {
	// Tracer makes the spans; nil traces nothing.
	Tracer trace.TracerProvider
	// RecordContent puts each request's prompt messages on its span as
	// gen_ai.input.messages; off, no message content is recorded.
	RecordContent bool
	// ContinueClientTrace continues a client's traceparent: the request's
	// spans join the client's trace, its tracestate goes on to the
	// upstream, and a parent-based sampler follows its sampled flag.
	// False, each request starts a trace of its own, linked to the
	// client's span.
	ContinueClientTrace bool
	// AccessLog takes one JSON line per request, each in one Write; nil
	// writes none (accesslog.go).
	AccessLog io.Writer
}

// tracing is the router's tracer and what its spans record.
type tracing struct {
	tracer         trace.Tracer
	content        bool // whether prompt messages go on spans
	continueClient bool // whether a client's traceparent is continued
}

// tracerName is the instrumentation scope of llmgw's spans.
const tracerName = "gitea.mynodes.xyz/ilker/llmgw/internal/router"

// newTracing is the router's tracing, nil without a tracer provider.
func newTracing(o TelemetryOptions) *tracing {
	if o.Tracer == nil {
		return nil
	}
	return &tracing{
		tracer:         o.Tracer.Tracer(tracerName, trace.WithSchemaURL(semconv.SchemaURL)),
		content:        o.RecordContent,
		continueClient: o.ContinueClientTrace,
	}
}

// traceContext reads and writes W3C traceparent and tracestate.
var traceContext = propagation.TraceContext{}

// llmgw's own attributes.
const (
	attrRequestID     = attribute.Key("llmgw.request.id")
	attrTenant        = attribute.Key("llmgw.tenant")
	attrPool          = attribute.Key("llmgw.pool")
	attrEndpoint      = attribute.Key("llmgw.endpoint")
	attrClass         = attribute.Key("llmgw.admission.class")
	attrQueueWait     = attribute.Key("llmgw.admission.queue_wait_seconds")
	attrDecision      = attribute.Key("llmgw.admission.decision")
	attrRefusal       = attribute.Key("llmgw.admission.refusal")
	attrPolicy        = attribute.Key("llmgw.route.policy")
	attrPredicted     = attribute.Key("llmgw.route.predicted_ttft_seconds")
	attrPrefixShare   = attribute.Key("llmgw.route.prefix_hit_ratio")
	attrPrefixBlocks  = attribute.Key("llmgw.route.prefix_hit_blocks")
	attrUpstreamError = attribute.Key("llmgw.upstream.reason")
	attrLost          = attribute.Key("llmgw.hedge.lost")
	attrEstimated     = attribute.Key("llmgw.usage.estimated")
)

// operation is gen_ai.operation.name for a request to a: chat for chat
// completions and the APIs translated to them, text_completion,
// embeddings; count_tokens, llmgw's own word, for a Messages token count.
func operation(a api) string {
	switch {
	case a.counts:
		return "count_tokens"
	case !a.generates:
		return semconv.GenAIOperationNameEmbeddings.Value.AsString()
	case a.upstreamPath == "/completions":
		return semconv.GenAIOperationNameTextCompletion.Value.AsString()
	}
	return semconv.GenAIOperationNameChat.Value.AsString()
}

// providerName is gen_ai.provider.name for a pool of kind: the
// convention's word for a hosted provider, else the server's (vllm,
// sglang).
func providerName(kind string) string {
	switch kind {
	case catalog.KindAnthropic:
		return semconv.GenAIProviderNameAnthropic.Value.AsString()
	case catalog.KindAzure:
		return semconv.GenAIProviderNameAzureAIOpenAI.Value.AsString()
	case catalog.KindOpenAI, "":
		return semconv.GenAIProviderNameOpenAI.Value.AsString()
	}
	return kind
}

// startSpan starts req's SERVER span and returns hr under the span's
// context. The span starts a trace of its own, linked to the client's
// span when its traceparent is valid, unless the client's trace is
// continued. It is named for the operation until the model is known.
func (r *Router) startSpan(hr *http.Request, req *parsedRequest) *http.Request {
	op := operation(req.api)
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameKey.String(op),
		attrRequestID.String(req.id),
		semconv.HTTPRequestMethodKey.String(hr.Method),
		semconv.HTTPRoute(hr.URL.Path),
	}
	if host, port := splitHostPort(hr.Host); host != "" && len(host) <= maxHostName {
		attrs = append(attrs, semconv.ServerAddress(host))
		if port > 0 {
			attrs = append(attrs, semconv.ServerPort(port))
		}
	}
	opts := make([]trace.SpanStartOption, 0, 5) // room for a new root and a link
	opts = append(opts, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithTimestamp(req.start), trace.WithAttributes(attrs...))
	ctx, carrier := hr.Context(), propagation.HeaderCarrier(hr.Header)
	if r.tracing.continueClient {
		ctx = traceContext.Extract(ctx, carrier)
	} else {
		// A new root: a parent-based sampler, seeing no parent, decides
		// as its root sampler does, whatever the client's flags say.
		opts = append(opts, trace.WithNewRoot())
		if sc := clientSpan(carrier); sc.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
		}
	}
	ctx, req.span = r.tracing.tracer.Start(ctx, op, opts...)
	req.ctx = ctx
	return hr.WithContext(ctx)
}

// maxHostName is the longest Host whose name goes on a span as
// server.address: a DNS name is at most 253 bytes, so a longer one names
// no server, and only the header's limit would bound it.
const maxHostName = 253

// clientSpan is the span a client's traceparent names, without its
// tracestate, which is the client's vendors' and goes nowhere; invalid
// when the client sent none, or one that does not parse.
func clientSpan(carrier propagation.HeaderCarrier) trace.SpanContext {
	sc := trace.SpanContextFromContext(traceContext.Extract(context.Background(), carrier))
	return sc.WithTraceState(trace.TraceState{})
}

// endSpan ends req's SERVER span with what came of the request: rec, the
// usage record it made, and errType. The span is named for the model
// only when the catalog knows the name the client gave and the key may
// use it.
func (r *Router) endSpan(req *parsedRequest, res *dispatchResult, rec *usage.Record, errType string) {
	span, o := req.span, &res.outcome
	op := operation(req.api)
	attrs := make([]attribute.KeyValue, 0, 20)
	if openai.Shown(req.Model) && req.Model != "" {
		attrs = append(attrs, semconv.GenAIRequestModel(req.Model))
		if req.model != nil {
			// Only a name the catalog knows names the span: a client's
			// made-up names, however many, leave the operation's alone.
			span.SetName(op + " " + req.Model)
		}
	}
	if req.api.generates {
		attrs = append(attrs, semconv.GenAIRequestStream(req.Stream))
	}
	if req.MaxTokens > 0 {
		attrs = append(attrs, semconv.GenAIRequestMaxTokens(int(req.MaxTokens)))
	}
	if req.key != nil && req.key.Tenant != "" {
		attrs = append(attrs, attrTenant.String(req.key.Tenant))
	}
	if req.model != nil {
		attrs = append(attrs, attrClass.String(req.class.String()))
	}
	if res.pool != "" {
		attrs = append(attrs, attrPool.String(res.pool), attrEndpoint.String(res.endpoint))
		if s := r.snap.Load(); s != nil && s.pools[res.pool] != nil {
			attrs = append(attrs, semconv.GenAIProviderNameKey.String(providerName(s.pools[res.pool].kind)))
		}
	}
	if o.Status == http.StatusOK && rec.Model != "" {
		attrs = append(attrs, semconv.GenAIResponseModel(rec.Model))
	}
	attrs = appendUsage(attrs, o)
	attrs = append(attrs, semconv.HTTPResponseStatusCode(o.Status))
	if r.tracing.content {
		if m := inputMessages(req); m != "" {
			attrs = append(attrs, semconv.GenAIInputMessagesKey.String(m))
		}
	}
	if errType != "" {
		attrs = append(attrs, semconv.ErrorTypeKey.String(errType))
		span.SetStatus(codes.Error, errType)
	}
	span.SetAttributes(attrs...)
	span.End()
}

// appendUsage appends an answer's token counts and finish reason.
func appendUsage(attrs []attribute.KeyValue, o *proxy.Outcome) []attribute.KeyValue {
	if u := o.Usage; u != nil {
		attrs = append(attrs, semconv.GenAIUsageInputTokens(int(u.PromptTokens)),
			semconv.GenAIUsageOutputTokens(int(u.CompletionTokens)),
			semconv.GenAIUsageCacheReadInputTokens(int(u.CachedTokens())))
		if o.Estimated {
			attrs = append(attrs, attrEstimated.Bool(true))
		}
	}
	if o.FinishReason != "" {
		attrs = append(attrs, semconv.GenAIResponseFinishReasons(o.FinishReason))
	}
	return attrs
}

// noteAdmission puts what admission decided of req on its span: the
// decision (admitted, queued, fell_back, refused, cancelled), the time
// it waited, and a refusal's code.
func noteAdmission(req *parsedRequest, t *admission.Ticket, err error, waited time.Duration) {
	decision := "admitted"
	var e *openai.Error
	switch {
	case err != nil && errors.As(err, &e) && e.Status == openai.StatusClientClosed:
		decision = "cancelled"
	case err != nil:
		decision = "refused"
		if e != nil && e.Code != "" {
			req.span.SetAttributes(attrRefusal.String(e.Code))
		}
	case t.FallbackTo() != nil:
		decision = "fell_back"
	case t.Queued():
		decision = "queued"
	}
	req.span.SetAttributes(attrDecision.String(decision), attrQueueWait.Float64(waited.Seconds()))
}

// traceAttempt starts the CLIENT span of one upstream call of req, which
// has a span, to endpoint i of p, puts the span in *ctx and its
// traceparent on the call's headers, and returns what ends it once the
// call is over.
func (r *Router) traceAttempt(ctx *context.Context, req *parsedRequest, p *servedPool, i int, rt *pool.Route, call *proxy.Call) func(proxy.Outcome) {
	op := operation(req.api)
	model := call.Model
	if s := r.snap.Load(); s != nil {
		if m, ok := s.cat.Resolve(call.Model); ok {
			model = m.UpstreamName()
		}
	}
	ep := p.Endpoints()[i]
	predicted, ok := (*ctx).Value(predictionKey{}).(float64)
	if !ok {
		predicted = p.Predicted(rt, i, time.Now())
	}
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameKey.String(op),
		semconv.GenAIProviderNameKey.String(providerName(p.kind)),
		semconv.GenAIRequestModel(model),
		attrPool.String(p.name), attrEndpoint.String(ep.Name()),
		attrPolicy.String(p.Policy()),
		attrPredicted.Float64(predicted),
		attrPrefixShare.Float64(rt.CachedShare(i)),
		attrPrefixBlocks.Int(int(rt.Matched(i))),
	}
	if req.api.generates {
		attrs = append(attrs, semconv.GenAIRequestStream(req.Stream))
	}
	if call.URL != nil {
		attrs = append(attrs, semconv.ServerAddress(call.URL.Hostname()))
		if port, err := strconv.Atoi(call.URL.Port()); err == nil {
			attrs = append(attrs, semconv.ServerPort(port))
		}
	}
	actx, span := r.tracing.tracer.Start(*ctx, op+" "+model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	*ctx = actx
	header := call.Header
	call.Header = header.Clone()
	traceContext.Inject(actx, propagation.HeaderCarrier(call.Header))
	call.Finish = true
	return func(o proxy.Outcome) {
		call.Header, call.Finish = header, false
		r.endAttempt(actx, span, &o)
	}
}

// predictionKey holds, in a hedged call's context, the first-token time
// routing predicted for its endpoint when it was picked.
type predictionKey struct{}

// notePick is ctx holding the prediction for endpoint i of p, read on the
// goroutine that picked it, for a traced call about to run on another:
// the route's prediction is rewritten by the next pick of the race, which
// may run while the call starts. ctx as it is when req is not traced.
func notePick(ctx context.Context, req *parsedRequest, p *servedPool, rt *pool.Route, i int) context.Context {
	if req.span == nil {
		return ctx
	}
	return context.WithValue(ctx, predictionKey{}, p.Predicted(rt, i, time.Now()))
}

// endAttempt ends a CLIENT span with what its call came to. A call that
// lost a hedged race is no failure: it says it lost.
func (r *Router) endAttempt(ctx context.Context, span trace.Span, o *proxy.Outcome) {
	attrs := appendUsage(make([]attribute.KeyValue, 0, 8), o)
	errType := errorType(o)
	if errors.Is(context.Cause(ctx), errLostRace) && o.Reason == proxy.ReasonNone {
		attrs, errType = append(attrs, attrLost.Bool(true)), ""
	}
	if o.Reason != proxy.ReasonNone {
		attrs = append(attrs, attrUpstreamError.String(o.Reason.String()))
	}
	if errType != "" {
		attrs = append(attrs, semconv.ErrorTypeKey.String(errType))
		span.SetStatus(codes.Error, errType)
	}
	span.SetAttributes(attrs...)
	span.End()
}

// traceExemplar is the exemplar that links an observation to the trace
// of ctx's span, {trace_id, span_id}; nil when ctx is nil or its span is
// not sampled. Histograms observe with it through observeExemplar.
func traceExemplar(ctx context.Context) prometheus.Labels {
	if ctx == nil {
		return nil
	}
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsSampled() {
		return nil
	}
	return prometheus.Labels{"trace_id": sc.TraceID().String(), "span_id": sc.SpanID().String()}
}

// observeExemplar observes v on o, with ex as its exemplar when ex is
// not nil and o takes exemplars.
func observeExemplar(o prometheus.Observer, v float64, ex prometheus.Labels) {
	if ex != nil {
		if eo, ok := o.(prometheus.ExemplarObserver); ok {
			eo.ObserveWithExemplar(v, ex)
			return
		}
	}
	o.Observe(v)
}

// splitHostPort is a Host header's host and port; port 0 when it names
// none.
func splitHostPort(hostport string) (string, int) {
	host, p, err := net.SplitHostPort(hostport)
	if err != nil {
		return hostport, 0
	}
	port, _ := strconv.Atoi(p)
	return host, port
}
