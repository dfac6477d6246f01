package app

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/keys"
	"gitea.mynodes.xyz/ilker/llmgw/internal/sim"
)

// keyedGateway is a gateway with authentication on, in front of one
// simulated replica serving the models "chat" and "secret".
type keyedGateway struct {
	*Gateway
	logs *syncWriter
}

// keyedConfig is a configuration with keys on; extra is appended YAML.
func keyedConfig(upstream, storeURL, extra string) string {
	return fmt.Sprintf(`
server: {listen: "127.0.0.1:0", admin_listen: "127.0.0.1:0"}
router: {auth: keys, tenant_label: team}
store: {url: %q}
pools:
  - name: sim
    endpoints: [{url: %q}]
models:
  - {name: chat, pool: sim, price: {input_per_million: 1000, output_per_million: 2000}}
  - {name: secret, pool: sim}
%s`, storeURL, upstream, extra)
}

func startKeyed(t *testing.T, extra string) *keyedGateway {
	t.Helper()
	ctx := t.Context()
	rep, err := sim.Start(ctx, sim.Config{Model: "chat", FixedTiming: true}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rep.Close)
	// The simulated replica serves one model name; both catalog models map to it.
	yaml := strings.ReplaceAll(keyedConfig(rep.URL(), "sqlite:"+filepath.Join(t.TempDir(), "gw.db"), extra),
		"{name: secret, pool: sim}", "{name: secret, pool: sim, upstream_model: chat}")
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncWriter{w: new(strings.Builder)}
	g, err := newGateway(ctx, cfg, "", slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }() // t.Context ends before cleanups run
	t.Cleanup(func() { <-done })
	return &keyedGateway{Gateway: g, logs: logs}
}

func (g *keyedGateway) newKey(t *testing.T, spec keys.Spec) (plaintext, id string) {
	t.Helper()
	plaintext, k, err := keys.Create(t.Context(), g.store, spec, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return plaintext, k.ID
}

// call sends a chat completion with the given key and returns the response
// and its body.
func (g *keyedGateway) call(t *testing.T, key, model string, maxTokens int) (*http.Response, string) {
	t.Helper()
	body := fmt.Sprintf(`{"model":%q,"max_tokens":%d,"messages":[{"role":"user","content":"hello there"}]}`, model, maxTokens)
	req, _ := http.NewRequest(http.MethodPost, g.URL()+"/chat/completions", strings.NewReader(body))
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

func errorCode(t *testing.T, body string) string {
	t.Helper()
	var e struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
		t.Fatalf("not an OpenAI error body: %s", body)
	}
	if e.Error.Code == nil {
		return ""
	}
	return *e.Error.Code
}

func TestAuthentication(t *testing.T) {
	g := startKeyed(t, "")
	key, id := g.newKey(t, keys.Spec{Tenant: "acme/search/alice", Models: []string{"ch*"}})

	if resp, body := g.call(t, "", "chat", 4); resp.StatusCode != 401 || errorCode(t, body) != "invalid_api_key" {
		t.Errorf("no key: %d %s", resp.StatusCode, body)
	}
	if resp, body := g.call(t, "sk-llmgw-aaaaaaaaaaaa-bbbb", "chat", 4); resp.StatusCode != 401 {
		t.Errorf("unknown key: %d %s", resp.StatusCode, body)
	}
	if resp, body := g.call(t, key, "chat", 4); resp.StatusCode != 200 {
		t.Fatalf("good key: %d %s", resp.StatusCode, body)
	}

	// x-api-key works as well as a bearer token, and the key is shown only
	// the models it may use.
	req, _ := http.NewRequest(http.MethodGet, g.URL()+"/models", nil)
	req.Header.Set("x-api-key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	list, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(list), `"id":"chat"`) || strings.Contains(string(list), "secret") {
		t.Errorf("models for a key limited to ch*: %d %s", resp.StatusCode, list)
	}

	// A model outside the key's globs answers as one that does not exist.
	_, hidden := g.call(t, key, "secret", 4)
	_, missing := g.call(t, key, "nothing", 4)
	if errorCode(t, hidden) != "model_not_found" || strings.ReplaceAll(hidden, "secret", "X") != strings.ReplaceAll(missing, "nothing", "X") {
		t.Errorf("a hidden model answers differently from a missing one:\n%s\n%s", hidden, missing)
	}

	// A revocation written to the store, as another replica would, takes
	// effect here within a second.
	if err := g.store.RevokeKey(t.Context(), id, time.Now()); err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	for {
		resp, _ := g.call(t, key, "chat", 1)
		if resp.StatusCode == 401 {
			break
		}
		if time.Since(revoked) > time.Second {
			t.Fatalf("a revoked key still works %v after revocation", time.Since(revoked))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRateLimits(t *testing.T) {
	g := startKeyed(t, `
tenants:
  - {path: beta, rpm: 3}
`)
	key, _ := g.newKey(t, keys.Spec{Tenant: "acme/search", RPM: 2})
	for i, wantRemaining := range []string{"1", "0"} {
		resp, body := g.call(t, key, "chat", 4)
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, body)
		}
		h := resp.Header
		if h.Get("x-ratelimit-limit-requests") != "2" || h.Get("x-ratelimit-remaining-requests") != wantRemaining || h.Get("x-ratelimit-reset-requests") == "" {
			t.Errorf("request %d headers: %v", i, h)
		}
	}
	resp, body := g.call(t, key, "chat", 4)
	if resp.StatusCode != 429 || errorCode(t, body) != "rate_limit_exceeded" || resp.Header.Get("Retry-After") == "" {
		t.Errorf("past the limit: %d %s %v", resp.StatusCode, body, resp.Header)
	}

	// Limits on a tenant level hold every key below it together.
	a, _ := g.newKey(t, keys.Spec{Tenant: "beta/x"})
	b, _ := g.newKey(t, keys.Spec{Tenant: "beta/y/bob"})
	var ok, limited int
	for _, k := range []string{a, b, a, b} {
		switch resp, _ := g.call(t, k, "chat", 4); resp.StatusCode {
		case 200:
			ok++
		case 429:
			limited++
		}
	}
	if ok != 3 || limited != 1 {
		t.Errorf("tenant rpm 3 let %d through and limited %d of 4", ok, limited)
	}

	// A token limit reserves the prompt estimate plus max_tokens.
	tk, _ := g.newKey(t, keys.Spec{Tenant: "gamma", TPM: 100})
	if resp, body := g.call(t, tk, "chat", 500); resp.StatusCode != 429 {
		t.Errorf("a request over the token limit: %d %s", resp.StatusCode, body)
	}
	if resp, body := g.call(t, tk, "chat", 10); resp.StatusCode != 200 || resp.Header.Get("x-ratelimit-limit-tokens") != "100" {
		t.Errorf("a request within the token limit: %d %s %v", resp.StatusCode, body, resp.Header)
	}
}

// TestCountTokensIsMetered: the Messages API's count takes a request from
// the key's request limit, as any request does, and answers in
// Anthropic's shape past it; it honours the key's models too.
func TestCountTokensIsMetered(t *testing.T) {
	g := startKeyed(t, "")
	key, _ := g.newKey(t, keys.Spec{Tenant: "acme/search", RPM: 2, Models: []string{"ch*"}})
	count := func(model string) (*http.Response, string) {
		t.Helper()
		body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hello there"}]}`, model)
		req, _ := http.NewRequest(http.MethodPost, g.URL()+"/messages/count_tokens", strings.NewReader(body))
		req.Header.Set("x-api-key", key)
		req.Header.Set("anthropic-version", "2023-06-01")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	if resp, body := count("secret"); resp.StatusCode != 404 || !strings.Contains(body, `"type":"not_found_error"`) {
		t.Errorf("a model outside the key's globs: %d %s", resp.StatusCode, body)
	}
	for i, wantRemaining := range []string{"1", "0"} {
		resp, body := count("chat")
		if resp.StatusCode != 200 || body != `{"input_tokens":8}` || resp.Header.Get("x-ratelimit-remaining-requests") != wantRemaining {
			t.Fatalf("count %d: %d %s %v", i, resp.StatusCode, body, resp.Header)
		}
	}
	resp, body := count("chat")
	if resp.StatusCode != 429 || !strings.HasPrefix(body, `{"type":"error","error":{"type":"rate_limit_error"`) || resp.Header.Get("Retry-After") == "" {
		t.Errorf("the third count of a key with rpm 2: %d %s %v", resp.StatusCode, body, resp.Header)
	}
	if resp, body := g.call(t, key, "chat", 4); resp.StatusCode != 429 {
		t.Errorf("a chat request after two counts of a key with rpm 2: %d %s", resp.StatusCode, body)
	}
}

func TestBudget(t *testing.T) {
	g := startKeyed(t, "")
	// chat costs $1000 per million prompt tokens: a handful of tokens spend
	// a cent's budget.
	key, _ := g.newKey(t, keys.Spec{Tenant: "acme", BudgetUSD: 0.01, Period: "day"})
	if resp, body := g.call(t, key, "chat", 8); resp.StatusCode != 200 {
		t.Fatalf("first request: %d %s", resp.StatusCode, body)
	}
	resp, body := g.call(t, key, "chat", 8)
	if resp.StatusCode != 429 || errorCode(t, body) != "insufficient_quota" {
		t.Errorf("past the budget: %d %s", resp.StatusCode, body)
	}
}

func TestSelfUsageIsolation(t *testing.T) {
	g := startKeyed(t, "")
	a, aID := g.newKey(t, keys.Spec{Tenant: "acme/search/alice", BudgetTokens: 1000000})
	b, bID := g.newKey(t, keys.Spec{Tenant: "acme/search/bob"})
	for range 2 {
		if resp, body := g.call(t, a, "chat", 4); resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
	}
	self := func(key string) (u struct {
		ID              string `json:"id"`
		Tenant          string `json:"tenant"`
		Requests        int64  `json:"requests"`
		RemainingTokens *int64 `json:"remaining_budget_tokens"`
	}) {
		req, _ := http.NewRequest(http.MethodGet, g.URL()+"/llmgw/usage", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("usage: %d", resp.StatusCode)
		}
		json.NewDecoder(resp.Body).Decode(&u)
		return u
	}
	deadline := time.Now().Add(5 * time.Second)
	for self(a).Requests != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("alice's two requests never reached her usage: %+v", self(a))
		}
		time.Sleep(50 * time.Millisecond) // the ledger writes in batches
	}
	ua, ub := self(a), self(b)
	if ua.ID != aID || ua.RemainingTokens == nil || *ua.RemainingTokens >= 1000000 {
		t.Errorf("alice sees %+v", ua)
	}
	if ub.ID != bID || ub.Requests != 0 || ub.Tenant != "acme/search/bob" || ub.RemainingTokens != nil {
		t.Errorf("bob sees %+v, which is not his own", ub)
	}
}

func TestKeysNeverLeak(t *testing.T) {
	g := startKeyed(t, "")
	key, id := g.newKey(t, keys.Spec{Tenant: "acme/search/alice", Models: []string{"chat"}, RPM: 1})
	secret := key[strings.LastIndexByte(key, '-')+1:]
	var bodies []string
	collect := func(resp *http.Response, body string) {
		bodies = append(bodies, body, fmt.Sprint(resp.Header))
	}
	collect(g.call(t, key, "chat", 4))
	collect(g.call(t, key, "chat", 4))   // rate limited
	collect(g.call(t, key, "secret", 4)) // not allowed
	collect(g.call(t, key, key, 4))      // the key as a model name
	collect(g.call(t, key+"x", "chat", 4))
	if err := g.store.RevokeKey(t.Context(), id, time.Now()); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(2 * time.Second); ; { // until the revocation is seen
		resp, body := g.call(t, key, "chat", 4)
		collect(resp, body)
		if resp.StatusCode == 401 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	req, _ := http.NewRequest(http.MethodPost, g.URL()+"/chat/completions", strings.NewReader(`{"model":`))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	collect(resp, string(b))

	metrics, err := http.Get(g.AdminURL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(metrics.Body)
	metrics.Body.Close()
	places := map[string]string{"logs": g.logs.String(), "metrics": string(m), "responses": strings.Join(bodies, "\n")}
	for where, text := range places {
		if strings.Contains(text, secret) {
			t.Errorf("the key's secret appears in the %s", where)
		}
	}
	if !strings.Contains(places["responses"], "model_not_found") || !strings.Contains(places["responses"], "rate_limit_exceeded") {
		t.Error("the requests did not reach the refusals they were meant to")
	}
}

// TestModelListsHonourTheKey: a key held to some models sees those alone
// in the model list, in OpenAI's shape and in Anthropic's.
func TestModelListsHonourTheKey(t *testing.T) {
	g := startKeyed(t, "")
	key, _ := g.newKey(t, keys.Spec{Tenant: "acme/search", Models: []string{"ch*"}})
	for _, anthropic := range []bool{false, true} {
		req, _ := http.NewRequest(http.MethodGet, g.URL()+"/models", nil)
		if anthropic {
			req.Header.Set("x-api-key", key)
			req.Header.Set("anthropic-version", "2023-06-01")
		} else {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var list struct {
			Data []struct {
				ID   string `json:"id"`
				Type string `json:"type"`
			} `json:"data"`
		}
		err = json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("anthropic %v: %d %v", anthropic, resp.StatusCode, err)
		}
		var ids []string
		for _, m := range list.Data {
			ids = append(ids, m.ID)
			if anthropic && m.Type != "model" {
				t.Errorf("an Anthropic client's list holds %+v, not in Anthropic's shape", m)
			}
		}
		if len(ids) != 1 || ids[0] != "chat" {
			t.Errorf("anthropic %v: a key held to ch* sees %v, want [chat]", anthropic, ids)
		}
	}
}
