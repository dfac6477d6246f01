// The in-process limiter: every counter in one map behind one mutex, for a
// single gateway, or for tests. Every time comes from the caller.
package limits

import (
	"context"
	"sync"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
)

// sweepEvery is how often, in request time, Local drops counters that hold
// nothing: a drained bucket is the same as none. A minute matches the
// window, so nothing idle outlives two.
const sweepEvery = time.Minute

// Local counts in this process alone. The zero value is not usable; call
// NewLocal.
type Local struct {
	mu        sync.Mutex             // protects scopes and nextSweep
	scopes    map[string]*scopeState // key: scope name
	nextSweep time.Time              // request time of the next sweep
}

// scopeState is one scope's counters.
type scopeState struct {
	rpm, tpm bucket
	// Spend in the budget period that started at periodStart (Unix seconds);
	// a later period starts from zero, an earlier one is forgotten.
	periodStart, periodEnd int64
	tokens                 int64
	usd                    float64
}

// bucket is a token bucket written as a level: what was taken, as of at
// (Unix nanoseconds), draining at the limit a window.
type bucket struct {
	level   float64
	at      int64
	emptyAt int64 // when the level drains to nothing, for the sweep
}

// levelAt is b's level at now under limit; a now before b.at sees b.at's.
func (b bucket) levelAt(now, limit int64) float64 {
	if now <= b.at || b.level <= 0 {
		return max(b.level, 0)
	}
	l := b.level - float64(now-b.at)*float64(limit)/float64(window)
	return max(l, 0)
}

// set records level at now under limit, keeping the later of the two
// times so a slightly late clock never drains the bucket twice.
func (b *bucket) set(level float64, now, limit int64) {
	b.level, b.at = level, max(b.at, now)
	b.emptyAt = b.at + int64(drainTime(limit, b.level))
}

// add adds delta (negative gives back) as of at, draining first if at is
// later than what b has seen. The level never goes below empty.
func (b *bucket) add(delta int64, at, limit int64) {
	if at > b.at {
		b.level, b.at = b.levelAt(at, limit), at
	}
	b.set(max(b.level+float64(delta), 0), b.at, limit)
}

// spent is the spend in the period starting at start.
func (s *scopeState) spent(start int64) (int64, float64) {
	if s.periodStart != start {
		return 0, 0
	}
	return s.tokens, s.usd
}

// addSpend adds to the period starting at start, moving to it if it is
// later than the one held.
func (s *scopeState) addSpend(start, end, tokens int64, usd float64, raise bool) {
	switch {
	case start < s.periodStart:
		return
	case start > s.periodStart:
		s.periodStart, s.periodEnd, s.tokens, s.usd = start, end, 0, 0
	}
	if raise {
		s.tokens, s.usd = max(s.tokens, tokens), max(s.usd, usd)
		return
	}
	s.tokens += tokens
	s.usd += usd
}

// NewLocal returns an empty in-process limiter.
func NewLocal() *Local {
	return &Local{scopes: make(map[string]*scopeState)}
}

// state is the named scope's counters, created empty if need be. l.mu is held.
func (l *Local) state(name string) *scopeState {
	st := l.scopes[name]
	if st == nil {
		st = &scopeState{}
		l.scopes[name] = st
	}
	return st
}

// Admit decides r and takes from every scope, or from none.
func (l *Local) Admit(_ context.Context, r Request) (Decision, error) {
	if r.Now.IsZero() {
		return Decision{}, errNoTime
	}
	if len(r.Scopes) == 0 {
		return Decision{Allowed: true}, nil
	}
	n := reqTokens(r)
	now := r.Now.UnixNano()
	var buf [4]*scopeState
	states := buf[:0]
	res := newReservation(r, n)
	var d Decision

	l.mu.Lock()
	defer l.mu.Unlock()
	if !r.Now.Before(l.nextSweep) {
		l.sweep(now)
		l.nextSweep = r.Now.Add(sweepEvery)
	}
	for i, s := range r.Scopes {
		st := l.state(s.Name)
		states = append(states, st)
		lim, p := s.Limits, res.scopes[i]
		if lim.BudgetTokens > 0 || lim.BudgetUSD > 0 {
			tokens, usd := st.spent(p.periodStart)
			retry := time.Unix(p.periodEnd, 0).Sub(r.Now)
			if lim.BudgetTokens > 0 && tokens >= lim.BudgetTokens {
				d.refuse(CodeInsufficientQuota, KindBudgetTokens, s.Name, retry, false)
			} else if lim.BudgetUSD > 0 && usd >= lim.BudgetUSD {
				d.refuse(CodeInsufficientQuota, KindBudgetUSD, s.Name, retry, false)
			}
		}
		if lim.RPM > 0 {
			if lvl := st.rpm.levelAt(now, lim.RPM); lvl+1 > float64(lim.RPM)+epsilon {
				d.refuse(CodeRateLimited, KindRequests, s.Name, drainTime(lim.RPM, lvl+1-float64(lim.RPM)), false)
			}
		}
		if lim.TPM > 0 {
			lvl := st.tpm.levelAt(now, lim.TPM)
			switch {
			case n > lim.TPM:
				d.refuse(CodeRateLimited, KindTokens, s.Name, window, true)
			case lvl+float64(n) > float64(lim.TPM)+epsilon:
				d.refuse(CodeRateLimited, KindTokens, s.Name, drainTime(lim.TPM, lvl+float64(n)-float64(lim.TPM)), false)
			}
		}
	}
	d.Allowed = d.Code == ""
	for i, s := range r.Scopes {
		st, lim := states[i], s.Limits
		if lim.RPM > 0 {
			lvl := st.rpm.levelAt(now, lim.RPM)
			if d.Allowed {
				lvl++
				st.rpm.set(lvl, now, lim.RPM)
			}
			d.Requests.tighten(bucketHeader(lim.RPM, lvl))
		}
		if lim.TPM > 0 {
			lvl := st.tpm.levelAt(now, lim.TPM)
			if d.Allowed {
				lvl += float64(n)
				st.tpm.set(lvl, now, lim.TPM)
			}
			d.Tokens.tighten(bucketHeader(lim.TPM, lvl))
		}
	}
	if d.Allowed {
		d.Reservation = res
	}
	return d, nil
}

// Settle reconciles res with what was used. It only touches memory.
func (l *Local) Settle(_ context.Context, res Reservation, usedTokens int64, costUSD float64) {
	if nothingToSettle(res, usedTokens, costUSD) {
		return
	}
	usedTokens = max(usedTokens, 0)
	delta := usedTokens - res.tokens
	at := res.at.UnixNano()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range res.scopes {
		st := l.state(s.name)
		if s.tpm > 0 && delta != 0 {
			st.tpm.add(delta, at, s.tpm)
		}
		st.addSpend(s.periodStart, s.periodEnd, usedTokens, costUSD, false)
	}
}

// Seed raises scope's spend in the period holding now to at least tokens
// and costUSD.
func (l *Local) Seed(_ context.Context, scope, period string, tokens int64, costUSD float64, now time.Time) error {
	start := tenant.PeriodStart(period, now)
	end := tenant.PeriodEnd(period, start)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.state(scope).addSpend(start.Unix(), end.Unix(), tokens, costUSD, true)
	return nil
}

// sweep drops scopes whose buckets have drained and whose budget period
// has ended by now (Unix nanoseconds). l.mu is held.
func (l *Local) sweep(now int64) {
	secs := now / int64(time.Second)
	for name, st := range l.scopes {
		if st.rpm.emptyAt <= now && st.tpm.emptyAt <= now && st.periodEnd <= secs {
			delete(l.scopes, name)
		}
	}
}
