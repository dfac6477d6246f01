package app

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/keys"
	"gitea.mynodes.xyz/ilker/llmgw/internal/sim"
)

// A key's model globs decide what it sees and may use the same way on
// every API: '*' runs past '/', so a glob reaches the slash-named models
// most servers serve, and a model outside them answers as one that does
// not exist.
func TestModelGlobsOnEveryAPI(t *testing.T) {
	ctx := t.Context()
	rep, err := sim.Start(ctx, sim.Config{Model: "chat", FixedTiming: true}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rep.Close)
	g := startYAML(t, fmt.Sprintf(`
router: {auth: keys}
store: {url: %q}
pools:
  - name: sim
    endpoints: [{url: %q}]
models:
  - {name: meta-llama/Llama-3.1-8B, aliases: [llama-8b], pool: sim, upstream_model: chat}
  - {name: Qwen/Qwen3-32B, pool: sim, upstream_model: chat}
`, "sqlite:"+filepath.Join(t.TempDir(), "gw.db"), rep.URL()))
	kg := &keyedGateway{Gateway: g}

	const llama, qwen = "meta-llama/Llama-3.1-8B", "Qwen/Qwen3-32B"
	type api struct {
		name string
		// ask tells whether the key may use model: through the answer to
		// a request naming it, or the list the key is shown.
		ask func(t *testing.T, key, model string) bool
	}
	post := func(path, body string, anthropic bool, wantHidden string) func(t *testing.T, key, model string) bool {
		return func(t *testing.T, key, model string) bool {
			t.Helper()
			h := http.Header{"Authorization": {"Bearer " + key}, "Content-Type": {"application/json"}}
			if anthropic {
				h.Set("anthropic-version", "2023-06-01")
			}
			status, answer := send(t, http.MethodPost, g.URL()+path, h, fmt.Sprintf(body, model))
			switch {
			case status == http.StatusOK:
				return true
			case status == http.StatusNotFound && strings.Contains(answer, wantHidden):
				return false
			}
			t.Fatalf("%s for %s: %d %s", path, model, status, answer)
			return false
		}
	}
	list := func(anthropic bool) func(t *testing.T, key, model string) bool {
		return func(t *testing.T, key, model string) bool {
			t.Helper()
			h := http.Header{"Authorization": {"Bearer " + key}}
			if anthropic {
				h.Set("anthropic-version", "2023-06-01")
			}
			status, answer := send(t, http.MethodGet, g.URL()+"/models", h, "")
			if status != http.StatusOK {
				t.Fatalf("models: %d %s", status, answer)
			}
			return strings.Contains(answer, fmt.Sprintf(`"id":%q`, model))
		}
	}
	apis := []api{
		{"models", list(false)},
		{"anthropic models", list(true)},
		{"chat", post("/chat/completions", `{"model":%q,"max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`, false, "model_not_found")},
		{"completions", post("/completions", `{"model":%q,"max_tokens":2,"prompt":"hi"}`, false, "model_not_found")},
		{"embeddings", post("/embeddings", `{"model":%q,"input":"hi"}`, false, "model_not_found")},
		{"messages", post("/messages", `{"model":%q,"max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`, true, "not_found_error")},
		{"count_tokens", post("/messages/count_tokens", `{"model":%q,"messages":[{"role":"user","content":"hi"}]}`, true, "not_found_error")},
		{"responses", post("/responses", `{"model":%q,"max_output_tokens":2,"input":"hi"}`, false, "model_not_found")},
	}
	tests := []struct {
		globs      []string
		llama, qwn bool // whether the key may use each model
	}{
		{nil, true, true},
		{[]string{"*"}, true, true},
		{[]string{"meta-llama*"}, true, false},
		{[]string{"meta-llama/*"}, true, false},
		{[]string{"*/Llama-3.1-8B"}, true, false},
		{[]string{"llama-8b"}, true, false}, // by its alias
		{[]string{"*Qwen3*"}, false, true},
		{[]string{"qwen/*"}, false, false}, // case-sensitive
		{[]string{"meta-llama?Llama-3.1-8B"}, false, false},
		{[]string{"llama-*", "Qwen/Qwen3-32B"}, true, true},
	}
	for _, tt := range tests {
		key, _ := kg.newKey(t, keys.Spec{Tenant: "acme", Models: tt.globs})
		for _, a := range apis {
			for model, want := range map[string]bool{llama: tt.llama, qwen: tt.qwn} {
				if got := a.ask(t, key, model); got != want {
					t.Errorf("globs %q, %s: may use %s = %v, want %v", tt.globs, a.name, model, got, want)
				}
			}
		}
	}
}

// send makes one request and returns its status and body.
func send(t *testing.T, method, url string, h http.Header, body string) (int, string) {
	t.Helper()
	resp, b := exchange(t, method, url, h, body)
	return resp.StatusCode, b
}

// exchange makes one request and returns the answer and its body.
func exchange(t *testing.T, method, url string, h http.Header, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}
