package openai

import (
	"encoding/json"
	"testing"
)

// A body names the fields that change what a provider bills in Billed,
// unless their values are harmless, and reads them as routing fields:
// given twice or in another case, a 400 naming them.
func TestParseRequestBilled(t *testing.T) {
	tests := []struct {
		body, billed, tier string
	}{
		{`{"model":"m","service_tier":"priority"}`, "service_tier", "priority"},
		{`{"model":"m","service_tier":"\u0070riority"}`, "service_tier", "priority"},
		{`{"model":"m","service_tier":"flex","store":true,"web_search_options":{},"modalities":["text","audio"],"audio":{"voice":"alloy"},"prediction":{"type":"content","content":"x"},"prompt_cache_retention":"24h"}`,
			"service_tier, store, web_search_options, modalities, audio, prediction, prompt_cache_retention", "flex"},
		{`{"model":"m","inference_geo":"us","speed":"fast","container":"c1","fallbacks":[{"model":"x"}],"context_management":{"edits":[{"type":"compact_20260112"}]},"mcp_servers":[]}`,
			"inference_geo, speed, container, fallbacks, context_management, mcp_servers", ""},
		{`{"model":"m","mcp_servers":[{"type":"url","url":"https://example.com/sse","name":"x"}]}`, "mcp_servers", ""},
		// Harmless values: the field's default, or one that bills no more.
		{`{"model":"m","service_tier":"auto","store":false,"modalities":["text"],"prompt_cache_retention":"in_memory","speed":"standard"}`, "", "auto"},
		{`{"model":"m","service_tier":"default"}`, "", "default"},
		{`{"model":"m","service_tier":"standard_only"}`, "", "standard_only"},
		{`{"model":"m","service_tier":null,"store":null,"web_search_options":null,"audio":null,"inference_geo":null,"container":null}`, "", ""},
		{`{"model":"m","context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"},{"type":"clear_tool_uses_20250919"}]}}`, "", ""},
		// Values a provider could read otherwise are not harmless.
		{`{"model":"m","service_tier":"AUTO"}`, "service_tier", "AUTO"},
		{`{"model":"m","store":"false"}`, "store", ""},
		{`{"model":"m","modalities":[]}`, "", ""},
		{`{"model":"m","modalities":"text"}`, "modalities", ""},
		{`{"model":"m","context_management":{"edits":[{"type":"clear_x","type":"compact_20260112"}]}}`, "context_management", ""},
		{`{"model":"m","context_management":{"edits":[{"type":"clear_x","Type":"compact_20260112"}]}}`, "context_management", ""},
		{`{"model":"m","context_management":{"edits":[],"Edits":[{"type":"compact_20260112"}]}}`, "context_management", ""},
		{`{"model":"m","context_management":{"edits":[{"keep":"all"}]}}`, "context_management", ""},
	}
	for _, tt := range tests {
		r, err := ParseRequest([]byte(tt.body))
		if err != nil {
			t.Errorf("ParseRequest(%s): %v", tt.body, err)
			continue
		}
		if r.Billed.String() != tt.billed || r.ServiceTier != tt.tier {
			t.Errorf("ParseRequest(%s): billed %q, service tier %q; want %q, %q", tt.body, r.Billed, r.ServiceTier, tt.billed, tt.tier)
		}
	}
	for _, tt := range []struct{ body, param, msg string }{
		{`{"model":"m","service_tier":"auto","service_tier":"priority"}`, "service_tier", "Duplicate key"},
		{`{"model":"m","Service_Tier":"priority"}`, "service_tier", "only in case"},
		{`{"model":"m","\u0073tore":false,"store":true}`, "store", "Duplicate key"},
		{`{"model":"m","\u017fpeed":"fast"}`, "speed", "only in case"},
	} {
		checkBadRequest(t, tt.body, Error{Param: tt.param, Message: tt.msg})
	}
}

// Dropping a billed field splices its member out of the body, with the
// comma that joined it, and leaves the rest byte for byte.
func TestRewriteDropsBilledFields(t *testing.T) {
	all := BilledFields(1<<numBilled - 1)
	tests := []struct {
		name, body string
		e          Edits
		want       string
	}{
		{"first", `{"service_tier":"priority","model":"m","x":1}`, Edits{Model: "m", Drop: all}, `{"model":"m","x":1}`},
		{"middle, spaced", `{"model":"m" , "store" : true , "x":1}`, Edits{Model: "m", Drop: all}, `{"model":"m" , "x":1}`},
		{"last", `{"model":"m","x":1,"store":true}`, Edits{Model: "m", Drop: all}, `{"model":"m","x":1}`},
		{"last two", `{"model":"m","speed":"fast" ,"store":true }`, Edits{Model: "m", Drop: all}, `{"model":"m" }`},
		{"all around the model", `{"store":true,"audio":{},"model":"m","speed":"fast","container":"c"}`, Edits{Model: "m", Drop: all}, `{"model":"m"}`},
		{"one of two", `{"model":"m","store":true,"service_tier":"flex"}`, Edits{Model: "m", Drop: Of(Store)}, `{"model":"m","service_tier":"flex"}`},
		{"the other", `{"model":"m","store":true,"service_tier":"flex"}`, Edits{Model: "m", Drop: Of(ServiceTier)}, `{"model":"m","store":true}`},
		{"harmless, when asked", `{"model":"m","service_tier":"auto"}`, Edits{Model: "m", Drop: Of(ServiceTier)}, `{"model":"m"}`},
		{"none given", `{"model":"m","x":1}`, Edits{Model: "m", Drop: all}, `{"model":"m","x":1}`},
		{"with the other edits", `{"model":"a","store":true,"stream":true}`, Edits{Model: "b", IncludeUsage: true, CacheSalt: "s", Drop: all},
			`{"model":"b","stream":true,"stream_options":{"include_usage":true},"cache_salt":"s"}`},
		{"the last, then added to", `{"model":"a","store":true}`, Edits{Model: "a", MaxTokens: 9, Drop: all}, `{"model":"a","max_tokens":9}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseRequest([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			got := r.Rewrite([]byte(tt.body), tt.e)
			if string(got) != tt.want {
				t.Errorf("Rewrite = %s, want %s", got, tt.want)
			}
			if !json.Valid(got) {
				t.Errorf("Rewrite made invalid JSON: %s", got)
			}
		})
	}
}

func TestBilledFieldNamed(t *testing.T) {
	for f := range numBilled {
		if got, ok := BilledFieldNamed(f.String()); !ok || got != f {
			t.Errorf("BilledFieldNamed(%q) = %v, %v", f, got, ok)
		}
	}
	if _, ok := BilledFieldNamed("model"); ok {
		t.Error("model is a billed field")
	}
}
