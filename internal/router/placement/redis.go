package placement

// Placements over Redis publish/subscribe: every gateway publishes its
// placements on one channel and applies the others'. Publish/subscribe
// keeps nothing, so a gateway that starts learns only what is sent from
// then on; its own index fills as it routes, as it would alone.

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

const (
	// DefaultChannel is the channel placements go out on.
	DefaultChannel = "llmgw:placements"

	// flushEvery is how long a placement may wait for the rest of its
	// batch. The next turn of a conversation comes at least one answer
	// later, a second or more; 10 ms reaches every gateway well before.
	flushEvery = 10 * time.Millisecond

	// maxMessage is about the most bytes one message carries: 64
	// placements of a 32k-token prompt (512 hashes each), so that one
	// PUBLISH stays well under a millisecond of the server's time.
	maxMessage = 256 << 10

	// queueLen is how many placements may wait to be sent: 400 ms at
	// 10,000 requests a second. Past it they are dropped and counted
	// rather than held up the request path.
	queueLen = 4096

	// publishTimeout bounds sending one message. It is off the request
	// path; a placement later than this is hardly worth having.
	publishTimeout = time.Second

	// warnEvery spaces out logs of Redis errors: while Redis is away
	// every batch fails the same way.
	warnEvery = 10 * time.Second
)

// Options configures a Redis bus.
type Options struct {
	// Channel is the Redis channel; empty means DefaultChannel. Gateways
	// share placements when they share a Redis and a channel.
	Channel string
	// Registerer takes the bus's metrics; nil registers none.
	Registerer prometheus.Registerer
	// Logger gets Redis errors, at most one every ten seconds; nil
	// discards.
	Logger *slog.Logger
}

// Redis is a bus of placements on a Redis channel. Publish queues; Run
// sends and receives.
type Redis struct {
	client  redis.UniversalClient
	channel string
	id      uint64 // this gateway's, to know its own messages when they come back
	queue   chan Placement
	log     *slog.Logger
	m       busMetrics
	// lastWarn is when a Redis error was last logged, Unix nanoseconds.
	lastWarn atomic.Int64
}

// busMetrics counts placements by what became of them.
type busMetrics struct {
	sent, dropped, received, ignored prometheus.Counter
}

func newBusMetrics(reg prometheus.Registerer) busMetrics {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "llmgw_prefix_placements_total",
		Help: "Prefix index placements shared with the other gateways: sent; dropped unsent (the queue was full or Redis did not answer); received and applied; received and ignored (a pool, endpoint or block size this gateway does not have).",
	}, []string{"outcome"})
	if reg != nil {
		reg.MustRegister(v)
	}
	return busMetrics{
		sent: v.WithLabelValues("sent"), dropped: v.WithLabelValues("dropped"),
		received: v.WithLabelValues("received"), ignored: v.WithLabelValues("ignored"),
	}
}

// NewRedis returns a bus on client. It starts nothing; call Run.
func NewRedis(client redis.UniversalClient, o Options) *Redis {
	r := &Redis{
		client:  client,
		channel: o.Channel,
		id:      rand.Uint64(),
		queue:   make(chan Placement, queueLen),
		log:     o.Logger,
		m:       newBusMetrics(o.Registerer),
	}
	if r.channel == "" {
		r.channel = DefaultChannel
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	return r
}

// Publish queues p for the other gateways. It never blocks: when the
// queue is full, p is dropped and counted. p.Hashes must not change
// afterwards.
func (r *Redis) Publish(p Placement) {
	select {
	case r.queue <- p:
	default:
		r.m.dropped.Inc()
	}
}

// Run sends what Publish queues, and gives apply each placement the
// other gateways on the channel publish, until ctx ends. apply reports
// whether the placement named a pool, endpoint and block size it has;
// its argument is valid only during the call. Run returns nil once ctx
// ends; Redis errors are logged and counted, and the subscription
// reconnects on its own.
func (r *Redis) Run(ctx context.Context, apply func(Placement) bool) error {
	sub := r.client.Subscribe(ctx, r.channel)
	var wg sync.WaitGroup
	wg.Go(func() { r.receive(sub.Channel(), apply) })
	r.send(ctx)
	sub.Close() // closes the channel receive reads
	wg.Wait()
	return nil
}

// send publishes placements as they are queued, a batch at a time: from
// the first one queued, it waits flushEvery for others to join it.
func (r *Redis) send(ctx context.Context) {
	t := time.NewTimer(flushEvery)
	t.Stop()
	var msg []byte
	for {
		var first Placement
		select {
		case <-ctx.Done():
			return
		case first = <-r.queue:
		}
		t.Reset(flushEvery)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		msg = r.flush(ctx, first, msg)
	}
}

// flush publishes first and whatever else the queue holds, in messages of
// about maxMessage bytes at most, building them in msg's memory.
func (r *Redis) flush(ctx context.Context, first Placement, msg []byte) []byte {
	next, more := first, true
	for more {
		msg = appendHeader(msg[:0], r.id)
		n := 0
		for more && (n == 0 || len(msg)+recordLen(next) <= maxMessage) {
			msg = appendRecord(msg, next)
			n++
			select {
			case next = <-r.queue:
			default:
				more = false
			}
		}
		cctx, cancel := context.WithTimeout(ctx, publishTimeout)
		err := r.client.Publish(cctx, r.channel, msg).Err()
		cancel()
		if err != nil {
			r.m.dropped.Add(float64(n))
			r.warn("placements were not shared: Redis did not take them", err)
			continue
		}
		r.m.sent.Add(float64(n))
	}
	return msg
}

// receive applies each message of ch until it is closed.
func (r *Redis) receive(ch <-chan *redis.Message, apply func(Placement) bool) {
	var scratch []uint64
	for m := range ch {
		var err error
		scratch, err = decode([]byte(m.Payload), r.id, scratch, func(p Placement) {
			if apply(p) {
				r.m.received.Inc()
			} else {
				r.m.ignored.Inc()
			}
		})
		if err != nil {
			r.m.ignored.Inc()
			r.warn("a placement message was not understood; is another version of llmgw on the channel?", err)
		}
	}
}

// warn logs err, unless one was logged within warnEvery.
func (r *Redis) warn(msg string, err error) {
	now := time.Now().UnixNano()
	last := r.lastWarn.Load()
	if now-last < int64(warnEvery) || !r.lastWarn.CompareAndSwap(last, now) {
		return
	}
	r.log.Warn(msg, "channel", r.channel, "err", err)
}
