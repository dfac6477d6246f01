package router

// Pools of kind llamacpp and ollama end to end, over servers playing
// llama.cpp's llama-server and Ollama: what the gateway scrapes of each
// reaches routing and the status, and llama.cpp's timings.cache_n reaches
// the prefix confirmation.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

// llamaServer plays llama-server: /metrics as it writes it with
// --metrics (or 501 without), /slots, /health, and chat answers with
// llama.cpp's usage, which has no prompt_tokens_details, and its timings,
// whose cache_n is cached(n) on its n-th answer.
type llamaServer struct {
	deferred, processing atomic.Int64
	noMetrics            bool
	promptTokens         int64
	cached               func(n int64) int64
	hits                 atomic.Int64
}

func (s *llamaServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/health":
		io.WriteString(w, `{"status":"ok"}`)
		return
	case "/metrics":
		if s.noMetrics {
			w.WriteHeader(http.StatusNotImplemented)
			io.WriteString(w, `{"error":{"code":501,"message":"This server does not support metrics endpoint. Start it with `+"`--metrics`"+`","type":"not_supported_error"}}`)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		for _, m := range []struct {
			name, typ, help string
			v               int64
		}{
			{"prompt_tokens_total", "counter", "Number of prompt tokens processed.", 1000},
			{"requests_processing", "gauge", "Number of requests processing.", s.processing.Load()},
			{"requests_deferred", "gauge", "Number of requests deferred.", s.deferred.Load()},
		} {
			fmt.Fprintf(w, "# HELP llamacpp:%s %s\n# TYPE llamacpp:%s %s\nllamacpp:%s %d\n", m.name, m.help, m.name, m.typ, m.name, m.v)
		}
		return
	case "/slots":
		io.WriteString(w, `[{"id":0,"n_ctx":4096,"speculative":false,"is_processing":true},{"id":1,"n_ctx":4096,"speculative":false,"is_processing":true},{"id":2,"n_ctx":4096,"speculative":false,"is_processing":false}]`)
		return
	}
	n := s.hits.Add(1)
	io.Copy(io.Discard, r.Body)
	cacheN := int64(0)
	if s.cached != nil {
		cacheN = s.cached(n)
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"choices":[{"finish_reason":"stop","index":0,"message":{"role":"assistant","content":"a b c"}}],"created":1765130000,"model":%q,"system_fingerprint":"b7000-fb40266","object":"chat.completion","usage":{"completion_tokens":3,"prompt_tokens":%d,"total_tokens":%d},"id":"chatcmpl-1","timings":{"cache_n":%d,"prompt_n":%d,"prompt_ms":20.5,"prompt_per_token_ms":0.1,"prompt_per_second":1000,"predicted_n":3,"predicted_ms":30,"predicted_per_token_ms":10,"predicted_per_second":100}}`,
		backendModel, s.promptTokens, s.promptTokens+3, cacheN, s.promptTokens-cacheN)
}

// scraped makes pool main of kind scrape its endpoints every 10 ms, and
// believe a scrape for a minute: long past any test's wait.
func scraped(kind, path string) func(*config.Config) {
	return func(c *config.Config) {
		c.Pools[0].Kind = kind
		c.Pools[0].Metrics = catalog.Scrape{Path: path, Interval: 10 * time.Millisecond, MaxAge: time.Minute}
	}
}

// TestLlamaCppDeferredRequestsAvoided: the llama.cpp endpoint whose
// server defers requests, waiting for a slot, is avoided; the status
// shows its queue as read, and the KV cache, which llama.cpp does not
// export, as unknown rather than empty.
func TestLlamaCppDeferredRequestsAvoided(t *testing.T) {
	busy, idle := &llamaServer{promptTokens: 9}, &llamaServer{promptTokens: 9}
	busy.deferred.Store(8)
	busy.processing.Store(4)
	g := newTestGateway(t, scraped(catalog.KindLlamaCpp, "/metrics"), busy, idle)
	waitFor(t, "both endpoints scraped", func() bool {
		eps := g.r.Status(time.Now()).Pools[0].Endpoints
		return eps[0].Waiting == 8 && eps[1].Waiting == 0
	})
	for _, e := range g.r.Status(time.Now()).Pools[0].Endpoints {
		if e.KVUsage != -1 {
			t.Errorf("endpoint %s: KV usage %v, want -1: unknown", e.Name, e.KVUsage)
		}
	}
	if got := g.sample(t, "llmgw_endpoint_requests_running", "pool", "main", "endpoint", g.endpointName("main", 0)); got != 4 {
		t.Errorf("llmgw_endpoint_requests_running of the busy endpoint = %v, want 4", got)
	}
	for range 10 {
		if resp, body := g.post(t, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`); resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
	}
	if busy.hits.Load() != 0 || idle.hits.Load() != 10 {
		t.Errorf("the endpoint deferring 8 requests got %d requests, the idle one %d; want 0 and 10", busy.hits.Load(), idle.hits.Load())
	}
	// Once it defers none, it is taken again.
	busy.deferred.Store(0)
	busy.processing.Store(0)
	idle.deferred.Store(8)
	waitFor(t, "the queues scraped again", func() bool {
		eps := g.r.Status(time.Now()).Pools[0].Endpoints
		return eps[0].Waiting == 0 && eps[1].Waiting == 8
	})
	for range 10 {
		g.post(t, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	}
	if busy.hits.Load() != 10 {
		t.Errorf("with the queues turned round, the first endpoint got %d of 10 requests", busy.hits.Load())
	}
}

// TestLlamaCppSlotsWithoutMetrics: a llama.cpp server started without
// --metrics answers /metrics with 501; its busy slots are read from
// /slots, and no scrape counts as failed.
func TestLlamaCppSlotsWithoutMetrics(t *testing.T) {
	up := &llamaServer{noMetrics: true}
	g := newTestGateway(t, scraped(catalog.KindLlamaCpp, "/metrics"), up)
	name := g.endpointName("main", 0)
	waitFor(t, "the slots read", func() bool {
		return g.sample(t, "llmgw_endpoint_requests_running", "pool", "main", "endpoint", name) == 2
	})
	for _, reason := range []string{"connect", "timeout", "status", "parse"} {
		if got := g.sample(t, "llmgw_endpoint_scrape_failures_total", "pool", "main", "endpoint", name, "reason", reason); got != 0 {
			t.Errorf("llmgw_endpoint_scrape_failures_total{reason=%q} = %v, want 0", reason, got)
		}
	}
	if w := g.r.Status(time.Now()).Pools[0].Endpoints[0].Waiting; w != -1 {
		t.Errorf("waiting read from /slots = %v, want -1: /slots does not show it", w)
	}
	if n := g.r.Status(time.Now()).Pools[0].Endpoints[0].Slots; n != 3 {
		t.Errorf("routing models %d slots, want the 3 /slots lists", n)
	}
}

// TestLlamaCppCacheNConfirmsPrefix is TestPrefixHitsAreChecked's warm
// case on llama.cpp: its answers report the cached prompt only as
// timings.cache_n, and that confirms the hits the index predicted.
func TestLlamaCppCacheNConfirmsPrefix(t *testing.T) {
	up := &llamaServer{promptTokens: 1000, cached: func(n int64) int64 {
		if n == 1 {
			return 0
		}
		return 1000
	}}
	g := newTestGateway(t, func(c *config.Config) {
		withBigBodies(c)
		c.Pools[0].Kind = catalog.KindLlamaCpp
	}, up)
	for range 3 {
		if resp, body := g.post(t, "/v1/chat/completions", prefixRequest); resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
	}
	predicted := g.sample(t, "llmgw_prefix_predicted_hits_total", "pool", "main")
	confirmed := g.sample(t, "llmgw_prefix_confirmed_hits_total", "pool", "main")
	if predicted < 2*900 || predicted > 2*1000 {
		t.Errorf("llmgw_prefix_predicted_hits_total = %v, want nearly 2000", predicted)
	}
	if confirmed != predicted {
		t.Errorf("llmgw_prefix_confirmed_hits_total = %v, want %v: every hit predicted confirmed by cache_n", confirmed, predicted)
	}
	if got := g.r.snap.Load().pools["main"].Endpoints()[0].Precision(); got != 1 {
		t.Errorf("precision %v, want 1", got)
	}
}

// ollamaServer plays Ollama: /api/ps lists the models loaded (or, when
// ps is set, answers that), /api/version answers, and its OpenAI API at
// /v1 answers chat.
type ollamaServer struct {
	loaded atomic.Pointer[[]string]
	ps     atomic.Pointer[string] // an answer to /api/ps in place of the list
	hits   atomic.Int64
	models chan string // the model each chat request named
}

func newOllama(loaded ...string) *ollamaServer {
	s := &ollamaServer{models: make(chan string, 100)}
	s.load(loaded...)
	return s
}

func (s *ollamaServer) load(names ...string) { s.loaded.Store(&names) }

func (s *ollamaServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/api/version":
		io.WriteString(w, `{"version":"0.13.0"}`)
		return
	case "/api/ps":
		if p := s.ps.Load(); p != nil {
			io.WriteString(w, *p)
			return
		}
		var items []string
		for _, n := range *s.loaded.Load() {
			items = append(items, fmt.Sprintf(`{"name":%q,"model":%q,"size":2384567296,"digest":"baf6a787fdff","details":{"parent_model":"","format":"gguf","family":"llama","families":["llama"],"parameter_size":"1.2B","quantization_level":"Q8_0"},"expires_at":"2026-12-07T18:14:52Z","size_vram":2384567296,"context_length":4096}`, n, n))
		}
		fmt.Fprintf(w, `{"models":[%s]}`, strings.Join(items, ","))
		return
	case "/v1/chat/completions":
	default:
		http.NotFound(w, r)
		return
	}
	s.hits.Add(1)
	body, _ := io.ReadAll(r.Body)
	var req struct{ Model string }
	_ = json.Unmarshal(body, &req)
	s.models <- req.Model
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1765130000,"model":%q,"system_fingerprint":"fp_ollama","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10}}`, req.Model)
}

// TestOllamaPrefersTheEndpointWithTheModelLoaded: of two Ollama servers,
// the one whose /api/ps lists the request's model (llama3.2, which Ollama
// names llama3.2:latest) takes its requests; when the other loads it in
// its place, that one does. An /api/ps that cannot be read counts as a
// failed scrape and says nothing loaded. The status lists each
// endpoint's models, the endpoints the model is loaded on, and each
// endpoint's cold start, the prior until one is learned.
func TestOllamaPrefersTheEndpointWithTheModelLoaded(t *testing.T) {
	warm, cold := newOllama("llama3.2:latest", "qwen3:8b"), newOllama("qwen3:8b")
	garbled := `{"models":[{"name":"llama3.2:latest","model":NaN}]}`
	cold.ps.Store(&garbled)
	g := newTestGateway(t, func(c *config.Config) {
		scraped(catalog.KindOllama, "/api/ps")(c)
		c.Models[0].Upstream = "llama3.2"
	}, warm, cold)
	coldName := g.endpointName("main", 1)
	waitFor(t, "the warm endpoint's models read and the cold one's refused", func() bool {
		eps := g.r.Status(time.Now()).Pools[0].Endpoints
		return slices.Contains(eps[0].Models, "llama3.2:latest") &&
			g.sample(t, "llmgw_endpoint_scrape_failures_total", "pool", "main", "endpoint", coldName, "reason", "parse") > 0
	})
	send := func() {
		t.Helper()
		for range 10 {
			if resp, body := g.post(t, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`); resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
		}
	}
	if st := g.r.Status(time.Now()); !st.Models[0].ListsLoaded || !slices.Equal(st.Models[0].LoadedOn, []string{g.endpointName("main", 0)}) {
		t.Errorf("the model's status says it is loaded on %q (listed: %v), want the first endpoint", st.Models[0].LoadedOn, st.Models[0].ListsLoaded)
	}
	send()
	if warm.hits.Load() != 10 || cold.hits.Load() != 0 {
		t.Errorf("with the model loaded on the first endpoint, it got %d of 10 requests and the other %d", warm.hits.Load(), cold.hits.Load())
	}
	if m := <-warm.models; m != "llama3.2" {
		t.Errorf("the call named model %q, want the upstream name llama3.2", m)
	}
	// The model moves: unloaded from the first, loaded on the second.
	warm.load("qwen3:8b")
	cold.ps.Store(nil)
	cold.load("llama3.2:latest")
	waitFor(t, "the models scraped again", func() bool {
		eps := g.r.Status(time.Now()).Pools[0].Endpoints
		return !slices.Contains(eps[0].Models, "llama3.2:latest") && slices.Contains(eps[1].Models, "llama3.2:latest")
	})
	st := g.r.Status(time.Now())
	if !slices.Equal(st.Models[0].LoadedOn, []string{coldName}) {
		t.Errorf("moved: the model's status says it is loaded on %q, want [%s]", st.Models[0].LoadedOn, coldName)
	}
	for i, e := range st.Pools[0].Endpoints {
		if e.ColdStart != 5*time.Second || e.ColdStartLearned {
			t.Errorf("endpoint %d's cold start %v (learned %v), want the prior 5s before a cold call", i, e.ColdStart, e.ColdStartLearned)
		}
	}
	send()
	if cold.hits.Load() != 10 {
		t.Errorf("with the model loaded on the second endpoint only, it got %d of 10 requests", cold.hits.Load())
	}
}
