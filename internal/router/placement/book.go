package placement

// The other gateways' loads, as a gateway keeps them: what each said last
// it has in flight at each endpoint (Load), and the sum over them at each
// endpoint, for the gateway to believe as far as one gateway could have
// it there. A gateway that falls silent is forgotten, and so is what it
// said.

import (
	"sync"
	"time"
)

// MaxPeers is the most other gateways whose loads a book keeps at once.
// A message from one more, while that many have spoken within the book's
// silence, is refused, and its gateway's requests are counted as the
// scrape shows them. It bounds the book's memory, and the work of each
// message, which looks over every gateway kept for those fallen silent:
// at 128 gateways sending every 10 ms, 12,800 messages a second of 128
// looks each, a few percent of a core.
const MaxPeers = 128

// Book is what every other gateway last said of its load, and the sum of
// it at each endpoint. Only the bus's receiver writes it.
type Book struct {
	silence time.Duration // how long what a gateway said stands without a word since

	mu   sync.Mutex           // protects from and sum
	from map[uint64]*said     // key: the gateway's id; at most MaxPeers
	sum  map[endpointKey]Load // key: an endpoint, as it was named when said; value: the gateways' loads there, summed
}

// endpointKey names an endpoint across gateways: by its pool's name and
// its own configured name.
type endpointKey struct{ pool, endpoint string }

// said is what one gateway said last, and when it arrived.
type said struct {
	at    time.Time
	loads map[endpointKey]Load
}

// NewBook is an empty book whose gateways are forgotten once silent for
// longer than silence.
func NewBook(silence time.Duration) *Book {
	return &Book{silence: silence, from: make(map[uint64]*said), sum: make(map[endpointKey]Load)}
}

// Take puts loads, arrived at now, in place of what the gateway from said
// before, first forgetting the gateways silent for longer than the book's
// silence. A record check refuses, or a second one for an endpoint, is
// refused alone, and counts as nothing of from's there; a message from a
// gateway past MaxPeers is refused whole. Then, with the book still
// locked, sum is given the new sum at each endpoint whose sum changed or
// that from still loads; all its counts are zero where nothing is left.
// Take returns what it refused.
func (b *Book) Take(from uint64, loads []Load, now time.Time, check func(Load) (Refusal, bool), sum func(Load)) Refusals {
	var refused Refusals
	b.mu.Lock()
	defer b.mu.Unlock()
	touched := make(map[endpointKey]bool, len(loads))
	// The silent go first, so that their places are free.
	for id, q := range b.from {
		if now.Sub(q.at) > b.silence {
			b.forget(q, touched)
			delete(b.from, id)
		}
	}
	s := b.from[from]
	switch {
	case s != nil:
		b.forget(s, touched)
	case len(b.from) >= MaxPeers:
		refused.Add(RefusedPeers, len(loads))
	default:
		s = &said{}
		b.from[from] = s
	}
	if s != nil {
		s.at = now
		s.loads = make(map[endpointKey]Load, len(loads))
		for _, l := range loads {
			k := endpointKey{l.Pool, l.Endpoint}
			why, ok := check(l)
			if _, dup := s.loads[k]; ok && dup {
				why, ok = RefusedDuplicate, false
			}
			if !ok {
				refused.Add(why, 1)
				continue
			}
			s.loads[k] = l
			b.sum[k] = plus(b.sum[k], l, 1)
			touched[k] = true
		}
	}
	for k := range touched {
		l := b.sum[k]
		l.Pool, l.Endpoint = k.pool, k.endpoint
		if l.Inflight == 0 && l.Pending == 0 && l.Owed == 0 && l.Critical == 0 {
			delete(b.sum, k)
		}
		sum(l)
	}
	return refused
}

// Gateways is how many gateways the book holds what they said of.
func (b *Book) Gateways() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.from)
}

// Endpoints is how many endpoints the book holds a sum for.
func (b *Book) Endpoints() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.sum)
}

// forget takes what q said out of the sums, and marks the endpoints it
// named in touched. b.mu is held.
func (b *Book) forget(q *said, touched map[endpointKey]bool) {
	for k, l := range q.loads {
		b.sum[k] = plus(b.sum[k], l, -1)
		touched[k] = true
	}
	q.loads = nil
}

// plus is sum with sign times l's counts added.
func plus(sum, l Load, sign int64) Load {
	sum.Inflight += sign * l.Inflight
	sum.Pending += sign * l.Pending
	sum.Owed += sign * l.Owed
	sum.Critical += sign * l.Critical
	return sum
}
