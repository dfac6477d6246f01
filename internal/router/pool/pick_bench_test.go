package pool

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

// benchEndpoints is the pool size the pick benchmarks use: the most a pool
// may have.
const benchEndpoints = 64

// benchIndex is a prefix index of a 64-endpoint pool that has been sent
// 50,000 prompts of 2 to 4 KiB: 200 system prompts of 1 to 2 KiB, each
// followed by a conversation of its own, each family mostly on one
// endpoint. It is built once and shared, as it takes a second.
var benchIndex = sync.OnceValue(func() *PrefixIndex {
	x := newPrefixIndex(benchEndpoints, BlockBytes(DefaultKVBlock))
	r := rand.New(rand.NewPCG(1, 2))
	var hashes []uint64
	for k := range 50_000 {
		fam := k % len(benchSystems())
		prompt := benchPromptOf(fam, uint64(k), 1<<10+r.IntN(2<<10))
		hashes = HashBlocks(hashes[:0], prompt, x.block, 0)
		ep := fam % benchEndpoints
		if r.IntN(4) == 0 {
			ep = r.IntN(benchEndpoints)
		}
		x.Add(hashes, ep)
	}
	return x
})

// benchSystems are the system prompts the benchmark's prompts begin with.
var benchSystems = sync.OnceValue(func() [][]byte {
	s := make([][]byte, 200)
	for i := range s {
		s[i] = text(uint64(i), 1<<10+i*5)
	}
	return s
})

// benchTail is text conversations are cut from.
var benchTail = sync.OnceValue(func() []byte { return text(1<<40, 1<<20) })

// benchPromptOf is family fam's system prompt and tail bytes of a
// conversation of its own, picked by seed.
func benchPromptOf(fam int, seed uint64, tail int) []byte {
	sys, all := benchSystems()[fam], benchTail()
	off := int(mix(seed) % uint64(len(all)-tail))
	return append(append(make([]byte, 0, len(sys)+tail), sys...), all[off:off+tail]...)
}

// benchPool is a 64-endpoint pool of the policy on the shared index, with
// load on its endpoints as a busy pool has.
func benchPool(policy string) *Pool {
	cp := catalog.Pool{Name: "bench", Policy: policy}
	for i := range benchEndpoints {
		cp.Endpoints = append(cp.Endpoints, catalog.Endpoint{URL: fmt.Sprintf("http://10.0.%d.%d:8000/v1", i/200, i%200+1)})
	}
	p := New(cp, nil, nil)
	p.index.Store(benchIndex())
	now := time.Now()
	for i, e := range p.endpoints {
		e.inflight.Store(int64(10 + i%7))
		e.pending.Store(int64(i % 3))
		e.owed.Store(int64(500 * (i % 5)))
		e.critical.Store(int64(i % 4 / 3)) // a critical stream on every fourth
		e.scrape.Store(&Load{Waiting: float64(i % 4), KVUsage: float64(i%10) / 10, At: now})
	}
	return p
}

// BenchmarkPick is one pick among 64 endpoints for a prompt whose prefix
// several of them hold, of a request below critical; the prompt is
// prepared once, outside the loop.
func BenchmarkPick(b *testing.B) {
	prompt := benchPromptOf(7, 1<<50, 3<<10)
	for _, policy := range catalog.Policies {
		b.Run(policy, func(b *testing.B) {
			p := benchPool(policy)
			var rt Route
			rt.Prepare(p, prompt, 0, int64(len(prompt)/BytesPerToken), 500*time.Millisecond)
			rt.Spare = 0.05
			c, now := all(p), time.Now()
			b.ReportAllocs()
			for b.Loop() {
				if i, _ := p.Pick(&rt, c, now); i < 0 {
					b.Fatal("no pick")
				}
			}
		})
	}
}

// BenchmarkPrepare is hashing a prompt and matching it in the index of
// BenchmarkPick, for prompts of 2, 8 and 32 KiB.
func BenchmarkPrepare(b *testing.B) {
	p := benchPool(catalog.PolicyAuto)
	for _, size := range []int{2 << 10, 8 << 10, 32 << 10} {
		prompt := benchPromptOf(7, 1<<50, size)
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			var rt Route
			b.SetBytes(int64(len(prompt)))
			b.ReportAllocs()
			for b.Loop() {
				rt.Prepare(p, prompt, 0, int64(len(prompt)/BytesPerToken), 500*time.Millisecond)
			}
			if rt.matched == ([64]int32{}) {
				b.Fatal("the prompt matched nothing")
			}
		})
	}
}

// BenchmarkPrepareSlots is BenchmarkPrepare on a llamacpp pool of 64
// endpoints of 8 slots, every slot holding a prompt of the benchmark's
// families: matching a prompt against the slot it would land in at each
// endpoint, 512 slots in all.
func BenchmarkPrepareSlots(b *testing.B) {
	cp := catalog.Pool{Name: "bench", Kind: catalog.KindLlamaCpp, Slots: 8}
	for i := range benchEndpoints {
		cp.Endpoints = append(cp.Endpoints, catalog.Endpoint{URL: fmt.Sprintf("http://10.0.%d.%d:8080/v1", i/200, i%200+1)})
	}
	p := New(cp, nil, nil)
	x := p.Index()
	var hashes []uint64
	for k := range benchEndpoints * 8 {
		fam := k % len(benchSystems())
		hashes = HashBlocks(hashes[:0], benchPromptOf(fam, uint64(k), 2<<10), x.block, 0)
		x.Add(hashes, fam%benchEndpoints)
	}
	for _, size := range []int{2 << 10, 8 << 10, 32 << 10} {
		prompt := benchPromptOf(7, 1<<50, size)
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			var rt Route
			b.SetBytes(int64(len(prompt)))
			b.ReportAllocs()
			for b.Loop() {
				rt.Prepare(p, prompt, 0, int64(len(prompt)/BytesPerToken), 500*time.Millisecond)
			}
			if size <= 8<<10 && rt.matched == ([64]int32{}) {
				b.Fatal("the prompt matched nothing") // a longer one shares a tenth with no slot
			}
		})
	}
}
