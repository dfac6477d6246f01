package observe

// What a request settles once it is answered: its place at its pool's
// admission gate, with what admission learns of it (the SLO tracker's
// sample, goodput, the gate's TPOT aim); what it reserved against its
// limits, at the real figure; and its usage record, to the ledger.

import (
	"context"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
	"gitea.mynodes.xyz/ilker/llmgw/internal/limits"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/admission"
)

// Admission settles a request with admission, an Observer.
type Admission struct {
	tracker *admission.SLOTracker
	goodput *admission.Goodput
	gates   *admission.Gates
}

var _ Observer = (*Admission)(nil)

// NewAdmission settles requests with the SLO tracker, goodput and the
// pools' gates.
func NewAdmission(tracker *admission.SLOTracker, goodput *admission.Goodput, gates *admission.Gates) *Admission {
	return &Admission{tracker: tracker, goodput: goodput, gates: gates}
}

// Observe ends c's ticket, charging its tenant the completion tokens it
// was served. A stream with token timing is a sample of its model's SLO
// tracker. A request of a model that enables admission counts toward its
// class's goodput (not a count, nor a request whose client left), and its
// time per token toward its pool's TPOT aim.
func (a *Admission) Observe(c *Completed) {
	o := &c.Outcome
	var completion int64
	if o.Usage != nil {
		completion = o.Usage.CompletionTokens
	}
	c.Ticket.End(completion)
	if c.Requested == nil {
		return
	}
	if c.Stream && c.Timing.OK {
		a.tracker.Add(c.Model, o.TTFT, c.Timing.TPOT)
	}
	if !c.Requested.Admission.Enabled || o.Status == openai.StatusClientClosed || c.Operation == OperationCount {
		return
	}
	a.goodput.Add(c.Model, c.Class, c.SLO.Met)
	if c.Timing.TPOT > 0 && c.Pool != "" {
		if g := a.gates.Of(c.Pool); g != nil {
			g.NoteTPOT(c.SLO.SLO.TPOTp99, c.Timing.TPOT)
		}
	}
}

// Settler settles a reservation at the real figure: tokens used and what
// they cost.
type Settler interface {
	Settle(ctx context.Context, res limits.Reservation, usedTokens int64, costUSD float64)
}

// Limits settles what requests reserved against their limits, an
// Observer.
type Limits struct {
	s Settler
}

var _ Observer = Limits{}

// NewLimits settles with s.
func NewLimits(s Settler) Limits { return Limits{s: s} }

// Observe settles c's reservation, if it made one, with its record's
// tokens and cost.
func (l Limits) Observe(c *Completed) {
	if c.Reservation == nil {
		return
	}
	l.s.Settle(context.Background(), *c.Reservation, c.Record.PromptTokens+c.Record.CompletionTokens, c.Record.CostUSD)
}

// Recorder takes one usage record per request, off the hot path.
type Recorder interface {
	Record(usage.Record)
}

// Ledger sends each request's usage record to a Recorder, an Observer.
type Ledger struct {
	r Recorder
}

var _ Observer = Ledger{}

// NewLedger records with r.
func NewLedger(r Recorder) Ledger { return Ledger{r: r} }

// Observe records c's usage, unless it was refused before it was known
// what it asked for: then there is nothing to bill.
func (l Ledger) Observe(c *Completed) {
	if c.Requested != nil {
		l.r.Record(c.Record)
	}
}
