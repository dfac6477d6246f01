package virtual

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/sim"
)

// options is a pool of n replicas of profile under policy.
func options(t *testing.T, policy, profile string, n int) Options {
	t.Helper()
	prof, err := sim.ProfileNamed(profile)
	if err != nil {
		t.Fatal(err)
	}
	o := Options{
		Pool:  catalog.Pool{Name: "p", Kind: catalog.KindVLLM, Policy: policy, Metrics: catalog.Scrape{Interval: 100 * time.Millisecond, MaxAge: time.Second}},
		Model: catalog.Model{Name: "m", Pool: "p", SLO: catalog.SLO{TTFTp99: 2 * time.Second, TPOTp99: 100 * time.Millisecond}},
	}
	for i := range n {
		o.Pool.Endpoints = append(o.Pool.Endpoints, catalog.Endpoint{URL: fmt.Sprintf("http://r%d/v1", i)})
		o.Replicas = append(o.Replicas, sim.NewVirtual(prof.Apply(sim.Config{Model: "m"})))
	}
	return o
}

// conversations are n requests, one every 50 ms, of convs conversations
// taken in turn: each shares a long system prompt of its own, and adds a
// turn of its own.
func conversations(n, convs, tokens int) []Request {
	var reqs []Request
	for i := range n {
		system := strings.Repeat(fmt.Sprintf(" conversation %d says", i%convs), 300)
		body := fmt.Sprintf(`{"model":"m","messages":[{"role":"system","content":%q},{"role":"user","content":"turn %d"}],"max_tokens":%d,"ignore_eos":true,"stream":true}`, system, i, tokens)
		reqs = append(reqs, Request{At: time.Duration(i) * 50 * time.Millisecond, Body: []byte(body), Tenant: "org/team"})
	}
	return reqs
}

func replay(t *testing.T, o Options, reqs []Request) []Result {
	t.Helper()
	res, err := Run(o, reqs)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestRunAnswersEveryRequest checks that every request of a run within
// the pool's capacity is answered whole, its tokens timed in order.
func TestRunAnswersEveryRequest(t *testing.T) {
	for _, policy := range catalog.Policies {
		t.Run(policy, func(t *testing.T) {
			reqs := conversations(40, 4, 20)
			for i, r := range replay(t, options(t, policy, sim.ProfileChunked, 4), reqs) {
				switch {
				case !r.Answered || r.Err != "":
					t.Errorf("request %d: not answered (%q)", i, r.Err)
				case r.Tokens != 20 || len(r.Gaps) != 19:
					t.Errorf("request %d: %d tokens and %d gaps, want 20 and 19", i, r.Tokens, len(r.Gaps))
				case !(r.TTFT > 0 && r.Last > r.TTFT):
					t.Errorf("request %d: first token at %v, last at %v", i, r.TTFT, r.Last)
				case r.Endpoint < 0 || r.Endpoint > 3:
					t.Errorf("request %d: endpoint %d", i, r.Endpoint)
				}
			}
		})
	}
}

// TestRunIsDeterministic checks that the same run gives the same results.
func TestRunIsDeterministic(t *testing.T) {
	reqs := conversations(60, 6, 30)
	a := replay(t, options(t, catalog.PolicyAuto, sim.ProfileSlots, 4), reqs)
	b := replay(t, options(t, catalog.PolicyAuto, sim.ProfileSlots, 4), reqs)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("two runs differ (-first +second):\n%s", diff)
	}
}

// TestRunRoutesAsThePolicySays checks the policies' picks through the
// run: round robin spreads the requests evenly and so finds few cached
// prefixes; the prefix-aware policies keep each conversation on one
// replica, where all but its first request find its system prompt.
func TestRunRoutesAsThePolicySays(t *testing.T) {
	const n, convs = 48, 3
	reqs := conversations(n, convs, 10)
	count := func(res []Result) (by [4]int, cached, prompt int) {
		for _, r := range res {
			by[r.Endpoint]++
			cached += r.CachedTokens
			prompt += r.PromptTokens
		}
		return by, cached, prompt
	}
	by, rrCached, prompt := count(replay(t, options(t, catalog.PolicyRoundRobin, sim.ProfileChunked, 4), reqs))
	if by != [4]int{12, 12, 12, 12} {
		t.Errorf("round robin sent %v to the replicas, want 12 each", by)
	}
	for _, policy := range []string{catalog.PolicyPrefix, catalog.PolicyGIE, catalog.PolicyAuto} {
		res := replay(t, options(t, policy, sim.ProfileChunked, 4), reqs)
		home := map[int]int{}
		for i, r := range res {
			if h, ok := home[i%convs]; ok && h != r.Endpoint {
				t.Errorf("%s: request %d of conversation %d went to %d, its conversation's first to %d", policy, i, i%convs, r.Endpoint, h)
			}
			home[i%convs] = r.Endpoint
		}
		_, cached, _ := count(res)
		// Each conversation computes its system prompt once.
		if hit := float64(cached) / float64(prompt); hit < 0.9 || cached <= rrCached {
			t.Errorf("%s: prefix hit %.3f (%d cached tokens against round robin's %d), want at least 0.9 and more", policy, hit, cached, rrCached)
		}
	}
}

// TestRunCutsAtTheDrain checks that requests still running when the
// drain ends are cut, and those answered before are not.
func TestRunCutsAtTheDrain(t *testing.T) {
	reqs := conversations(8, 8, 10)
	long := conversations(1, 1, 1000)[0]
	long.At = reqs[len(reqs)-1].At
	reqs = append(reqs, long) // 1000 tokens of 10 ms and more: 10 s
	o := options(t, catalog.PolicyRoundRobin, sim.ProfileSlots, 4)
	o.Drain = 2 * time.Second
	res := replay(t, o, reqs)
	for i, r := range res[:8] {
		if !r.Answered {
			t.Errorf("request %d: not answered (%q)", i, r.Err)
		}
	}
	if r := res[8]; r.Answered || r.Err == "" || r.Tokens == 0 || r.Tokens >= 1000 {
		t.Errorf("the long request: answered %v, error %q, %d tokens; want it cut part way", r.Answered, r.Err, r.Tokens)
	}
}

// TestRunRefusesWhatTheReplicaRefuses checks that a body the replica
// refuses is a result with its error, and the run goes on.
func TestRunRefusesWhatTheReplicaRefuses(t *testing.T) {
	reqs := conversations(3, 1, 10)
	reqs[1].Body = []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"n":3}`)
	res := replay(t, options(t, catalog.PolicyAuto, sim.ProfileChunked, 2), reqs)
	if res[1].Answered || !strings.Contains(res[1].Err, "n=1") {
		t.Errorf("the refused request: answered %v, error %q", res[1].Answered, res[1].Err)
	}
	if !res[0].Answered || !res[2].Answered {
		t.Error("the requests around it were not answered")
	}
}

func TestRunChecksItsPool(t *testing.T) {
	o := options(t, catalog.PolicyAuto, sim.ProfileChunked, 2)
	o.Replicas = o.Replicas[:1]
	if _, err := Run(o, nil); err == nil {
		t.Error("a run with fewer replicas than endpoints did not fail")
	}
}
