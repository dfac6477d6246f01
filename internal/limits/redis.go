// The shared limiter: counters in Redis, seen by every replica. Admission is
// one script, one round trip; settlements queue in memory and go out in
// batches off the request path. When Redis does not answer, the limiter
// fails open or closed as configured, and counts it.
package limits

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
)

const (
	// defaultPrefix starts every key. The braces are a Redis Cluster hash
	// tag: every limiter key lands in one slot, so one script may touch
	// every scope of a request.
	defaultPrefix = "{llmgw-limits}:"

	// defaultTimeout bounds one admission round trip. A round trip on a LAN
	// is well under a millisecond; 100 ms rides out a pause or a failover
	// blip, yet a dead Redis adds little to a request before it fails open
	// or closed.
	defaultTimeout = 100 * time.Millisecond

	// flushEvery is how long a settlement may wait for its batch. TPM counts
	// over a minute, so 50 ms late is under 0.1% of a window.
	flushEvery = 50 * time.Millisecond

	// flushBatch is how many settlements go in one script call. At three
	// scopes a settlement, 128 make under 800 keys: a script of well under a
	// millisecond on the server, so other replicas' admissions barely wait.
	flushBatch = 128

	// maxPending is how many settlements may wait while Redis is away. At
	// 10,000 requests a second that is over six seconds of outage; beyond it
	// settlements are dropped and counted rather than grow memory.
	maxPending = 1 << 16

	// settleTimeout bounds sending one batch. It is off the request path,
	// so it may be longer than an admission's.
	settleTimeout = time.Second

	// finalFlushTimeout bounds the flush when Run is stopped.
	finalFlushTimeout = 2 * time.Second

	// budgetGrace is how long a budget counter outlives its period, so a
	// request admitted just before the end can still be billed to it.
	budgetGrace = 24 * time.Hour

	// warnEvery spaces out logs of Redis errors: during an outage every
	// request would fail the same way.
	warnEvery = 10 * time.Second
)

// RedisOptions configures a Redis limiter.
type RedisOptions struct {
	// FailOpen lets requests through, unlimited and with no headers, while
	// Redis does not answer; false refuses them with ErrUnavailable.
	FailOpen bool
	// Prefix starts every key. It should carry a hash tag, such as
	// "{llmgw}:", for Redis Cluster; empty means "{llmgw-limits}:".
	Prefix string
	// Timeout bounds each admission's round trip; zero means 100 ms.
	Timeout time.Duration
	// Registerer takes the limiter's metrics; nil registers none.
	Registerer prometheus.Registerer
	// Logger gets Redis errors, at most one every ten seconds; nil discards.
	Logger *slog.Logger
}

// Redis is a limiter whose counters live in Redis, shared by every replica
// using the same prefix. Run must be running for settlements to reach Redis.
type Redis struct {
	client   redis.UniversalClient
	failOpen bool
	prefix   string
	timeout  time.Duration
	log      *slog.Logger
	metrics  redisMetrics
	// send delivers one batch of settlements to Redis.
	send func(ctx context.Context, batch []settlement) error

	mu      sync.Mutex    // protects pending
	pending []settlement  // settlements not yet sent, oldest first
	full    chan struct{} // signalled when pending holds a full batch
	// lastWarn is when a Redis error was last logged, Unix nanoseconds.
	lastWarn atomic.Int64
}

// settlement is one Settle call waiting to be sent.
type settlement struct {
	res  Reservation
	used int64
	cost float64
}

// redisMetrics counts what goes wrong between the limiter and Redis.
type redisMetrics struct {
	errOpen, errClosed prometheus.Counter // admissions Redis did not answer, by what was decided
	settleDropped      prometheus.Counter // settlements never applied
}

func newRedisMetrics(reg prometheus.Registerer) redisMetrics {
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "llmgw_limits_redis_errors_total",
		Help: "Admissions Redis did not answer, by whether the request was let through (open) or refused (closed).",
	}, []string{"decision"})
	dropped := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "llmgw_limits_settle_dropped_total",
		Help: "Settlements of used tokens and cost that never reached Redis.",
	})
	if reg != nil {
		reg.MustRegister(errs, dropped)
	}
	return redisMetrics{
		errOpen:       errs.WithLabelValues("open"),
		errClosed:     errs.WithLabelValues("closed"),
		settleDropped: dropped,
	}
}

// NewRedis returns a limiter on client. It starts nothing; call Run.
func NewRedis(client redis.UniversalClient, opts RedisOptions) *Redis {
	r := &Redis{
		client:   client,
		failOpen: opts.FailOpen,
		prefix:   opts.Prefix,
		timeout:  opts.Timeout,
		log:      opts.Logger,
		metrics:  newRedisMetrics(opts.Registerer),
		full:     make(chan struct{}, 1),
	}
	if r.prefix == "" {
		r.prefix = defaultPrefix
	}
	if r.timeout <= 0 {
		r.timeout = defaultTimeout
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	r.send = r.sendBatch
	return r
}

func (r *Redis) rpmKey(scope string) string { return r.prefix + "rpm:" + scope }
func (r *Redis) tpmKey(scope string) string { return r.prefix + "tpm:" + scope }

// budgetKey is scope's budget counter for the period starting at start
// (Unix seconds).
func (r *Redis) budgetKey(scope string, start int64) string {
	return r.prefix + "budget:" + scope + ":" + time.Unix(start, 0).UTC().Format(time.DateOnly)
}

// budgetTTL is how long, from t, a budget counter for a period ending at
// end (Unix seconds) should live.
func budgetTTL(end int64, t time.Time) time.Duration {
	return time.Unix(end, 0).Sub(t) + budgetGrace
}

// Admit decides q in one round trip to Redis.
func (r *Redis) Admit(ctx context.Context, q Request) (Decision, error) {
	if q.Now.IsZero() {
		return Decision{}, errNoTime
	}
	if len(q.Scopes) == 0 {
		return Decision{Allowed: true}, nil
	}
	n := reqTokens(q)
	res := newReservation(q, n)
	keys := make([]string, 0, 3*len(q.Scopes))
	args := make([]any, 0, 2+5*len(q.Scopes))
	args = append(args, q.Now.UnixMicro(), n)
	for i, s := range q.Scopes {
		l, p := s.Limits, res.scopes[i]
		keys = append(keys, r.rpmKey(s.Name), r.tpmKey(s.Name), r.budgetKey(s.Name, p.periodStart))
		untilEnd := time.Unix(p.periodEnd, 0).Sub(q.Now)
		args = append(args, l.RPM, l.TPM, l.BudgetTokens, strconv.FormatFloat(l.BudgetUSD, 'f', -1, 64), untilEnd.Microseconds())
	}

	cctx, cancel := context.WithTimeout(ctx, r.timeout)
	out, err := admitScript.Run(cctx, r.client, keys, args...).Int64Slice()
	cancel()
	if err == nil && len(out) != 5+4*len(q.Scopes) {
		err = fmt.Errorf("admit script returned %d values for %d scopes", len(out), len(q.Scopes))
	}
	if err != nil {
		return r.unavailable(ctx, res, err)
	}

	var d Decision
	if code := out[0]; code != 0 {
		c := CodeRateLimited
		if code == 2 {
			c = CodeInsufficientQuota
		}
		kinds := [...]string{1: KindRequests, 2: KindTokens, 3: KindBudgetTokens, 4: KindBudgetUSD}
		kind := ""
		if k := out[1]; k > 0 && k < int64(len(kinds)) {
			kind = kinds[k]
		}
		scope := ""
		if i := out[2]; i >= 1 && i <= int64(len(q.Scopes)) {
			scope = q.Scopes[i-1].Name
		}
		d.refuse(c, kind, scope, time.Duration(out[3])*time.Microsecond, out[4] == 1)
	}
	d.Allowed = d.Code == ""
	for i, s := range q.Scopes {
		h := out[5+4*i:]
		if s.Limits.RPM > 0 {
			d.Requests.tighten(Header{Limit: s.Limits.RPM, Remaining: min(max(h[0], 0), s.Limits.RPM), Reset: time.Duration(h[1]) * time.Microsecond})
		}
		if s.Limits.TPM > 0 {
			d.Tokens.tighten(Header{Limit: s.Limits.TPM, Remaining: min(max(h[2], 0), s.Limits.TPM), Reset: time.Duration(h[3]) * time.Microsecond})
		}
	}
	if d.Allowed {
		d.Reservation = res
	}
	return d, nil
}

// unavailable is Admit's answer when Redis did not: the caller's own
// cancellation is passed back as it is; anything else fails open or closed.
// Failing open reserves nothing, so settling later bills all that was used.
func (r *Redis) unavailable(ctx context.Context, res Reservation, err error) (Decision, error) {
	if ctx.Err() != nil {
		return Decision{}, fmt.Errorf("limits: admission abandoned: %w", ctx.Err())
	}
	r.warn("limits: redis did not answer an admission", err)
	if r.failOpen {
		r.metrics.errOpen.Inc()
		res.tokens = 0
		return Decision{Allowed: true, Reservation: res}, nil
	}
	r.metrics.errClosed.Inc()
	return Decision{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// warn logs err unless one was logged in the last warnEvery.
func (r *Redis) warn(msg string, err error) {
	now := time.Now().UnixNano()
	last := r.lastWarn.Load()
	if now-last < int64(warnEvery) || !r.lastWarn.CompareAndSwap(last, now) {
		return
	}
	r.log.Warn(msg, "err", err)
}

// Settle queues the reconciliation of res; Run sends it within flushEvery.
// When too many are already waiting it is dropped and counted.
func (r *Redis) Settle(_ context.Context, res Reservation, usedTokens int64, costUSD float64) {
	if nothingToSettle(res, usedTokens, costUSD) {
		return
	}
	r.mu.Lock()
	if len(r.pending) >= maxPending {
		r.mu.Unlock()
		r.metrics.settleDropped.Inc()
		return
	}
	r.pending = append(r.pending, settlement{res: res, used: max(usedTokens, 0), cost: costUSD})
	full := len(r.pending) >= flushBatch
	r.mu.Unlock()
	if full {
		select {
		case r.full <- struct{}{}:
		default:
		}
	}
}

// Run sends queued settlements every flushEvery, or sooner when a batch
// fills, until ctx ends; then it sends what is left, for up to
// finalFlushTimeout. It returns nil.
func (r *Redis) Run(ctx context.Context) error {
	tick := time.NewTicker(flushEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalFlushTimeout)
			defer cancel()
			if r.Flush(fctx) != nil {
				r.dropPending()
			}
			return nil
		case <-tick.C:
		case <-r.full:
		}
		r.Flush(ctx)
	}
}

// Flush sends every settlement queued so far, in batches of flushBatch. It
// stops at the first batch that fails, dropping and counting that batch
// (retrying could apply it twice) and leaving the rest queued for later.
func (r *Redis) Flush(ctx context.Context) error {
	for {
		r.mu.Lock()
		k := min(len(r.pending), flushBatch)
		batch := r.pending[:k:k]
		r.pending = r.pending[k:]
		if len(r.pending) == 0 {
			r.pending = nil
		}
		r.mu.Unlock()
		if k == 0 {
			return nil
		}
		sctx, cancel := context.WithTimeout(ctx, settleTimeout)
		err := r.send(sctx, batch)
		cancel()
		if err != nil {
			r.metrics.settleDropped.Add(float64(len(batch)))
			r.warn("limits: settlements did not reach redis", err)
			return err
		}
	}
}

// dropPending counts and forgets everything queued, when Run stops and
// Redis is not answering.
func (r *Redis) dropPending() {
	r.mu.Lock()
	n := len(r.pending)
	r.pending = nil
	r.mu.Unlock()
	r.metrics.settleDropped.Add(float64(n))
}

// sendBatch applies batch in one script call.
func (r *Redis) sendBatch(ctx context.Context, batch []settlement) error {
	var keys []string
	var args []any
	for _, s := range batch {
		at := s.res.at
		delta := s.used - s.res.tokens
		for _, sc := range s.res.scopes {
			if sc.tpm > 0 && delta != 0 {
				keys = append(keys, r.tpmKey(sc.name))
				args = append(args, "t", delta, at.UnixMicro(), sc.tpm)
			}
			keys = append(keys, r.budgetKey(sc.name, sc.periodStart))
			args = append(args, "b", s.used, strconv.FormatFloat(s.cost, 'f', -1, 64), budgetTTL(sc.periodEnd, at).Milliseconds())
		}
	}
	if len(keys) == 0 {
		return nil
	}
	if err := settleScript.Run(ctx, r.client, keys, args...).Err(); err != nil {
		return fmt.Errorf("limits: settle %d settlements: %w", len(batch), err)
	}
	return nil
}

// Seed raises scope's spend in the period holding now to at least tokens
// and costUSD.
func (r *Redis) Seed(ctx context.Context, scope, period string, tokens int64, costUSD float64, now time.Time) error {
	start := tenant.PeriodStart(period, now)
	key := r.budgetKey(scope, start.Unix())
	ttl := budgetTTL(tenant.PeriodEnd(period, start).Unix(), now)
	err := seedScript.Run(ctx, r.client, []string{key}, tokens, strconv.FormatFloat(costUSD, 'f', -1, 64), ttl.Milliseconds()).Err()
	if err != nil {
		return fmt.Errorf("limits: seed budget of %s: %w", scope, err)
	}
	return nil
}
