// Package observe is what becomes of a request once it is answered: one
// Completed value, worked out once at its end, and the observers that read
// it — the request metrics and the seed's token metrics, the GenAI
// metrics, the SLO counts, the request's span, the debug and access logs,
// admission's and the limits' settlement, and the ledger. A path that
// serves requests produces a Completed and hands it to its Observers;
// no observer works out the model label, the token timing, the error type
// or the SLO judgement again. The package also makes the spans a request
// has while it runs (trace.go), which its Completed then ends.
package observe

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
	"gitea.mynodes.xyz/ilker/llmgw/internal/limits"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/admission"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/proxy"
)

// Completed is what one request came to, from its arrival to the end of
// its answer or its refusal. The path that served it fills in what it
// knows and calls Finish, which works out the rest; observers read it and
// never change it.
type Completed struct {
	// ID is the request's id, as X-Request-Id gave it; Start is when it
	// arrived and Took how long it lasted, to the end of its answer.
	ID    string
	Start time.Time
	Took  time.Duration
	// Operation is gen_ai.operation.name: chat for chat completions and
	// the APIs translated to them, text_completion, embeddings, or
	// OperationCount for a Messages token count.
	Operation string
	// Generates reports whether the API generates tokens, as embeddings
	// do not; Stream whether the answer was asked for streamed.
	Generates, Stream bool
	// Asked is the model name the client gave, as it gave it; MaxTokens
	// the output bound it named, zero for none.
	Asked     string
	MaxTokens int64
	// Requested is the catalog model the request resolved to, nil when it
	// resolved to none its key may use; Class its priority class. Model is
	// the model label: Requested's canonical name, or Unknown.
	Requested *catalog.Model
	Class     admission.Class
	Model     string
	// Pool is the pool that answered last, empty when none was tried;
	// Provider is its gen_ai.provider.name (ProviderName), and Endpoint
	// the endpoint's name.
	Pool, Provider, Endpoint string
	// Outcome is what its last upstream call came to, or the status and
	// error of its refusal.
	Outcome proxy.Outcome
	// ErrorType is why it failed, ErrorTypeOf its Outcome; empty when it
	// succeeded.
	ErrorType ErrorType
	// Timing is its time per output token and output rate.
	Timing Timing
	// SLO is the one judgement of it against its SLO; zero for a request
	// refused before its model was known.
	SLO Judgement
	// Tenant is the tenant label (tenant.go) of a request with Timing,
	// which is all that carries one; empty otherwise, and for a request
	// without a tenant.
	Tenant string
	// Exemplar links its latencies to its span's trace; nil unless the
	// span is sampled.
	Exemplar prometheus.Labels
	// Record is its usage record, as the ledger and the access log take
	// it: the model that served it, its usage and its cost.
	Record usage.Record
	// Reservation is what it reserved against its limits, settled with
	// Record's usage; nil when nothing was.
	Reservation *limits.Reservation
	// Ticket is its hold on its pool's admission gate; nil without one.
	Ticket *admission.Ticket
	// Span is its SERVER span, nil when it is not traced; Body its chat
	// body, which the span takes its prompt messages from when content is
	// recorded.
	Span trace.Span
	Body []byte
}

// Finish works out what c's other fields give: its model label, error
// type, token timing, and its SLO judgement, against its class's SLO.
func (c *Completed) Finish() {
	o := &c.Outcome
	c.Model = Unknown
	c.ErrorType = ErrorTypeOf(o)
	c.Timing = TokenTiming(c.Stream, o, c.Took)
	if m := c.Requested; m != nil {
		c.Model = m.Name
		c.SLO = Judge(m.ClassSLO(c.Class.String()), o.Status, o.TTFT, c.Timing)
	}
}

// Unknown is the model label of every name the catalog does not know, or
// a key may not use, so that clients cannot grow the metrics without
// bound.
const Unknown = "unknown"

// OperationCount is gen_ai.operation.name for a Messages token count,
// llmgw's own word: the convention has none.
const OperationCount = "count_tokens"

// Observer takes each Completed request, on the request's goroutine: it
// must not block, and must not keep c past the call, as c is the
// request's own and goes with it.
type Observer interface {
	Observe(c *Completed)
}

// CatalogObserver is an Observer that keeps something of each catalog
// put in service, such as series made ahead for its models.
type CatalogObserver interface {
	SetCatalog(c *catalog.Catalog)
}

// Collecting is an Observer with metrics to register.
type Collecting interface {
	Collectors() []prometheus.Collector
}

// Observers is the list each Completed goes to, in order.
type Observers []Observer

// Observe hands c to every observer in turn.
func (os Observers) Observe(c *Completed) {
	for _, o := range os {
		o.Observe(c)
	}
}

// SetCatalog tells every CatalogObserver of the list that c is in service.
func (os Observers) SetCatalog(c *catalog.Catalog) {
	for _, o := range os {
		if co, ok := o.(CatalogObserver); ok {
			co.SetCatalog(c)
		}
	}
}

// Register registers every Collecting observer's metrics with reg.
func (os Observers) Register(reg prometheus.Registerer) error {
	for _, o := range os {
		if co, ok := o.(Collecting); ok {
			for _, c := range co.Collectors() {
				if err := reg.Register(c); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// Timing is a finished request's time per output token and output tokens
// a second. A streamed request's run from its first token to its last,
// so they leave out the wait for the first; a plain one has only a rate,
// over the whole request.
type Timing struct {
	// TPOT is zero when not measured: a plain request, or a stream of one
	// token.
	TPOT time.Duration
	Rate float64
	// OK reports whether there is anything to tell: an answer of output
	// tokens with a time to tell them by.
	OK bool
}

// TokenTiming is the Timing of a request streamed or not, answered with o
// after took.
func TokenTiming(streamed bool, o *proxy.Outcome, took time.Duration) Timing {
	if o.Usage == nil || o.Usage.CompletionTokens <= 0 {
		return Timing{}
	}
	n := o.Usage.CompletionTokens
	if !streamed {
		if took <= 0 {
			return Timing{}
		}
		return Timing{Rate: float64(n) / took.Seconds(), OK: true}
	}
	if n < 2 || o.Decode <= 0 {
		return Timing{}
	}
	return Timing{TPOT: o.Decode / time.Duration(n-1), Rate: float64(n-1) / o.Decode.Seconds(), OK: true}
}

// Verdict is one kind of sample judged against its SLO.
type Verdict uint8

const (
	Unjudged Verdict = iota // the SLO has none of the kind, or nothing was measured
	Met                     // no longer than the SLO
	Missed                  // longer than the SLO
)

// Judgement is a request judged against the SLO of its priority class:
// the class's own figures, each the model's where the class sets none
// (catalog.Model.ClassSLO), so the model's slo for a model without
// admission classes. It is the SLO the request was routed and admitted
// against, and both the SLO counts and goodput read this one judgement.
type Judgement struct {
	// SLO is what the request was judged against.
	SLO catalog.SLO
	// TTFT and TPOT are each kind's verdict: a kind is judged when the
	// SLO has it and the request measured it (above zero).
	TTFT, TPOT Verdict
	// Met reports whether the request met its SLO as a whole: it was
	// answered 200, its first token came within the TTFT SLO (a first
	// token not measured misses it) and, where measured, its tokens
	// within the TPOT SLO. A request refused or failed missed.
	Met bool
}

// Judge judges a request answered with status, its first token after
// ttft and its tokens at timing's pace, against slo.
func Judge(slo catalog.SLO, status int, ttft time.Duration, timing Timing) Judgement {
	j := Judgement{SLO: slo, TTFT: verdict(ttft, slo.TTFTp99), TPOT: verdict(timing.TPOT, slo.TPOTp99)}
	j.Met = status == 200 && j.TPOT != Missed && (slo.TTFTp99 <= 0 || j.TTFT == Met)
	return j
}

// verdict is v judged against the SLO of its kind, slo.
func verdict(v, slo time.Duration) Verdict {
	switch {
	case v <= 0 || slo <= 0:
		return Unjudged
	case v > slo:
		return Missed
	}
	return Met
}
