package observe

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
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/admission"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/proxy"
)

// Tracing makes a request's spans, and is the Observer that ends its
// SERVER span.
type Tracing struct {
	tracer         trace.Tracer
	content        bool // whether prompt messages go on spans
	continueClient bool // whether a client's traceparent is continued
}

// tracerName is the instrumentation scope of llmgw's spans.
const tracerName = "gitea.mynodes.xyz/ilker/llmgw/internal/router"

var _ Observer = (*Tracing)(nil)

// NewTracing makes spans with tp; nil when tp is nil, and then nothing is
// traced.
// With content, each request's prompt messages go on its span; with
// continueClient, a client's traceparent is continued rather than linked
// to.
func NewTracing(tp trace.TracerProvider, content, continueClient bool) *Tracing {
	if tp == nil {
		return nil
	}
	return &Tracing{
		tracer:         tp.Tracer(tracerName, trace.WithSchemaURL(semconv.SchemaURL)),
		content:        content,
		continueClient: continueClient,
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
	attrFallbackClass = attribute.Key("llmgw.route.fallback_class")
)

// ProviderName is gen_ai.provider.name for a pool of kind: the
// convention's word for a hosted provider, else the server's (vllm,
// sglang).
func ProviderName(kind string) string {
	switch kind {
	case catalog.KindAnthropic:
		return semconv.GenAIProviderNameAnthropic.Value.AsString()
	case catalog.KindAzure:
		return semconv.GenAIProviderNameAzureAIOpenAI.Value.AsString()
	case catalog.KindBedrock:
		return semconv.GenAIProviderNameAWSBedrock.Value.AsString()
	case catalog.KindGemini:
		return semconv.GenAIProviderNameGCPGemini.Value.AsString()
	case catalog.KindVertex:
		return semconv.GenAIProviderNameGCPVertexAI.Value.AsString()
	case catalog.KindOpenAI, "":
		return semconv.GenAIProviderNameOpenAI.Value.AsString()
	}
	return kind
}

// Operation is gen_ai.operation.name of an API: OperationCount for a
// count, embeddings for one that generates nothing, text_completion for
// one whose calls go to /completions, and chat for the rest (chat
// completions and the APIs translated to them).
func Operation(counts, generates bool, upstreamPath string) string {
	switch {
	case counts:
		return OperationCount
	case !generates:
		return semconv.GenAIOperationNameEmbeddings.Value.AsString()
	case upstreamPath == "/completions":
		return semconv.GenAIOperationNameTextCompletion.Value.AsString()
	}
	return semconv.GenAIOperationNameChat.Value.AsString()
}

// StartRequest starts the SERVER span of the request hr, whose id is id
// and operation op, that arrived at start, and returns hr under the
// span's context, and the span. The span starts a trace of its own,
// linked to the client's span when its traceparent is valid, unless the
// client's trace is continued. It is named for the operation until the
// model is known (Observe).
func (t *Tracing) StartRequest(hr *http.Request, id, op string, start time.Time) (*http.Request, trace.Span) {
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameKey.String(op),
		attrRequestID.String(id),
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
		trace.WithTimestamp(start), trace.WithAttributes(attrs...))
	ctx, carrier := hr.Context(), propagation.HeaderCarrier(hr.Header)
	if t.continueClient {
		ctx = traceContext.Extract(ctx, carrier)
	} else {
		// A new root: a parent-based sampler, seeing no parent, decides
		// as its root sampler does, whatever the client's flags say.
		opts = append(opts, trace.WithNewRoot())
		if sc := clientSpan(carrier); sc.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
		}
	}
	ctx, span := t.tracer.Start(ctx, op, opts...)
	return hr.WithContext(ctx), span
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

// Observe ends c's SERVER span, if it has one, with what came of the
// request. The span is named for the model only when the catalog knows
// the name the client gave and the key may use it.
func (t *Tracing) Observe(c *Completed) {
	span, o := c.Span, &c.Outcome
	if span == nil {
		return
	}
	attrs := make([]attribute.KeyValue, 0, 20)
	if openai.Shown(c.Asked) && c.Asked != "" {
		attrs = append(attrs, semconv.GenAIRequestModel(c.Asked))
		if c.Requested != nil {
			// Only a name the catalog knows names the span: a client's
			// made-up names, however many, leave the operation's alone.
			span.SetName(c.Operation + " " + c.Asked)
		}
	}
	if c.Generates {
		attrs = append(attrs, semconv.GenAIRequestStream(c.Stream))
	}
	if c.MaxTokens > 0 {
		attrs = append(attrs, semconv.GenAIRequestMaxTokens(int(c.MaxTokens)))
	}
	if c.Record.Tenant != "" {
		attrs = append(attrs, attrTenant.String(c.Record.Tenant))
	}
	if c.Requested != nil {
		attrs = append(attrs, attrClass.String(c.Class.String()))
	}
	if c.Pool != "" {
		attrs = append(attrs, attrPool.String(c.Pool), attrEndpoint.String(c.Endpoint))
		if c.Provider != "" {
			attrs = append(attrs, semconv.GenAIProviderNameKey.String(c.Provider))
		}
	}
	if o.Status == http.StatusOK && c.Record.Model != "" {
		attrs = append(attrs, semconv.GenAIResponseModel(c.Record.Model))
	}
	attrs = appendUsage(attrs, o)
	attrs = append(attrs, semconv.HTTPResponseStatusCode(o.Status))
	if t.content && c.Generates {
		if m := inputMessages(c.Body); m != "" {
			attrs = append(attrs, semconv.GenAIInputMessagesKey.String(m))
		}
	}
	if c.ErrorType != "" {
		attrs = append(attrs, semconv.ErrorTypeKey.String(string(c.ErrorType)))
		span.SetStatus(codes.Error, string(c.ErrorType))
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

// NoteAdmission puts on span what admission decided of its request: the
// decision (admitted, queued, fell_back, refused, cancelled) of t or err,
// the time it waited, and a refusal's code.
func NoteAdmission(span trace.Span, t *admission.Ticket, err error, waited time.Duration) {
	decision := "admitted"
	var e *openai.Error
	switch {
	case err != nil && errors.As(err, &e) && e.Status == openai.StatusClientClosed:
		decision = "cancelled"
	case err != nil:
		decision = "refused"
		if e != nil && e.Code != "" {
			span.SetAttributes(attrRefusal.String(e.Code))
		}
	case t.FallbackTo() != nil:
		decision = "fell_back"
	case t.Queued():
		decision = "queued"
	}
	span.SetAttributes(attrDecision.String(decision), attrQueueWait.Float64(waited.Seconds()))
}

// Call is what the CLIENT span of one upstream call records.
type Call struct {
	// Operation is the request's; Provider the pool's
	// gen_ai.provider.name; Model the pool's name for the model.
	Operation, Provider, Model string
	// Generates and Stream are the request's, as Completed has them.
	Generates, Stream bool
	// Pool and Endpoint are where the call goes, and Policy the pool's
	// routing policy.
	Pool, Endpoint, Policy string
	// Predicted is the first-token time routing predicted there, in
	// seconds; PrefixShare and PrefixBlocks the share and the blocks of
	// the prompt it expected cached there.
	Predicted, PrefixShare float64
	PrefixBlocks           int
	// URL is the call's; nil when it has none.
	URL *url.URL
	// FallbackClass is the class of failure (catalog.ErrorClass) whose
	// fallback this call goes to; empty for none.
	FallbackClass string
}

// StartCall starts the CLIENT span of call, a child of ctx's span, and
// returns ctx holding it, the span, and header's copy with the span's
// traceparent, which the call carries in header's place.
func (t *Tracing) StartCall(ctx context.Context, call Call, header http.Header) (context.Context, trace.Span, http.Header) {
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameKey.String(call.Operation),
		semconv.GenAIProviderNameKey.String(call.Provider),
		semconv.GenAIRequestModel(call.Model),
		attrPool.String(call.Pool), attrEndpoint.String(call.Endpoint),
		attrPolicy.String(call.Policy),
		attrPredicted.Float64(call.Predicted),
		attrPrefixShare.Float64(call.PrefixShare),
		attrPrefixBlocks.Int(call.PrefixBlocks),
	}
	if call.Generates {
		attrs = append(attrs, semconv.GenAIRequestStream(call.Stream))
	}
	if call.FallbackClass != "" {
		attrs = append(attrs, attrFallbackClass.String(call.FallbackClass))
	}
	if call.URL != nil {
		attrs = append(attrs, semconv.ServerAddress(call.URL.Hostname()))
		if port, err := strconv.Atoi(call.URL.Port()); err == nil {
			attrs = append(attrs, semconv.ServerPort(port))
		}
	}
	ctx, span := t.tracer.Start(ctx, call.Operation+" "+call.Model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	header = header.Clone()
	traceContext.Inject(ctx, propagation.HeaderCarrier(header))
	return ctx, span, header
}

// EndCall ends a CLIENT span with what its call came to, o. A call that
// lost a hedged race (lostRace) is no failure unless its upstream failed:
// it says it lost.
func EndCall(span trace.Span, o *proxy.Outcome, lostRace bool) {
	attrs := appendUsage(make([]attribute.KeyValue, 0, 8), o)
	errType := ErrorTypeOf(o)
	if lostRace && o.Reason == proxy.ReasonNone {
		attrs, errType = append(attrs, attrLost.Bool(true)), ""
	}
	if o.Reason != proxy.ReasonNone {
		attrs = append(attrs, attrUpstreamError.String(o.Reason.String()))
	}
	if errType != "" {
		attrs = append(attrs, semconv.ErrorTypeKey.String(string(errType)))
		span.SetStatus(codes.Error, string(errType))
	}
	span.SetAttributes(attrs...)
	span.End()
}

// Exemplar is the exemplar that links an observation to the trace of
// ctx's span, {trace_id, span_id}; nil when ctx is nil or its span is not
// sampled.
func Exemplar(ctx context.Context) prometheus.Labels {
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
