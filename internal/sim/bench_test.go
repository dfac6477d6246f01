package sim

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// BenchmarkStreamedChat is whole streamed chat requests, 16 tokens each,
// against a zero-latency replica over loopback: the most a replica can
// serve, so it can be shown not to be the bottleneck when a gateway's
// overhead is measured.
func BenchmarkStreamedChat(b *testing.B) {
	s := New(Config{FixedTiming: true})
	defer s.Close()
	ts := httptest.NewServer(s)
	defer ts.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	body := []byte(`{"model":"sim-8b","stream":true,"max_tokens":16,"ignore_eos":true,` +
		`"messages":[{"role":"user","content":"Explain continuous batching in one paragraph."}]}`)
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := client.Post(ts.URL+"/v1/chat/completions", "application/json", bytes.NewReader(body))
			if err != nil {
				b.Error(err)
				return
			}
			n, _ := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || n < 16*100 {
				b.Errorf("status %d, %d bytes", resp.StatusCode, n)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}

// BenchmarkStepLoop is the CPU a batch-mode step costs with 1,000 streams
// decoding: planning and committing one step, without the sleep.
func BenchmarkStepLoop(b *testing.B) {
	e, _ := testEngine(Config{MaxSeqs: 1000, NumBlocks: 1 << 28})
	for i := range 1000 {
		s := newSeq(testPrompt(string(rune('a'+i%26))+string(rune('a'+i/26)), 20, 16), 1<<20)
		e.submit(s, time.Now())
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.admit(e.waiting[0].arrived)
	for _, s := range e.running {
		s.prefilled = s.prefillLeft()
		s.generated = 1
	}
	b.ReportAllocs()
	for b.Loop() {
		e.plan()
		e.commit(e.running[0].arrived)
	}
}

// BenchmarkPrefixCacheChurn is one sequence's life in a full prefix cache
// (match, allocate with eviction, promote, release) for each cache kind
// and two cache sizes: the cost of an admission must not grow with the
// blocks cached.
func BenchmarkPrefixCacheChurn(b *testing.B) {
	const bs, stems, branches = 16, 64, 4096
	prompts := make([]promptInfo, branches)
	for i := range prompts {
		prompts[i] = branchPrompt(fmt.Sprint("stem", i%stems), 512, fmt.Sprint("branch", i), 256, bs)
	}
	for _, kind := range []CacheKind{CacheBlocks, CacheRadix} {
		for _, total := range []int{1 << 12, 1 << 16} {
			b.Run(fmt.Sprintf("%s/%d", kind, total), func(b *testing.B) {
				k := prefixCache(newKVCache(bs, total))
				if kind == CacheRadix {
					k = newRadixCache(bs, total)
				}
				churn := func(i int) {
					s := newSeq(prompts[i%branches], 0)
					hit := k.match(s.hashes, len(s.hashes))
					if !k.allocate(s, hit, len(s.hashes)+4) {
						b.Fatal("a sequence does not fit an idle cache")
					}
					k.promote(s, hit)
					k.release(s)
				}
				for i := range 4 * branches { // fill the cache and start evicting
					churn(i)
				}
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					churn(i)
					i++
				}
			})
		}
	}
}
