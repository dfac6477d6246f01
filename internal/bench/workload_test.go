package bench

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"gitea.mynodes.xyz/ilker/llmgw/internal/tokenize"
)

func generate(t *testing.T, s Spec) []Request {
	t.Helper()
	reqs, err := Generate(s, NewTexts(tokenize.Count))
	if err != nil {
		t.Fatal(err)
	}
	return reqs
}

func TestGenerateIsDeterministic(t *testing.T) {
	for _, w := range []string{WorkloadChat, WorkloadBurst, WorkloadMixed, WorkloadNoisy, WorkloadFlat} {
		t.Run(w, func(t *testing.T) {
			s := Spec{Workload: w, Rate: 8, Duration: 6 * time.Second, Seed: 42, Quick: true}
			a, b := generate(t, s), generate(t, s)
			if len(a) == 0 {
				t.Fatal("no requests")
			}
			if diff := cmp.Diff(a, b); diff != "" {
				t.Fatalf("same seed, different requests (-first +second):\n%s", diff)
			}
			if w == WorkloadFlat {
				return // flat has no randomness to vary
			}
			s.Seed = 43
			if cmp.Equal(a, generate(t, s)) {
				t.Error("seeds 42 and 43 gave the same requests")
			}
		})
	}
}

func TestWorkloadShape(t *testing.T) {
	const rate, dur = 20.0, 30 * time.Second
	for _, w := range []string{WorkloadChat, WorkloadBurst, WorkloadMixed, WorkloadNoisy, WorkloadFlat} {
		t.Run(w, func(t *testing.T) {
			reqs := generate(t, Spec{Workload: w, Rate: rate, Duration: dur, Seed: 7, Quick: true, SLO: SLO{TTFT: time.Second}})
			// The offered rate is the asked one: within 20% over 600
			// expected arrivals (Poisson noise is ~4%; chat sessions add
			// correlation).
			want := rate * dur.Seconds()
			if n := float64(len(reqs)); math.Abs(n-want) > 0.2*want {
				t.Errorf("%v requests over %v at %v/s, want about %v", n, dur, rate, want)
			}
			texts := NewTexts(tokenize.Count)
			for i, r := range reqs {
				if r.At < 0 || r.At >= dur {
					t.Fatalf("request %d at %v, outside [0, %v)", i, r.At, dur)
				}
				if i > 0 && r.At < reqs[i-1].At {
					t.Fatalf("request %d at %v before request %d at %v", i, r.At, i-1, reqs[i-1].At)
				}
				if r.MaxTokens <= 0 || !r.IgnoreEOS {
					t.Fatalf("request %d: max_tokens %d, ignore_eos %v", i, r.MaxTokens, r.IgnoreEOS)
				}
				got := 0
				for _, m := range r.Prompt {
					got += texts.Count(m.Text())
				}
				if got != r.PromptTokens {
					t.Fatalf("request %d: prompt counts %d tokens, generated as %d", i, got, r.PromptTokens)
				}
			}
		})
	}
}

func TestFlatIsEvenlySpaced(t *testing.T) {
	reqs := generate(t, Spec{Workload: WorkloadFlat, Rate: 50, Duration: time.Second})
	if len(reqs) != 50 {
		t.Fatalf("%d requests, want 50", len(reqs))
	}
	for i, r := range reqs {
		if want := time.Duration(i) * 20 * time.Millisecond; r.At != want {
			t.Errorf("request %d at %v, want %v", i, r.At, want)
		}
		if r.Prompt[0].Text() != reqs[0].Prompt[0].Text() || r.PromptTokens != flatPromptTokens {
			t.Errorf("request %d: prompt differs or is %d tokens", i, r.PromptTokens)
		}
	}
}

func TestChatSessionsGrow(t *testing.T) {
	reqs := generate(t, Spec{Workload: WorkloadChat, Rate: 10, Duration: 20 * time.Second, Seed: 1, Quick: true})
	systems := map[string]int{}
	grown := 0
	for _, r := range reqs {
		if r.Prompt[0].Role != "system" {
			t.Fatalf("chat request starts with %q, want the system prompt", r.Prompt[0].Role)
		}
		systems[r.Prompt[0].Text()]++
		if len(r.Prompt) >= 4 { // system, user, assistant, user: a later turn
			grown++
			last := r.Prompt[len(r.Prompt)-1]
			if last.Role != "user" || r.Prompt[len(r.Prompt)-2].Role != "assistant" {
				t.Fatalf("a later turn must end with the answer and a new question, got roles %v", roles(r.Prompt))
			}
		}
	}
	if shape := chatShapeFor(true); len(systems) != shape.prompts {
		t.Errorf("%d distinct system prompts, want %d", len(systems), shape.prompts)
	}
	if grown < len(reqs)/2 {
		t.Errorf("only %d of %d requests are later turns", grown, len(reqs))
	}
}

func roles(ms []Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Role)
	}
	return out
}

func TestBurstHasBursts(t *testing.T) {
	const rate = 20.0
	reqs := generate(t, Spec{Workload: WorkloadBurst, Rate: rate, Duration: 40 * time.Second, Seed: 3, Quick: true})
	// Count arrivals per 0.8s window: the first fifth of each 4s period
	// bursts at 3-5x the base, the rest runs at the base.
	var inBurst, outBurst float64
	for _, r := range reqs {
		if r.At%(4*time.Second) < 800*time.Millisecond {
			inBurst++
		} else {
			outBurst++
		}
	}
	ratio := (inBurst / 0.2) / (outBurst / 0.8)
	if ratio < 2.5 || ratio > 5.5 {
		t.Errorf("burst rate / base rate = %.2f, want 3-5", ratio)
	}
}

func TestMixedTenantsAndClasses(t *testing.T) {
	reqs := generate(t, Spec{Workload: WorkloadMixed, Rate: 50, Duration: 20 * time.Second, Seed: 5, Quick: true})
	got := map[string]string{}
	slos := map[string]SLO{}
	for _, r := range reqs {
		got[r.Tenant] = r.Class
		slos[r.Class] = r.SLO
	}
	want := map[string]string{"acme/search": "critical", "acme/chat": "standard", "beta/batch": "sheddable"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tenant → class (-want +got):\n%s", diff)
	}
	if !(slos["critical"].TTFT < slos["standard"].TTFT && slos["standard"].TTFT < slos["sheddable"].TTFT) {
		t.Errorf("class SLOs not ordered tight to loose: %v", slos)
	}
}

func TestTextsLengthAndSharing(t *testing.T) {
	texts := NewTexts(tokenize.Count)
	for _, n := range []int{1, 2, 7, 32, 511, 512, 2000} {
		if got := tokenize.Count(texts.Block(9, n)); got != n {
			t.Errorf("Block(9, %d) counts %d tokens", n, got)
		}
		if got := tokenize.Count(texts.Random(rand.New(rand.NewPCG(1, 2)), n)); got != n {
			t.Errorf("Random(%d) counts %d tokens", n, got)
		}
	}
	full := texts.Block(9, 512)
	if half := texts.Block(9, 256); !strings.HasPrefix(full, half) {
		t.Error("a shorter block of the same id is not a prefix of the full one")
	}
	if NewTexts(tokenize.Count).Block(9, 512) != full {
		t.Error("the same block id gave different text in another Texts")
	}
	if texts.Block(10, 512) == full {
		t.Error("different block ids gave the same text")
	}
	// Blocks join without changing their counts.
	if got := tokenize.Count(full + texts.Block(10, 100) + texts.Block(11, 3)); got != 615 {
		t.Errorf("joined blocks count %d, want 615", got)
	}
}

func TestGenerateRejects(t *testing.T) {
	texts := NewTexts(tokenize.Count)
	for _, s := range []Spec{
		{Workload: "nope", Rate: 1, Duration: time.Second},
		{Workload: WorkloadChat, Rate: 0, Duration: time.Second},
		{Workload: WorkloadChat, Rate: math.Inf(1), Duration: time.Second},
		{Workload: WorkloadFlat, Rate: 1, Duration: 0},
		{Workload: WorkloadTrace, TracePath: "testdata/missing.jsonl"},
		{Workload: WorkloadTrace, TracePath: "testdata/mooncake-tiny.jsonl", LengthScale: -1},
	} {
		if _, err := Generate(s, texts); err == nil {
			t.Errorf("Generate(%+v) succeeded, want an error", s)
		}
	}
}

func TestNoisyTenants(t *testing.T) {
	reqs := generate(t, Spec{Workload: WorkloadNoisy, Rate: 70, Duration: 20 * time.Second, Seed: 5, Quick: true, SLO: SLO{TTFT: time.Second}})
	n := map[string]float64{}
	for _, r := range reqs {
		if r.Class != "standard" || r.SLO.TTFT != time.Second {
			t.Fatalf("request of %s is %s with SLO %v; want standard with the spec's SLO", r.Tenant, r.Class, r.SLO)
		}
		n[r.Tenant]++
	}
	if len(n) != 3 {
		t.Fatalf("tenants %v, want three", n)
	}
	// About 1,000 loud and 200 of each quiet one: the ratio is 5 within
	// Poisson noise (~8% on 200).
	for _, q := range []string{"noisy/quiet-a", "noisy/quiet-b"} {
		if ratio := n["noisy/loud"] / n[q]; ratio < 4 || ratio > 6 {
			t.Errorf("loud / %s = %.2f, want about 5", q, ratio)
		}
	}
}
