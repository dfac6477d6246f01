package sim

import (
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// arrival is one request of a virtual replica's test: when it comes, a
// prompt of blocks named by tag (equal tags at the start share a
// prefix), and its answer's length.
type arrival struct {
	at     time.Duration
	tags   []string
	tokens int
}

// body is the chat body of a: each tag a message of 40 words.
func (a arrival) body() []byte {
	var msgs []string
	for _, tag := range a.tags {
		msgs = append(msgs, fmt.Sprintf(`{"role":"user","content":%q}`, strings.Repeat(" "+tag, 40)))
	}
	return fmt.Appendf(nil, `{"model":"m","messages":[%s],"max_tokens":%d,"ignore_eos":true}`, strings.Join(msgs, ","), a.tokens)
}

// virtualArrivals overlap, share prefixes, and outnumber the slots of
// the fixed-mode profile, so that some wait.
func virtualArrivals() []arrival {
	var as []arrival
	for i := range 24 {
		as = append(as, arrival{
			at:     time.Duration(i)*7*time.Millisecond + 313*time.Microsecond,
			tags:   []string{"system", fmt.Sprintf("user%d", i%5), fmt.Sprintf("turn%d", i)},
			tokens: 5 + i%7*9,
		})
	}
	return as
}

// servedTraces runs arrivals through the step loop in a synctest bubble,
// as a served replica does, and returns each one's token times from the
// bubble's start.
func servedTraces(t *testing.T, cfg Config, as []arrival) []trace {
	var out []trace
	synctest.Test(t, func(t *testing.T) {
		e, _ := testEngine(cfg)
		start(t, e)
		t0 := time.Now()
		var chans []<-chan trace
		for _, a := range as {
			time.Sleep(t0.Add(a.at).Sub(time.Now()))
			c, p, err := parseChat(a.body(), e.cfg.BlockSize)
			if err != nil {
				t.Fatal(err)
			}
			_, gen, err := e.cfg.plan(chatEndpoint, c, p)
			if err != nil {
				t.Fatal(err)
			}
			chans = append(chans, follow(t, e, newSeq(p, gen.tokens)))
		}
		for i, c := range chans {
			tr := <-c
			for k := range tr.times {
				tr.times[k] += as[i].at // follow times from the submission
			}
			out = append(out, tr)
		}
	})
	return out
}

// virtualTraces runs arrivals through a Virtual, moving its clock from
// event to event.
func virtualTraces(t *testing.T, cfg Config, as []arrival) []trace {
	v := NewVirtual(cfg)
	t0 := time.Unix(1000, 0)
	out := make([]trace, len(as))
	next := 0
	for {
		at, busy := v.Next()
		if next < len(as) && (!busy || !t0.Add(as[next].at).After(at)) {
			i := next
			_, err := v.Submit(as[i].body(), t0.Add(as[i].at), func(a *Answer, now time.Time) {
				out[i].times = append(out[i].times, now.Sub(t0))
				out[i].cached = a.CachedTokens
			})
			if err != nil {
				t.Fatal(err)
			}
			next++
			continue
		}
		if !busy {
			return out
		}
		v.Advance(at)
	}
}

// TestVirtualMatchesTheStepLoop checks a Virtual against the served
// replica's step loop on a fake clock: the same requests at the same
// times get every token at the same time and find the same cached
// prompt, in batch mode and in fixed mode, with requests queued for
// slots and the KV cache.
func TestVirtualMatchesTheStepLoop(t *testing.T) {
	cases := map[string]Config{
		"chunked": profile(t, ProfileChunked).Apply(Config{}),
		"slots":   profile(t, ProfileSlots).Apply(Config{}),
		// A cache of 60 blocks: requests wait for blocks, and cached
		// prefixes are evicted.
		"small cache": profile(t, ProfileChunked).Apply(Config{NumBlocks: 60}),
		"radix":       profile(t, ProfileRadix).Apply(Config{NumBlocks: 60}),
		"slow":        profile(t, ProfileChunked).Apply(Config{Speed: 0.667}),
	}
	for name, cfg := range cases {
		t.Run(name, func(t *testing.T) {
			if name == "slots" {
				cfg.MaxSeqs = 4
			}
			cfg.Model = "m"
			as := virtualArrivals()
			want, got := servedTraces(t, cfg, as), virtualTraces(t, cfg, as)
			cached := 0
			for i := range as {
				if len(got[i].times) != as[i].tokens {
					t.Errorf("request %d: %d tokens, want %d", i, len(got[i].times), as[i].tokens)
				}
				if diff := cmp.Diff(want[i], got[i], cmp.AllowUnexported(trace{})); diff != "" {
					t.Errorf("request %d (-served +virtual):\n%s", i, diff)
				}
				cached += got[i].cached
			}
			if cached == 0 {
				t.Error("no request found a cached prefix: the case does not test the cache")
			}
		})
	}
}

// TestVirtualRefusesAsTheServerDoes checks that a Virtual refuses the
// bodies a served replica refuses, with the same error.
func TestVirtualRefusesAsTheServerDoes(t *testing.T) {
	v := NewVirtual(Config{Model: "m", MaxModelLen: 100})
	for body, param := range map[string]string{
		`{"model":"m","messages":[]}`:                                                "messages",
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"n":2}`:            "n",
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":0}`:   "max_tokens",
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":500}`: "messages",
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"cache_salt":""}`:  "cache_salt",
	} {
		_, err := v.Submit([]byte(body), time.Unix(0, 0), nil)
		e := openai.AsError(err)
		if err == nil || e.Param != param {
			t.Errorf("%s: error %v (param %q), want one naming %q", body, err, e.Param, param)
		}
	}
	if _, ok := v.Next(); ok {
		t.Error("a refused request left the replica something to do")
	}
}
