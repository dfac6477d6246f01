package sim

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// profile is the profile named name; the test fails when there is none.
func profile(t *testing.T, name string) Profile {
	t.Helper()
	p, err := ProfileNamed(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// tpotAt is the gap between the tokens of concurrency sequences decoding
// together under cfg, once every one is past its prefill: the median of
// the first sequence's gaps, on the bubble's clock.
func tpotAt(t *testing.T, cfg Config, concurrency int) time.Duration {
	var gap time.Duration
	synctest.Test(t, func(t *testing.T) {
		e, _ := testEngine(cfg)
		var traces []<-chan trace
		for i := range concurrency {
			traces = append(traces, follow(t, e, newSeq(testPrompt(fmt.Sprint("c", i), 20, 16), 9)))
		}
		start(t, e)
		for i, c := range traces {
			tr := <-c
			if i == 0 {
				gaps := tr.itls()
				slices.Sort(gaps)
				gap = gaps[len(gaps)/2]
			}
		}
	})
	return gap
}

// TestProfileTPOTUnderConcurrency: under slots a sequence's time per
// output token is the same with 16 decoding as alone; under every batching
// profile it grows with the batch, by StepPerToken a sequence (16 of them,
// or as many as the profile runs at once).
func TestProfileTPOTUnderConcurrency(t *testing.T) {
	for _, p := range Profiles {
		t.Run(p.Name, func(t *testing.T) {
			cfg := p.Apply(Config{})
			n := min(16, p.MaxSeqs) // llamacpp runs 8 at once
			alone, full := tpotAt(t, cfg, 1), tpotAt(t, cfg, n)
			if p.FixedTiming {
				if alone != p.TPOT || full != p.TPOT {
					t.Errorf("TPOT alone %v, with 16 %v; want both %v", alone, full, p.TPOT)
				}
				return
			}
			if want := p.StepBase + p.StepPerToken; alone != want {
				t.Errorf("TPOT alone %v, want %v", alone, want)
			}
			if want := p.StepBase + time.Duration(n)*p.StepPerToken; full != want {
				t.Errorf("TPOT with %d %v, want %v", n, full, want)
			}
		})
	}
}

// cacheSaving is what a cached prompt saves under cfg: the TTFT of a
// 2000-token prompt on first sight and when sent again, and the TPOT of a
// sequence alone.
func cacheSaving(t *testing.T, cfg Config) (cold, warm, tpot time.Duration) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := testEngine(cfg)
		start(t, e)
		first := <-follow(t, e, newSeq(testPrompt("long", 2000, 16), 5))
		again := <-follow(t, e, newSeq(testPrompt("long", 2000, 16), 5))
		if first.cached != 0 || again.cached != 1984 {
			t.Errorf("cached tokens %d then %d, want 0 then 1984", first.cached, again.cached)
		}
		cold, warm, tpot = first.ttft(), again.ttft(), again.itls()[0]
	})
	return cold, warm, tpot
}

// TestProfileCachedTokenSaves: a cached prompt token saves TTFT in
// proportion to the profile's prompt-token cost, much under prefill_heavy
// and little under decode_heavy, measured against the time of an output
// token and against the uncached TTFT.
func TestProfileCachedTokenSaves(t *testing.T) {
	type saving struct{ perTPOT, share float64 }
	got := map[string]saving{}
	for _, p := range Profiles {
		t.Run(p.Name, func(t *testing.T) {
			cfg := p.Apply(Config{})
			c := cfg.withDefaults()
			cold, warm, tpot := cacheSaving(t, cfg)
			// Cold: the prompt in chunks of the step budget; warm: one
			// step for the last, uncached block of 16 tokens.
			wantCold, wantWarm := 0*time.Second, 0*time.Second
			if p.FixedTiming {
				wantCold, wantWarm = c.TTFT+2000*c.PrefillPerToken, c.TTFT+16*c.PrefillPerToken
			} else {
				chunks := (2000 + c.MaxBatchedTokens - 1) / c.MaxBatchedTokens
				wantCold = time.Duration(chunks)*c.StepBase + 2000*c.StepPerPrefillToken
				wantWarm = c.StepBase + 16*c.StepPerPrefillToken
			}
			if cold != wantCold || warm != wantWarm {
				t.Errorf("TTFT cold %v, warm %v; want %v, %v", cold, warm, wantCold, wantWarm)
			}
			got[p.Name] = saving{float64(cold-warm) / float64(tpot), float64(cold-warm) / float64(cold)}
			t.Logf("cold %v, warm %v, TPOT %v: the cache saves %.1f output tokens' time, %.0f%% of TTFT",
				cold, warm, tpot, got[p.Name].perTPOT, 100*got[p.Name].share)
		})
	}
	heavy, chunked, light := got[ProfilePrefillHeavy], got[ProfileChunked], got[ProfileDecodeHeavy]
	if !(heavy.perTPOT > 2*chunked.perTPOT && chunked.perTPOT > 2*light.perTPOT) {
		t.Errorf("saving in output tokens' time: prefill_heavy %.1f, chunked %.1f, decode_heavy %.1f; want each over twice the next",
			heavy.perTPOT, chunked.perTPOT, light.perTPOT)
	}
	if !(heavy.share > light.share) {
		t.Errorf("share of TTFT saved: prefill_heavy %.2f, decode_heavy %.2f; want prefill_heavy's larger", heavy.share, light.share)
	}
}

// TestProfileMetricsTruthful: under every profile the vLLM metrics say
// what the engine does: two of four sequences running and two waiting,
// the KV blocks the two hold, and prefix-cache queries and hits that add
// up to the sequences' prompts and cached tokens.
func TestProfileMetricsTruthful(t *testing.T) {
	for _, p := range Profiles {
		t.Run(p.Name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := p.Apply(Config{})
				cfg.MaxSeqs, cfg.NumBlocks = 2, 100
				e, reg := testEngine(cfg)
				// llama.cpp's names, where it has them; it exports no KV
				// cache usage.
				running, waiting, kv := "vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"
				gauge := func(name string) float64 { return metricValue(t, reg, name) }
				if p.Cache == CacheSlots {
					running, waiting = "llamacpp:requests_processing", "llamacpp:requests_deferred"
					gauge = func(name string) float64 {
						if name == kv {
							_, _, u := e.stats()
							return u
						}
						return metricValue(t, reg, name)
					}
				}
				prompts := []int{100, 116, 132, 148} // one stem: each extends the one before
				var traces []<-chan trace
				for _, n := range prompts {
					traces = append(traces, follow(t, e, newSeq(testPrompt("m", n, 16), 5)))
				}
				start(t, e)
				synctest.Wait()
				// Neither of the first two had cached its prompt when both
				// were admitted: 7 and 8 blocks of their own.
				for name, want := range map[string]float64{running: 2, waiting: 2, kv: 0.15} {
					if got := gauge(name); got != want {
						t.Errorf("while two run: %s = %v, want %v", name, got, want)
					}
				}
				hits, queries := 0, 0
				for i, c := range traces {
					tr := <-c
					hits += tr.cached
					queries += prompts[i]
					if len(tr.times) != 5 {
						t.Errorf("sequence %d produced %d tokens, want 5", i, len(tr.times))
					}
				}
				if hits == 0 {
					t.Error("no prompt was found in the prefix cache")
				}
				got := map[string]float64{
					"hits": testutil.ToFloat64(e.m.prefixHits), "queries": testutil.ToFloat64(e.m.prefixQueries),
					"generated": testutil.ToFloat64(e.m.generationTokens),
					"running":   gauge(running), "waiting": gauge(waiting), "kv": gauge(kv),
				}
				want := map[string]float64{"hits": float64(hits), "queries": float64(queries), "generated": 20, "running": 0, "waiting": 0, "kv": 0}
				for k, w := range want {
					if got[k] != w {
						t.Errorf("after all: %s = %v, want %v", k, got[k], w)
					}
				}
			})
		})
	}
}

// TestProfileCache: the radix profile runs a radix cache, llamacpp a
// slot cache, the others vLLM's block cache.
func TestProfileCache(t *testing.T) {
	for _, p := range Profiles {
		e, _ := testEngine(p.Apply(Config{}))
		_, radix := e.kv.(*radixCache)
		_, slots := e.kv.(*slotCache)
		if radix != (p.Name == ProfileRadix) || slots != (p.Name == ProfileLlamaCpp) {
			t.Errorf("%s: radix cache %v, slot cache %v", p.Name, radix, slots)
		}
	}
}

func TestProfileNamed(t *testing.T) {
	if p := profile(t, DefaultProfile); p.Apply(Config{}).withDefaults() != (Config{}).withDefaults() {
		t.Errorf("the default profile %s is not a zero Config's defaults", p.Name)
	}
	if _, err := ProfileNamed("vllm"); err == nil || !strings.Contains(err.Error(), "chunked, slots, prefill_heavy, decode_heavy, radix") {
		t.Errorf("unknown profile: %v, want an error listing the profiles", err)
	}
}

// TestCommandProfile: --profile sets the engine's timing, limits and
// cache; a flag given wins over the profile's; an unknown profile is
// refused naming the flag.
func TestCommandProfile(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want func(Config) bool
	}{
		{[]string{"--profile", "slots"}, func(c Config) bool {
			return c.FixedTiming && c.MaxSeqs == 16 && c.TPOT == 10*time.Millisecond && c.PrefillPerToken == 200*time.Microsecond
		}},
		{[]string{"--profile", "slots", "--max-seqs", "5", "--tpot", "0"}, func(c Config) bool {
			return c.FixedTiming && c.MaxSeqs == 5 && c.TPOT == 0 && c.PrefillPerToken == 200*time.Microsecond
		}},
		{[]string{"--profile", "radix"}, func(c Config) bool { return c.Cache == CacheRadix && !c.FixedTiming }},
		{[]string{"--profile", "prefill_heavy", "--step-per-prefill-token", "1ms"}, func(c Config) bool {
			return c.StepPerPrefillToken == time.Millisecond && c.MaxBatchedTokens == 512
		}},
		{[]string{"--step-per-token", "1ms"}, func(c Config) bool { return c.withDefaults().StepPerPrefillToken == time.Millisecond }},
		{[]string{"--profile", "decode_heavy", "--step-per-token", "1ms"}, func(c Config) bool {
			return c.withDefaults().StepPerPrefillToken == 25*time.Microsecond
		}},
		{[]string{"--tpot", "5ms"}, func(c Config) bool {
			return c.FixedTiming && c.TPOT == 5*time.Millisecond && c.MaxSeqs == DefaultMaxSeqs
		}},
		{nil, func(c Config) bool { return c.withDefaults() == (Config{}).withDefaults() }},
	} {
		cfg, _, err := parseFlags(tt.args, io.Discard)
		if err != nil || !tt.want(cfg) {
			t.Errorf("parseFlags(%q) = %+v, %v", tt.args, cfg, err)
		}
	}
	err := Command(t.Context(), []string{"--profile", "vllm"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--profile") {
		t.Errorf("unknown profile: %v, want an error naming --profile", err)
	}
}
