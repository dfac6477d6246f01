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
	// PUBLISH stays well under a millisecond of the server's time. A
	// gateway sends no longer message: one placement is at most 4 KiB
	// and two names, and a load message about 170 bytes an endpoint with
	// something in flight, over a thousand endpoints in 256 KiB. A longer
	// message that arrives is refused unread, so that what is decoded
	// from the bus, and held while it is, stays within a few times this.
	maxMessage = 256 << 10

	// MaxHashes is the most hashes one placement carries: a gateway
	// hashes at most the first 512 blocks of a prompt (the router's
	// maxPrefixBlocks). A placement with more is refused.
	MaxHashes = 512

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
// them, and what was refused of what the other gateways sent, by why.
type busMetrics struct {
	placements, loads outcomes
	// placementsRefused counts placements (a too-large message once);
	// loadsRefused counts load records, one gateway's counts at one
	// endpoint (a too-large message once; an endpoint's sum cut, once for
	// each message that leaves it cut). Indexed by Refusal.
	placementsRefused, loadsRefused [numRefusals]prometheus.Counter
}

// Refusal is why something another gateway sent was not believed: the
// reason label of llmgw_peer_loads_refused_total and
// llmgw_prefix_placements_refused_total. Nothing on the bus is
// authenticated beyond Redis's own AUTH, so whatever could write to
// Redis could write it; a gateway believes of it no more than one real,
// fully loaded gateway could have sent.
type Refusal uint8

const (
	// RefusedTooLarge: a message longer than any gateway sends
	// (maxMessage), refused unread.
	RefusedTooLarge Refusal = iota
	// RefusedHashes: a placement of more blocks than a gateway hashes of
	// a prompt (MaxHashes).
	RefusedHashes
	// RefusedUnknown: a load at a pool and endpoint this gateway's
	// catalog does not have, which it could not use.
	RefusedUnknown
	// RefusedDuplicate: a second load for one endpoint in one message.
	RefusedDuplicate
	// RefusedInflight: more requests in flight at one endpoint than one
	// gateway can hold.
	RefusedInflight
	// RefusedCounts: more requests pending and critical together than in
	// flight, or a count below zero.
	RefusedCounts
	// RefusedOwed: more prefill owed than the pending requests could
	// carry, each at most the largest body the gateway takes.
	RefusedOwed
	// RefusedPeers: a load from a gateway past the most whose loads are
	// kept at once.
	RefusedPeers
	// RefusedSum: the gateways' loads at an endpoint summed past what one
	// gateway could have there; the excess is not believed.
	RefusedSum
	numRefusals
)

var refusalNames = [numRefusals]string{
	RefusedTooLarge: "too_large", RefusedHashes: "hashes", RefusedUnknown: "unknown_endpoint",
	RefusedDuplicate: "duplicate", RefusedInflight: "inflight", RefusedCounts: "counts",
	RefusedOwed: "owed", RefusedPeers: "peers", RefusedSum: "sum",
}

// String is the refusal's reason label.
func (r Refusal) String() string { return refusalNames[r] }

// Refusals counts, by why, what a gateway refused of one message.
type Refusals [numRefusals]int

// Add counts n refused for why.
func (rs *Refusals) Add(why Refusal, n int) { rs[why] += n }

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
		Help: "Messages of what each gateway has in flight at each endpoint, shared with the other gateways: sent; dropped unsent (Redis did not answer, or the message would be longer than any gateway takes); received and applied; received and ignored (not understood).",
	}, []string{"outcome"})
	pr := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "llmgw_prefix_placements_refused_total",
		Help: "Placements other gateways sent that were refused as more than a gateway sends, by reason: too_large (a message longer than any gateway sends, counted once, unread), hashes (more blocks than a gateway hashes of a prompt).",
	}, []string{"reason"})
	lr := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "llmgw_peer_loads_refused_total",
		Help: "Other gateways' loads at an endpoint refused as more than one gateway could have, by reason: too_large (a message longer than any gateway sends, counted once, unread), unknown_endpoint, duplicate, inflight (more than a gateway can hold), counts (pending and critical above in flight), owed (more prefill than its pending prompts could carry), peers (from a gateway past the most kept), sum (the gateways' sum at an endpoint past what one gateway could have there, counted for each message that leaves it cut).",
	}, []string{"reason"})
	if reg != nil {
		reg.MustRegister(v, l, pr, lr)
	}
	m := busMetrics{placements: newOutcomes(v), loads: newOutcomes(l)}
	for _, why := range []Refusal{RefusedTooLarge, RefusedHashes} {
		m.placementsRefused[why] = pr.WithLabelValues(why.String())
	}
	for why := RefusedTooLarge; why < numRefusals; why++ {
		if why != RefusedHashes {
			m.loadsRefused[why] = lr.WithLabelValues(why.String())
		}
	}
	return m
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
	// place of what it sent before, and returns what it refused of it.
	// Its argument is valid only during the call.
	PeerLoads(from uint64, loads []Load) Refusals
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
		if len(msg) > maxMessage {
			// The others would refuse it unread; they count this
			// gateway's requests as the scrapes show them.
			r.m.loads.dropped.Inc()
			r.warn("loads were not shared: more endpoints have requests in flight than one message holds", errTooLarge)
			continue
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

// receive gives g each message of ch until it is closed. A message longer
// than maxMessage is refused unread: no gateway sends one.
func (r *Redis) receive(ch <-chan *redis.Message, g Gateway) {
	var scratch []uint64
	var loads []Load
	for m := range ch {
		if m.Channel == r.loadChannel {
			if len(m.Payload) > maxMessage {
				r.m.loadsRefused[RefusedTooLarge].Inc()
				r.warn("a load message longer than any gateway sends was refused", errTooLarge)
				continue
			}
			var from uint64
			var ok bool
			if from, loads, ok = decodeLoads([]byte(m.Payload), r.id, loads[:0]); !ok {
				r.m.loads.ignored.Inc()
				r.warn("a load message was not understood; is another version of llmgw on the channel?", errMalformed)
				continue
			}
			if from != r.id {
				refused := g.PeerLoads(from, loads)
				r.m.loads.received.Inc()
				for why, n := range refused {
					if n > 0 && r.m.loadsRefused[why] != nil {
						r.m.loadsRefused[why].Add(float64(n))
					}
				}
			}
			continue
		}
		if len(m.Payload) > maxMessage {
			r.m.placementsRefused[RefusedTooLarge].Inc()
			r.warn("a placement message longer than any gateway sends was refused", errTooLarge)
			continue
		}
		var err error
		scratch, err = decode([]byte(m.Payload), r.id, scratch, func(p Placement) {
			switch {
			case len(p.Hashes) > MaxHashes:
				r.m.placementsRefused[RefusedHashes].Inc()
			case g.Place(p):
				r.m.placements.received.Inc()
			default:
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
