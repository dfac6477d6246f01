package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/keys"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
)

// billedValues are the fields that change what a provider bills or runs
// beyond a request's tokens, each at a value that does.
var billedValues = []struct{ field, value string }{
	{"service_tier", `"priority"`},
	{"store", `true`},
	{"web_search_options", `{"search_context_size":"high"}`},
	{"modalities", `["text","audio"]`},
	{"audio", `{"voice":"alloy","format":"wav"}`},
	{"prediction", `{"type":"content","content":"x"}`},
	{"prompt_cache_retention", `"24h"`},
	{"inference_geo", `"us"`},
	{"speed", `"fast"`},
	{"container", `"container_1"`},
	{"fallbacks", `[{"model":"other"}]`},
	{"context_management", `{"edits":[{"type":"compact_20260112"}]}`},
	{"mcp_servers", `[{"type":"url","url":"https://example.com/sse","name":"x"}]`},
}

// startBilled starts a gateway with keys in front of an openai pool (up)
// and an anthropic pool (claude), each serving a model that drops the
// billed fields (the default), one that refuses them, and one that allows
// service_tier at its priority tier, priced at 3 and 6 dollars a million
// tokens in and out where the model's own price is 1 and 2; and gpt-allow,
// which allows store, prompt_cache_retention and prediction.
func startBilled(t *testing.T, up, claude http.Handler) *keyedGateway {
	t.Helper()
	g := startYAML(t, fmt.Sprintf(`
router: {auth: keys}
store: {url: %q}
pools:
  - {name: oa, kind: openai, endpoints: [{url: %q}]}
  - {name: an, kind: anthropic, endpoints: [{url: %q}]}
models:
  - {name: gpt, pool: oa, price: {input_per_million: 1, output_per_million: 2}}
  - {name: gpt-refuse, pool: oa, billed_fields: {others: refuse}}
  - {name: gpt-tier, pool: oa, price: %[4]s, billed_fields: {allow: [service_tier]}}
  - {name: gpt-allow, pool: oa, billed_fields: {allow: [store, prompt_cache_retention, prediction], others: refuse}}
  - {name: claude, pool: an, price: {input_per_million: 1, output_per_million: 2}}
  - {name: claude-refuse, pool: an, billed_fields: {others: refuse}}
  - {name: claude-tier, pool: an, price: %[4]s, billed_fields: {allow: [service_tier]}}
`, "sqlite:"+filepath.Join(t.TempDir(), "gw.db"), newServer(t, up)+"/v1", newServer(t, claude)+"/v1",
		"{input_per_million: 1, output_per_million: 2, service_tiers: {priority: {input_per_million: 3, output_per_million: 6}}}"))
	return &keyedGateway{Gateway: g}
}

// billedBody is a request body of the API at path for model, with field
// at value when field is not empty.
func billedBody(path, model, field, value string) string {
	var b string
	switch path {
	case "/messages":
		b = fmt.Sprintf(`{"model":%q,"max_tokens":5,"messages":[{"role":"user","content":"hi"}]`, model)
	case "/responses":
		b = fmt.Sprintf(`{"model":%q,"input":"hi"`, model)
	case "/completions":
		b = fmt.Sprintf(`{"model":%q,"max_tokens":5,"prompt":"hi"`, model)
	case "/embeddings":
		b = fmt.Sprintf(`{"model":%q,"input":"hi"`, model)
	default:
		b = fmt.Sprintf(`{"model":%q,"max_tokens":5,"messages":[{"role":"user","content":"hi"}]`, model)
	}
	if field != "" {
		b += fmt.Sprintf(`,%q:%s`, field, value)
	}
	return b + "}"
}

// TestBilledFieldsNeverReachTheProvider: a field that changes what a
// provider bills or runs beyond the tokens the ledger prices reaches no
// provider, on any API or pool kind, unless the model allows it: it is
// taken out of the body (and named in X-Llmgw-Dropped-Fields), or, when
// the model refuses such fields, a 400 naming it before anything is
// reserved or any upstream called. A translated request carries none.
func TestBilledFieldsNeverReachTheProvider(t *testing.T) {
	up, claude := &recordingUpstream{}, &recordingUpstream{}
	g := startBilled(t, up, claude)
	key, _ := g.newKey(t, keys.Spec{Tenant: "acme", TPM: 1000000})
	h := http.Header{"Authorization": {"Bearer " + key}, "Content-Type": {"application/json"}, "Anthropic-Version": {"2023-06-01"}}
	routes := []struct {
		path, model, refusing string
		to                    *recordingUpstream
		translated            bool // the body the pool is sent is a translation
	}{
		{"/chat/completions", "gpt", "gpt-refuse", up, false},
		{"/completions", "gpt", "gpt-refuse", up, false},
		{"/embeddings", "gpt", "gpt-refuse", up, false},
		{"/messages", "claude", "claude-refuse", claude, false},
		{"/chat/completions", "claude", "claude-refuse", claude, true},
		{"/messages", "gpt", "", up, true},
		{"/responses", "gpt", "", up, true},
		{"/responses", "claude", "", claude, true},
	}
	for _, rt := range routes {
		for _, bv := range billedValues {
			t.Run(rt.path+" to "+rt.model+", "+bv.field, func(t *testing.T) {
				resp, answer := exchange(t, http.MethodPost, g.URL()+rt.path, h, billedBody(rt.path, rt.model, bv.field, bv.value))
				if resp.StatusCode != 200 {
					t.Fatalf("%d %s", resp.StatusCode, answer)
				}
				if sent := rt.to.last(t).body; bytes.Contains(sent, []byte(bv.field)) {
					t.Errorf("the provider was sent %s", sent)
				}
				if got := resp.Header.Get("X-Llmgw-Dropped-Fields"); !rt.translated && got != bv.field {
					t.Errorf("X-Llmgw-Dropped-Fields %q, want %q", got, bv.field)
				}
				if rt.refusing == "" || rt.translated {
					return
				}
				before := rt.to.calls()
				resp, answer = exchange(t, http.MethodPost, g.URL()+rt.path, h, billedBody(rt.path, rt.refusing, bv.field, bv.value))
				var e struct {
					Error struct{ Param, Message string }
				}
				json.Unmarshal([]byte(answer), &e)
				if resp.StatusCode != 400 || !strings.Contains(e.Error.Message, "'"+bv.field+"'") || rt.path != "/messages" && e.Error.Param != bv.field {
					t.Errorf("a model that refuses it: %d %s", resp.StatusCode, answer)
				}
				if resp.Header.Get("x-ratelimit-remaining-tokens") != "" || rt.to.calls() != before {
					t.Errorf("refused after reserving %q, or an upstream call (%d)", resp.Header.Get("x-ratelimit-remaining-tokens"), rt.to.calls()-before)
				}
			})
		}
	}

	// Harmless values ask what the field's absence asks: they reach the
	// provider byte for byte, whatever the model's setting.
	for _, rt := range routes[:4] {
		body := billedBody(rt.path, rt.refusing, "store", "false")
		if rt.path == "/messages" {
			body = billedBody(rt.path, rt.refusing, "speed", `"standard"`)
		}
		body = strings.Replace(body, `"model"`, `"service_tier":"auto","model"`, 1)
		if resp, answer := exchange(t, http.MethodPost, g.URL()+rt.path, h, body); resp.StatusCode != 200 || resp.Header.Get("X-Llmgw-Dropped-Fields") != "" {
			t.Errorf("%s %s: %d %s", rt.path, body, resp.StatusCode, answer)
		}
		if sent := rt.to.last(t).body; !bytes.Contains(sent, []byte(`"service_tier":"auto"`)) {
			t.Errorf("%s: the provider was sent %s", rt.path, sent)
		}
	}
}

// TestAllowedBilledFieldsArePriced: a field the model allows reaches its
// provider as asked, and the ledger prices what it costs: a service tier
// at the tier's own price, on an openai pool's chat and an anthropic
// pool's Messages alike; a tier the model's price does not list is
// dropped, and priced at the model's.
func TestAllowedBilledFieldsArePriced(t *testing.T) {
	up, claude := &recordingUpstream{}, &recordingUpstream{}
	g := startBilled(t, up, claude)
	key, id := g.newKey(t, keys.Spec{Tenant: "acme"})
	h := http.Header{"Authorization": {"Bearer " + key}, "Content-Type": {"application/json"}, "Anthropic-Version": {"2023-06-01"}}
	for _, tt := range []struct {
		path, model, field, value string
		to                        *recordingUpstream
		sent                      bool
	}{
		{"/chat/completions", "gpt-tier", "service_tier", `"priority"`, up, true},
		{"/messages", "claude-tier", "service_tier", `"priority"`, claude, true},
		{"/chat/completions", "gpt-tier", "service_tier", `"flex"`, up, false},
		{"/chat/completions", "gpt-allow", "store", `true`, up, true},
		{"/chat/completions", "gpt-allow", "prompt_cache_retention", `"24h"`, up, true},
		{"/completions", "gpt-allow", "prediction", `{"type":"content","content":"x"}`, up, true},
	} {
		resp, answer := exchange(t, http.MethodPost, g.URL()+tt.path, h, billedBody(tt.path, tt.model, tt.field, tt.value))
		if resp.StatusCode != 200 {
			t.Fatalf("%s %s: %d %s", tt.model, tt.field, resp.StatusCode, answer)
		}
		var sent map[string]json.RawMessage
		json.Unmarshal(tt.to.last(t).body, &sent)
		if got := string(sent[tt.field]); (got == tt.value) != tt.sent {
			t.Errorf("%s %s %s: the provider was sent %s", tt.model, tt.field, tt.value, tt.to.last(t).body)
		}
	}
	// Each upstream reports 10 prompt tokens and 2 completion tokens.
	atTier, atModel := (10*3+2*6)/1e6, (10*1+2*2)/1e6
	want := map[string]float64{"gpt-tier": atTier + atModel, "claude-tier": atTier, "gpt-allow": 0}
	waitUntil(t, "the ledger to hold every answer", func() bool {
		rows, err := g.store.Usage(t.Context(), usage.Query{KeyID: id, By: usage.ByModel})
		n := int64(0)
		for _, r := range rows {
			n += r.Requests
		}
		return err == nil && n == 6
	})
	rows, _ := g.store.Usage(t.Context(), usage.Query{KeyID: id, By: usage.ByModel})
	for _, r := range rows {
		if math.Abs(r.CostUSD-want[r.Group]) > 1e-12 {
			t.Errorf("%s cost %v, want %v", r.Group, r.CostUSD, want[r.Group])
		}
	}
}
