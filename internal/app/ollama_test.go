package app

// A real engine behind llmgw: two Ollama servers (llama.cpp inside), built
// from the Go module proxy by scripts/ollama.sh, serving the tiny random
// model testdata/ollama/gguf writes, on loopback ports, with four slots
// each. Through an ollama pool every API llmgw serves reaches them, the
// pool reads which models each has loaded, and a conversation's turns stay
// with the replica whose slots hold its prefix, as the engine's own count
// of the prompt tokens it evaluated shows. LLMGW_TEST_OLLAMA names the
// directory scripts/ollama.sh printed; without it the test skips, and with
// it set (as .ci/run sets it) a missing binary or model fails it.

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/router/pool"
	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// ollamaModel is the model as `ollama create` names it, and as /api/ps
// lists it once loaded.
const (
	ollamaModel  = "llmgw-tiny"
	ollamaLoaded = "llmgw-tiny:latest"
	// ollamaSlots is each replica's parallel sequences, each a slot whose
	// KV cache holds its last prompt (OLLAMA_NUM_PARALLEL).
	ollamaSlots = 4
)

// ollamaFixture is the directory scripts/ollama.sh made: bin/ollama and
// model/ (model.gguf and its Modelfile).
func ollamaFixture(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("LLMGW_TEST_OLLAMA")
	if dir == "" {
		t.Skip("LLMGW_TEST_OLLAMA is not set: scripts/ollama.sh builds Ollama and the model and prints the directory to set it to")
	}
	for _, f := range []string{"bin/ollama", "model/model.gguf", "model/Modelfile"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("LLMGW_TEST_OLLAMA=%s: %v (scripts/ollama.sh makes it)", dir, err)
		}
	}
	return dir
}

// ollamaReplica is one running `ollama serve`.
type ollamaReplica struct {
	url string // its host's base, without /v1
	log *syncBuffer
}

// syncBuffer is a buffer written by a process's output and read by the
// test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer // protected by mu
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// freePort is a loopback port nothing listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startOllama runs `ollama serve` on a loopback port with its models in
// models, and waits until it answers. Its log is at debug level, where its
// runner writes what each request found in its slots' caches. Its slots
// are kept as Ollama keeps them by default: a prompt takes the free slot
// whose prompt shares the most with it, whatever that slot held.
// (OLLAMA_MULTIUSER_CACHE, which would take the least recently used slot
// instead, aborts v0.17.4's llama.cpp runner at its first fork of a slot.) The server
// and the runners it starts, in one process group, end with the test.
func startOllama(t *testing.T, fixture, models string) *ollamaReplica {
	t.Helper()
	host := freePort(t)
	r := &ollamaReplica{url: "http://" + host, log: &syncBuffer{}}
	cmd := exec.Command(filepath.Join(fixture, "bin", "ollama"), "serve")
	cmd.Env = append(os.Environ(),
		"HOME="+t.TempDir(), "OLLAMA_HOST="+host, "OLLAMA_MODELS="+models,
		"OLLAMA_NUM_PARALLEL="+strconv.Itoa(ollamaSlots), "OLLAMA_DEBUG=1",
		"OLLAMA_KEEP_ALIVE=-1", "OLLAMA_NOPRUNE=1")
	cmd.Stdout, cmd.Stderr = r.log, r.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		if t.Failed() {
			t.Logf("ollama at %s logged:\n%s", host, tail(r.log.String(), 4000))
		}
	})
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(r.url + "/api/version")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return r
			}
		}
		select {
		case <-done:
			t.Fatalf("ollama serve exited:\n%s", tail(r.log.String(), 4000))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("ollama serve did not answer within a minute:\n%s", tail(r.log.String(), 4000))
		}
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// createModel makes the fixture's model known to the servers sharing
// models, through r.
func createModel(t *testing.T, fixture string, r *ollamaReplica) {
	t.Helper()
	dir := filepath.Join(fixture, "model")
	cmd := exec.Command(filepath.Join(fixture, "bin", "ollama"), "create", ollamaModel, "-f", filepath.Join(dir, "Modelfile"))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "OLLAMA_HOST="+strings.TrimPrefix(r.url, "http://"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ollama create: %v\n%s", err, out)
	}
}

// slotLoad is one request's prompt as the engine's runner took it into a
// slot: its tokens, those found in the slot's cache, and those it
// evaluated.
type slotLoad struct {
	Prompt, Used, Remaining int
}

var slotLine = regexp.MustCompile(`msg="loading cache slot" id=\d+ cache=\d+ prompt=(\d+) used=(\d+) remaining=(\d+)`)

// slotLoads is every prompt r's runner has taken into a slot, in order.
func (r *ollamaReplica) slotLoads() []slotLoad {
	var out []slotLoad
	for _, m := range slotLine.FindAllStringSubmatch(r.log.String(), -1) {
		p, _ := strconv.Atoi(m[1])
		u, _ := strconv.Atoi(m[2])
		rem, _ := strconv.Atoi(m[3])
		out = append(out, slotLoad{p, u, rem})
	}
	return out
}

// ollamaGateway is llmgw in front of the replicas: model tiny on an
// ollama pool routed by auto, and tiny-rr on one routed round robin, both
// Ollama's llmgw-tiny, named without its tag.
func ollamaGateway(t *testing.T, replicas []*ollamaReplica) *Gateway {
	t.Helper()
	var eps []string
	for i, r := range replicas {
		eps = append(eps, fmt.Sprintf("{name: r%d, url: %q}", i, r.url+"/v1"))
	}
	list := strings.Join(eps, ", ")
	return startYAML(t, fmt.Sprintf(`
router: {auth: none}
store: {url: "memory:"}
pools:
  - {name: ollama, kind: ollama, policy: auto, endpoints: [%s]}
  - {name: ollama-rr, kind: ollama, policy: round_robin, endpoints: [%s]}
models:
  - {name: tiny, pool: ollama, upstream_model: %s}
  - {name: tiny-rr, pool: ollama-rr, upstream_model: %s}
`, list, list, ollamaModel, ollamaModel))
}

// endpoints is the named pool's endpoints as the router's status has them.
func endpointsOf(g *Gateway, pool string) []poolEndpoint {
	var out []poolEndpoint
	for _, p := range g.router.Status(time.Now()).Pools {
		if p.Name != pool {
			continue
		}
		for _, e := range p.Endpoints {
			out = append(out, poolEndpoint{Name: e.Name, Models: e.Models, ColdStart: e.ColdStart, Cost: e.Cost})
		}
	}
	return out
}

type poolEndpoint struct {
	Name      string
	Models    []string
	ColdStart time.Duration
	Cost      pool.Cost
}

// waitFor polls cond until it holds, for up to 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 30s for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// served is which replica took a prompt into a slot since before, a
// count of each one's slot loads, and that load; it fails unless exactly
// one did.
func served(t *testing.T, replicas []*ollamaReplica, before []int) (int, slotLoad) {
	t.Helper()
	who, load := -1, slotLoad{}
	for i, r := range replicas {
		loads := r.slotLoads()
		switch n := len(loads) - before[i]; {
		case n == 0:
		case n == 1 && who < 0:
			who, load = i, loads[len(loads)-1]
		default:
			t.Fatalf("replica %d took %d prompts, and %d before it; want one request on one replica", i, n, who)
		}
	}
	if who < 0 {
		t.Fatal("no replica took the prompt into a slot")
	}
	return who, load
}

func slotCounts(replicas []*ollamaReplica) []int {
	out := make([]int, len(replicas))
	for i, r := range replicas {
		out[i] = len(r.slotLoads())
	}
	return out
}

func TestOllama(t *testing.T) {
	fixture := ollamaFixture(t)
	models := t.TempDir()
	a := startOllama(t, fixture, models)
	createModel(t, fixture, a)
	replicas := []*ollamaReplica{a, startOllama(t, fixture, models)}
	g := ollamaGateway(t, replicas)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	client := openai.NewClient(option.WithBaseURL(g.URL()), option.WithAPIKey("unused"), option.WithMaxRetries(0))

	t.Run("signals", func(t *testing.T) { testOllamaSignals(t, ctx, g, client, replicas) })
	if t.Failed() {
		return
	}
	// Both replicas warm, so that routing is by their slots alone.
	for _, r := range replicas {
		resp, err := http.Post(r.url+"/api/generate", "application/json", strings.NewReader(`{"model":"`+ollamaModel+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	waitFor(t, "both replicas to list the model loaded", func() bool {
		for _, e := range endpointsOf(g, "ollama") {
			if !slices.Contains(e.Models, ollamaLoaded) {
				return false
			}
		}
		return true
	})
	t.Run("apis", func(t *testing.T) { testOllamaAPIs(t, ctx, g, client) })
	t.Run("conversations", func(t *testing.T) { testOllamaConversations(t, ctx, g, client, replicas) })
}

// testOllamaSignals: before any request each replica lists no model loaded
// and auto charges each the prior cold start; the first request loads the
// model on the replica it went to, which then lists it, and whose cold
// start is learned from that request's first token.
func testOllamaSignals(t *testing.T, ctx context.Context, g *Gateway, client openai.Client, replicas []*ollamaReplica) {
	waitFor(t, "both replicas' /api/ps to be read", func() bool {
		eps := endpointsOf(g, "ollama")
		return len(eps) == 2 && eps[0].Models != nil && eps[1].Models != nil
	})
	for _, e := range endpointsOf(g, "ollama") {
		if len(e.Models) != 0 || e.ColdStart != 5*time.Second {
			t.Errorf("%s before any request: models %q, cold start %v; want none loaded and the prior 5s", e.Name, e.Models, e.ColdStart)
		}
	}
	before := slotCounts(replicas)
	s := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:         "tiny",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("the first request loads the model")},
		MaxTokens:     openai.Int(4),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	for s.Next() {
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	who, _ := served(t, replicas, before)
	name := fmt.Sprintf("r%d", who)
	waitFor(t, name+" to list the model loaded", func() bool {
		for _, e := range endpointsOf(g, "ollama") {
			if e.Name == name {
				return slices.Contains(e.Models, ollamaLoaded)
			}
		}
		return false
	})
	for _, e := range endpointsOf(g, "ollama") {
		learned := e.ColdStart != 5*time.Second
		if learned != (e.Name == name) {
			t.Errorf("%s: cold start %v after the first request went to %s", e.Name, e.ColdStart, name)
		}
	}
}

// testOllamaAPIs sends each API llmgw serves through the ollama pool, each
// answered by the engine with its usage.
func testOllamaAPIs(t *testing.T, ctx context.Context, g *Gateway, client openai.Client) {
	ask := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("Say hello in five words.")}
	t.Run("chat", func(t *testing.T) {
		c, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "tiny", Messages: ask, MaxTokens: openai.Int(6)})
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Choices) != 1 || c.Choices[0].FinishReason == "" || c.Usage.PromptTokens == 0 || c.Usage.CompletionTokens == 0 || c.Model != "tiny" {
			t.Errorf("%s", c.RawJSON())
		}
	})
	t.Run("chat streamed", func(t *testing.T) {
		s := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
			Model: "tiny", Messages: ask, MaxTokens: openai.Int(6),
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		})
		var acc openai.ChatCompletionAccumulator
		chunks := 0
		for s.Next() {
			acc.AddChunk(s.Current())
			chunks++
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		if chunks < 2 || len(acc.Choices) != 1 || acc.Choices[0].FinishReason == "" || acc.Usage.PromptTokens == 0 || acc.Usage.CompletionTokens == 0 {
			t.Errorf("%d chunks, accumulated %+v", chunks, acc.ChatCompletion)
		}
	})
	t.Run("completions", func(t *testing.T) {
		c, err := client.Completions.New(ctx, openai.CompletionNewParams{
			Model: "tiny", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("the first of the")}, MaxTokens: openai.Int(6),
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Choices) != 1 || c.Usage.PromptTokens == 0 || c.Usage.CompletionTokens == 0 {
			t.Errorf("%s", c.RawJSON())
		}
	})
	t.Run("responses", func(t *testing.T) {
		r, err := client.Responses.New(ctx, responses.ResponseNewParams{
			Model: "tiny", Instructions: openai.String("Be brief."), MaxOutputTokens: openai.Int(6),
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hello in five words.")},
		})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status == "" || r.Usage.InputTokens == 0 || r.Usage.OutputTokens == 0 || !strings.HasPrefix(r.ID, "resp_") {
			t.Errorf("%s", r.RawJSON())
		}
	})
	t.Run("messages", func(t *testing.T) {
		ac := anthropicClient(g.URL())
		params := anthropic.MessageNewParams{
			Model: "tiny", MaxTokens: 6, System: []anthropic.TextBlockParam{{Text: "Be brief."}},
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello in five words."))},
		}
		m, err := ac.Messages.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		if m.Type != "message" || m.StopReason == "" || m.Usage.InputTokens == 0 || m.Usage.OutputTokens == 0 {
			t.Errorf("%s", m.RawJSON())
		}
		s := ac.Messages.NewStreaming(ctx, params)
		var streamed anthropic.Message
		for s.Next() {
			if err := streamed.Accumulate(s.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		if streamed.StopReason == "" || streamed.Usage.OutputTokens == 0 {
			t.Errorf("streamed: %+v", streamed)
		}
	})
	t.Run("embeddings", func(t *testing.T) {
		e, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{
			Model: "tiny", Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"the first", "of the"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(e.Data) != 2 || len(e.Data[0].Embedding) != 64 || e.Usage.PromptTokens == 0 {
			t.Errorf("%d embeddings of %d, usage %+v", len(e.Data), len(e.Data[0].Embedding), e.Usage)
		}
	})
}

// testOllamaConversations holds four conversations of four turns each, one
// after another, through auto: every turn of a conversation goes to the
// replica that served its first, and there the engine finds the
// conversation so far in a slot and evaluates only what is new. (One
// after another, as Ollama's slots are kept: a new conversation on a
// replica takes the slot of the one before it there, as every prompt
// shares the template's first tokens.) One conversation through round
// robin goes to the other replica on its second turn, which evaluates its
// whole prompt.
func testOllamaConversations(t *testing.T, ctx context.Context, g *Gateway, client openai.Client, replicas []*ollamaReplica) {
	const turns = 4
	convs := make([][]openai.ChatCompletionMessageParamUnion, ollamaSlots)
	home := make([]int, len(convs))
	// turn sends conversation c's next turn as model, and is the replica
	// that took it and the engine's count of its prompt.
	turn := func(model string, c, k int) (int, slotLoad) {
		convs[c] = append(convs[c], openai.UserMessage(conversationText(c, k)))
		before := slotCounts(replicas)
		r, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: model, Messages: convs[c], MaxTokens: openai.Int(4)})
		if err != nil {
			t.Fatal(err)
		}
		convs[c] = append(convs[c], openai.AssistantMessage(r.Choices[0].Message.Content))
		return served(t, replicas, before)
	}
	for c := range convs {
		for k := range turns {
			costs := endpointsOf(g, "ollama")
			who, load := turn("tiny", c, k)
			t.Logf("conversation %d, turn %d: replica %d, %d prompt tokens, %d from its slot, %d evaluated", c, k, who, load.Prompt, load.Used, load.Remaining)
			if k == 0 {
				home[c] = who
				continue
			}
			if who != home[c] {
				t.Errorf("conversation %d, turn %d went to replica %d, its earlier turns to %d; the endpoints were %+v", c, k, who, home[c], costs)
			}
			// The turn's new text, a few dozen tokens, and the last
			// answer, which the engine may split differently from how it
			// wrote it, are all it should evaluate.
			if load.Remaining*4 > load.Prompt {
				t.Errorf("conversation %d, turn %d: the engine evaluated %d of %d prompt tokens; want under a quarter", c, k, load.Remaining, load.Prompt)
			}
		}
	}
	// Round robin: the conversation's two turns go to the two replicas
	// in turn, and the second finds none of the first in its slots.
	c := len(convs)
	convs = append(convs, nil)
	first, _ := turn("tiny-rr", c, 0)
	second, load := turn("tiny-rr", c, 1)
	t.Logf("round robin: replica %d then %d, %d prompt tokens, %d evaluated", first, second, load.Prompt, load.Remaining)
	if second == first || load.Remaining*10 < load.Prompt*9 {
		t.Errorf("round robin: turns on replicas %d and %d, the second evaluating %d of %d prompt tokens; want the other replica and nearly all", first, second, load.Remaining, load.Prompt)
	}
}

// conversationText is turn k of conversation c: a long first message that
// no other conversation shares, then short ones.
func conversationText(c, k int) string {
	n := 40
	if k == 0 {
		n = 600
	}
	var b strings.Builder
	fmt.Fprintf(&b, "conversation %d turn %d:", c, k)
	words := strings.Fields("the of and to in is that for it as was with be by on not he this are or his from at which but have")
	for i := range n {
		b.WriteString(" ")
		b.WriteString(words[(i*(c+3)+k*7+i/len(words))%len(words)])
	}
	return b.String()
}
