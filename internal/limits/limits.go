// Package limits counts what keys and tenant levels use and says whether the
// next request may go: requests and tokens a minute, and token and dollar
// budgets a day or a month. Admission reserves, completion settles. Local
// counts in this process alone; Redis shares the counters among every replica.
//
// Rates are token buckets that hold a minute's worth and refill continuously
// (GCRA, written as a draining level): a scope with an RPM of 60 may send 60
// requests at once, then one a second. The sustained rate is exact and no
// single instant admits more than the limit; the price of the burst is that
// the worst-case sliding minute (a full bucket spent at once, then refilled
// while it is spent again) sees up to twice the limit. On Redis one script
// checks and takes every scope atomically, so any number of replicas together
// hold the same limit as one process would.
package limits

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// window is what RPM and TPM are counted over: a bucket holds a window's
// worth and refills it in a window.
const window = time.Minute

// epsilon absorbs floating-point drift in bucket levels, so that a limit of
// 7 admits seven requests at one instant even when 7 × (1/7) rounds up.
const epsilon = 1e-6

// Codes a refusal carries, as OpenAI sends them.
const (
	CodeRateLimited       = "rate_limit_exceeded"
	CodeInsufficientQuota = "insufficient_quota"
)

// Kinds of limit a refusal can name.
const (
	KindRequests     = "requests"      // RPM
	KindTokens       = "tokens"        // TPM
	KindBudgetTokens = "budget_tokens" // tokens this period
	KindBudgetUSD    = "budget_usd"    // dollars this period
)

// ErrUnavailable is what Admit returns when the counters cannot be reached
// and the limiter fails closed; the router answers 503.
var ErrUnavailable = errors.New("limits: counters unavailable")

// errNoTime is Admit's answer to a Request without Now: every decision is
// taken at a time the caller gives.
var errNoTime = errors.New("limits: request has no time (Request.Now is zero)")

// Scope is one thing counted: a key ("key:ID") or a tenant level
// ("tenant:acme/search"). Its name is used in counter names and logs, so it
// never holds a secret.
type Scope struct {
	Name   string
	Limits tenant.Limits
}

// Request is what admission asks about.
type Request struct {
	// Scopes are every scope the request must pass: the key and each tenant
	// level on its path that has limits. No scopes means nothing to check.
	Scopes []Scope
	// Tokens is what to reserve now in each scope with a TPM limit: the
	// prompt estimate plus max tokens (or the configured default). Negative
	// counts as zero. A request of zero tokens, such as a count of a
	// prompt's tokens, takes a request from each RPM and nothing from any
	// TPM, but is still refused by a TPM already past its limit or a spent
	// budget, as a key out of tokens is refused everything.
	Tokens int64
	// Now is when the request arrived; it must be set.
	Now time.Time
}

// Decision is admission's answer. Headers describe the tightest scope for
// requests and for tokens.
type Decision struct {
	Allowed bool
	// Code, when refused: CodeRateLimited or CodeInsufficientQuota.
	Code string
	// Kind, when refused, is the limit that refused: KindRequests, ...
	Kind string
	// Scope is the scope that refused (for logs; never a secret).
	Scope string
	// RetryAfter, when refused, is how long until the request could pass
	// with no other traffic: when every refusing window frees enough, or
	// when the budget's period ends.
	RetryAfter time.Duration
	// TooLarge reports whether the request reserves more tokens than a
	// scope's TPM: it can never pass as it is, and RetryAfter is a window.
	TooLarge bool
	// Requests and Tokens feed x-ratelimit-{limit,remaining,reset}-*.
	// A Limit of 0 means no limit of that kind, and its headers are omitted.
	Requests, Tokens Header
	// Reservation is what Admit took, for Settle. It is set when allowed.
	Reservation Reservation
}

// Header is one kind of rate limit as the x-ratelimit-* headers show it:
// the limit, what is left of it after this request, and how long until it
// is whole again.
type Header struct {
	Limit, Remaining int64
	Reset            time.Duration
}

// Reservation is what Admit took, for Settle. The zero Reservation took
// nothing and settles nothing.
type Reservation struct {
	scopes []reserved
	tokens int64     // reserved in each scope with a TPM limit
	at     time.Time // when admitted; budgets are billed to the period holding it
}

// reserved is one scope of a Reservation.
type reserved struct {
	name string
	tpm  int64 // the TPM limit at admission; 0 means none, so nothing to reconcile
	// The budget period holding the admission, Unix seconds: spend is
	// billed to it even when the request ends in the next.
	periodStart, periodEnd int64
}

// Tokens is how many tokens the reservation holds in each scope with a TPM
// limit.
func (r Reservation) Tokens() int64 { return r.tokens }

// Limiter decides admission and keeps the counters.
type Limiter interface {
	// Admit decides whether r may go and, if so, takes one request and
	// r.Tokens tokens from every scope: all of them or none. An error means
	// no decision could be taken (the counters are unreachable and the
	// limiter fails closed: ErrUnavailable); the router answers 503.
	Admit(ctx context.Context, r Request) (Decision, error)
	// Settle reconciles a reservation with what the request really used:
	// the TPM window gets used-reserved added (negative gives back), budgets
	// get used tokens and costUSD added. It never blocks the caller on the
	// network.
	Settle(ctx context.Context, res Reservation, usedTokens int64, costUSD float64)
	// Seed sets a scope's budget spend for the current period (from the
	// ledger at start-up). Spend is only ever raised: a replica that starts
	// late must not undo what others counted since the ledger was written.
	Seed(ctx context.Context, scope string, period string, tokens int64, costUSD float64, now time.Time) error
}

var (
	_ Limiter = (*Local)(nil)
	_ Limiter = (*Redis)(nil)
)

// newReservation records what r takes if allowed: tokens in each scope
// with a TPM limit, and its scopes' budget periods.
func newReservation(r Request, tokens int64) Reservation {
	if len(r.Scopes) == 0 {
		return Reservation{}
	}
	res := Reservation{scopes: make([]reserved, len(r.Scopes)), tokens: tokens, at: r.Now}
	for i, s := range r.Scopes {
		start := tenant.PeriodStart(s.Limits.Period, r.Now)
		res.scopes[i] = reserved{
			name: s.Name, tpm: s.Limits.TPM,
			periodStart: start.Unix(), periodEnd: tenant.PeriodEnd(s.Limits.Period, start).Unix(),
		}
	}
	return res
}

// nothingToSettle reports whether settling res changes no counter: it
// took nothing (no scopes), or it reserved no tokens, as a count of a
// prompt's tokens does, and nothing was used.
func nothingToSettle(res Reservation, usedTokens int64, costUSD float64) bool {
	return len(res.scopes) == 0 || res.tokens == 0 && usedTokens <= 0 && costUSD == 0
}

// reqTokens is r.Tokens with negatives as zero.
func reqTokens(r Request) int64 { return max(r.Tokens, 0) }

// refuse records a refusal by one scope. A spent budget outranks a rate
// limit (waiting a minute will not help); among refusals of one code the
// longest wait wins, since the request must pass every scope.
func (d *Decision) refuse(code, kind, scope string, retry time.Duration, tooLarge bool) {
	if d.Code == CodeInsufficientQuota && code != CodeInsufficientQuota {
		return
	}
	if d.Code == code && retry <= d.RetryAfter {
		return
	}
	d.Code, d.Kind, d.Scope, d.RetryAfter, d.TooLarge = code, kind, scope, retry, tooLarge
}

// tighten makes h describe the tighter of itself and the given limit: the
// one with less remaining, or on a tie the longer reset.
func (h *Header) tighten(n Header) {
	if h.Limit == 0 || n.Remaining < h.Remaining || n.Remaining == h.Remaining && n.Reset > h.Reset {
		*h = n
	}
}

// bucketHeader describes a bucket of the given limit holding level.
func bucketHeader(limit int64, level float64) Header {
	rem := int64(math.Floor(float64(limit) - level + epsilon))
	return Header{Limit: limit, Remaining: min(max(rem, 0), limit), Reset: drainTime(limit, level)}
}

// drainTime is how long a bucket of the given limit takes to drain level.
func drainTime(limit int64, level float64) time.Duration {
	if level <= 0 {
		return 0
	}
	return time.Duration(math.Ceil(level * float64(window) / float64(limit)))
}

// RefusalError is the error a refused decision is answered with: a 429
// with Retry-After in whole seconds, rounded up. It is nil when d allowed.
func RefusalError(d Decision) *openai.Error {
	if d.Allowed {
		return nil
	}
	secs := int(math.Ceil(d.RetryAfter.Seconds()))
	var msg string
	switch d.Kind {
	case KindRequests:
		msg = "Rate limit reached for requests per minute."
	case KindTokens:
		msg = "Rate limit reached for tokens per minute."
		if d.TooLarge {
			msg = "Request too large for the tokens-per-minute limit: lower max_tokens or the prompt."
		}
	case KindBudgetTokens:
		msg = "The token budget for this period is spent."
	case KindBudgetUSD:
		msg = "The spending budget for this period is spent."
	default:
		msg = "Rate limit reached."
	}
	if secs > 0 && !d.TooLarge {
		msg += fmt.Sprintf(" Please try again in %s.", formatReset(d.RetryAfter))
	}
	code := d.Code
	if code == "" {
		code = CodeRateLimited
	}
	return openai.RateLimited(code, msg, secs)
}
