package placement

// Placements and loads over Redis publish/subscribe: every gateway
// publishes its placements on one channel and its loads on another, and
// applies the others'. Publish/subscribe keeps nothing, so a gateway that
// starts learns only what is sent from then on; its own index fills as it
// routes, as it would alone.

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
	// DefaultChannel is the channel placements go out on. Loads go out
	// on the same name with loadSuffix.
	DefaultChannel = "llmgw:placements"
	loadSuffix     = ":load"

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

	// loadEvery is how often a gateway with requests in flight sends its
	// load: a prefill of a few hundred tokens takes about this long, so
	// the others learn of a prompt before most of it is computed. At 64
	// endpoints a message is about 2 KiB.
	loadEvery = 10 * time.Millisecond

	// warnEvery spaces out logs of Redis errors: while Redis is away
	// every batch fails the same way.
	warnEvery = 10 * time.Second
)

// Options configures a Redis bus.
type Options struct {
	// Channel is the Redis channel; empty means DefaultChannel. Gateways
	// share placements when they share a Redis and a channel.
	Channel string
	// Placements shares prefix index placements; Loads shares what each
	// gateway has in flight at each endpoint. A bus with neither does
	// nothing.
	Placements, Loads bool
	// Registerer takes the bus's metrics; nil registers none.
	Registerer prometheus.Registerer
	// Logger gets Redis errors, at most one every ten seconds; nil
	// discards.
	Logger *slog.Logger
}

// Redis is a bus of placements and loads on Redis channels. Publish
// queues a placement; Run sends and receives.
type Redis struct {
	client      redis.UniversalClient
	channel     string
	loadChannel string
	placements  bool   // sharing placements
	loads       bool   // sharing loads
	id          uint64 // this gateway's, to know its own messages when they come back
	queue       chan Placement
	log         *slog.Logger
	m           busMetrics
	// lastWarn is when a Redis error was last logged, Unix nanoseconds.
	lastWarn atomic.Int64
}

// busMetrics counts placements, and load messages, by what became of
// them.
type busMetrics struct {
	placements, loads outcomes
}

type outcomes struct {
	sent, dropped, received, ignored prometheus.Counter
}

func newOutcomes(v *prometheus.CounterVec) outcomes {
	return outcomes{
		sent: v.WithLabelValues("sent"), dropped: v.WithLabelValues("dropped"),
		received: v.WithLabelValues("received"), ignored: v.WithLabelValues("ignored"),
	}
}

func newBusMetrics(reg prometheus.Registerer) busMetrics {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "llmgw_prefix_placements_total",
		Help: "Prefix index placements shared with the other gateways: sent; dropped unsent (the queue was full or Redis did not answer); received and applied; received and ignored (a pool, endpoint or block size this gateway does not have).",
	}, []string{"outcome"})
	l := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "llmgw_peer_load_messages_total",
		Help: "Messages of what each gateway has in flight at each endpoint, shared with the other gateways: sent; dropped unsent (Redis did not answer); received and applied; received and ignored (not understood).",
	}, []string{"outcome"})
	if reg != nil {
		reg.MustRegister(v, l)
	}
	return busMetrics{placements: newOutcomes(v), loads: newOutcomes(l)}
}

// NewRedis returns a bus on client. It starts nothing; call Run.
func NewRedis(client redis.UniversalClient, o Options) *Redis {
	r := &Redis{
		client:     client,
		channel:    o.Channel,
		placements: o.Placements,
		loads:      o.Loads,
		id:         rand.Uint64(),
		queue:      make(chan Placement, queueLen),
		log:        o.Logger,
		m:          newBusMetrics(o.Registerer),
	}
	if r.channel == "" {
		r.channel = DefaultChannel
	}
	r.loadChannel = r.channel + loadSuffix
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
		r.m.placements.dropped.Inc()
	}
}

// Gateway is what a bus shares: one gateway's router.
type Gateway interface {
	// Place applies a placement another gateway made, and reports
	// whether it named a pool, endpoint and block size this gateway has.
	// Its argument is valid only during the call.
	Place(Placement) bool
	// Loads appends this gateway's load at every endpoint where it has
	// something in flight to buf.
	Loads(buf []Load) []Load
	// PeerLoads takes the whole load of the gateway whose id is from, in
	// place of what it sent before. Its argument is valid only during
	// the call.
	PeerLoads(from uint64, loads []Load)
}

// Run sends what Publish queues and, every loadEvery while it has
// requests in flight, g's load; and gives g what the other gateways on
// the channel send, until ctx ends. It returns nil once ctx ends; Redis
// errors are logged and counted, and the subscription reconnects on its
// own.
func (r *Redis) Run(ctx context.Context, g Gateway) error {
	var channels []string
	if r.placements {
		channels = append(channels, r.channel)
	}
	if r.loads {
		channels = append(channels, r.loadChannel)
	}
	if len(channels) == 0 {
		<-ctx.Done()
		return nil
	}
	sub := r.client.Subscribe(ctx, channels...)
	var wg sync.WaitGroup
	wg.Go(func() { r.receive(sub.Channel(), g) })
	if r.loads {
		wg.Go(func() { r.sendLoads(ctx, g) })
	}
	if r.placements {
		r.send(ctx)
	} else {
		<-ctx.Done()
	}
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
			r.m.placements.dropped.Add(float64(n))
			r.warn("placements were not shared: Redis did not take them", err)
			continue
		}
		r.m.placements.sent.Add(float64(n))
	}
	return msg
}

// sendLoads publishes g's load every loadEvery, while it has something in
// flight and once more when it has nothing, until ctx ends.
func (r *Redis) sendLoads(ctx context.Context, g Gateway) {
	t := time.NewTicker(loadEvery)
	defer t.Stop()
	var loads []Load
	var msg []byte
	idle := true
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		loads = g.Loads(loads[:0])
		if len(loads) == 0 && idle {
			continue
		}
		idle = len(loads) == 0
		msg = appendHeader(msg[:0], r.id)
		for _, l := range loads {
			msg = appendLoad(msg, l)
		}
		cctx, cancel := context.WithTimeout(ctx, publishTimeout)
		err := r.client.Publish(cctx, r.loadChannel, msg).Err()
		cancel()
		if err != nil {
			r.m.loads.dropped.Inc()
			r.warn("loads were not shared: Redis did not take them", err)
			continue
		}
		r.m.loads.sent.Inc()
	}
}

// receive gives g each message of ch until it is closed.
func (r *Redis) receive(ch <-chan *redis.Message, g Gateway) {
	var scratch []uint64
	var loads []Load
	for m := range ch {
		if m.Channel == r.loadChannel {
			var from uint64
			var ok bool
			if from, loads, ok = decodeLoads([]byte(m.Payload), r.id, loads[:0]); !ok {
				r.m.loads.ignored.Inc()
				r.warn("a load message was not understood; is another version of llmgw on the channel?", errMalformed)
				continue
			}
			if from != r.id {
				g.PeerLoads(from, loads)
				r.m.loads.received.Inc()
			}
			continue
		}
		var err error
		scratch, err = decode([]byte(m.Payload), r.id, scratch, func(p Placement) {
			if g.Place(p) {
				r.m.placements.received.Inc()
			} else {
				r.m.placements.ignored.Inc()
			}
		})
		if err != nil {
			r.m.placements.ignored.Inc()
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
