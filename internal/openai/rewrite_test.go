package openai

import (
	"encoding/json"
	"testing"
)

func TestRewrite(t *testing.T) {
	tests := []struct {
		name, body, model string
		usage             bool
		want              string
		salt              string
	}{
		{"unchanged is the same bytes", `{"model":"m", "x":1}`, "m", false, `{"model":"m", "x":1}`, ""},
		{"rename", `{ "model" : "alias", "messages":[] }`, "upstream/8b", false, `{ "model" : "upstream/8b", "messages":[] }`, ""},
		{"rename quoted", `{"model":"a"}`, "b\"\x7f\u2028", false, `{"model":"b\"` + "\x7f" + `\u2028"}`, ""},
		{"usage added", `{"model":"m","stream":true}`, "m", true, `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`, ""},
		{"usage merged", `{"stream_options":{"continuous_usage_stats":false},"model":"a","stream":true}`, "b", true,
			`{"stream_options":{"continuous_usage_stats":false,"include_usage":true},"model":"b","stream":true}`, ""},
		{"usage merged, spaced", `{"stream_options": { "x" : 1 } ,"model":"a"}`, "a", true, `{"stream_options": { "x" : 1 ,"include_usage":true} ,"model":"a"}`, ""},
		{"usage already asked", `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`, "m", true,
			`{"model":"m","stream":true,"stream_options":{"include_usage":true}}`, ""},
		{"usage was false", `{"model":"m","stream_options":{"include_usage":false,"x":[]}}`, "m", true, `{"model":"m","stream_options":{"include_usage":true,"x":[]}}`, ""},
		{"usage was null", `{"model":"m","stream_options":{"include_usage" : null}}`, "n", true, `{"model":"n","stream_options":{"include_usage" : true}}`, ""},
		{"options were null", `{"stream_options":null,"model":"m"}`, "m", true, `{"stream_options":{"include_usage":true},"model":"m"}`, ""},
		{"rename after options", `{"stream_options":{ },"model":"a"}`, "bb", true, `{"stream_options":{ "include_usage":true},"model":"bb"}`, ""},
		{"salt added", `{"model":"m" }`, "m", false, `{"model":"m" ,"cache_salt":"s1"}`, "s1"},
		{"salt replaced", `{"cache_salt" : "mine","model":"m"}`, "m", false, `{"cache_salt" : "s1","model":"m"}`, "s1"},
		{"salt was null", `{"model":"m","cache_salt":null}`, "m", false, `{"model":"m","cache_salt":"s1"}`, "s1"},
		{"salt kept", `{"model":"m","cache_salt":"s1"}`, "m", false, `{"model":"m","cache_salt":"s1"}`, "s1"},
		{"salt quoted", `{"model":"m"}`, "m", false, `{"model":"m","cache_salt":"a\"b"}`, `a"b`},
		{"all three", `{"cache_salt":"x","stream":true,"model":"a"}`, "b", true,
			`{"cache_salt":"s1","stream":true,"model":"b","stream_options":{"include_usage":true}}`, "s1"},
		{"all three, added at the end", `{"model":"a","stream":true}`, "b", true,
			`{"model":"b","stream":true,"stream_options":{"include_usage":true},"cache_salt":"s1"}`, "s1"},
		{"salt before the options", `{"stream_options":{},"cache_salt":"x","model":"a"}`, "b", true,
			`{"stream_options":{"include_usage":true},"cache_salt":"s1","model":"b"}`, "s1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseRequest([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			got := r.Rewrite([]byte(tt.body), Edits{Model: tt.model, IncludeUsage: tt.usage, CacheSalt: tt.salt})
			if string(got) != tt.want {
				t.Errorf("Rewrite = %s, want %s", got, tt.want)
			}
			if !json.Valid(got) {
				t.Errorf("Rewrite made invalid JSON: %s", got)
			}
		})
	}
}

// TestRewriteReasoning sets max_tokens, enable_thinking and
// reasoning_effort, keeping what the body already says of them.
func TestRewriteReasoning(t *testing.T) {
	on, off := true, false
	tests := []struct {
		name, body string
		e          Edits
		want       string
	}{
		{"bound set", `{"model":"m","max_tokens":32000}`, Edits{Model: "m", MaxTokens: 100}, `{"model":"m","max_tokens":100}`},
		{"bound already", `{"model":"m","max_tokens": 100}`, Edits{Model: "m", MaxTokens: 100}, `{"model":"m","max_tokens": 100}`},
		{"bound added", `{"model":"m"}`, Edits{Model: "m", MaxTokens: 7}, `{"model":"m","max_tokens":7}`},
		{"bound was null", `{"max_tokens":null,"model":"m"}`, Edits{Model: "m", MaxTokens: 7}, `{"max_tokens":7,"model":"m"}`},
		{"thinking added", `{"model":"m"}`, Edits{Model: "m", EnableThinking: &on}, `{"model":"m","chat_template_kwargs":{"enable_thinking":true}}`},
		{"thinking off", `{"model":"m"}`, Edits{Model: "m", EnableThinking: &off}, `{"model":"m","chat_template_kwargs":{"enable_thinking":false}}`},
		{"thinking merged", `{"chat_template_kwargs":{"add_generation_prompt":true},"model":"m"}`, Edits{Model: "m", EnableThinking: &on},
			`{"chat_template_kwargs":{"add_generation_prompt":true,"enable_thinking":true},"model":"m"}`},
		{"thinking into empty", `{"chat_template_kwargs":{ },"model":"m"}`, Edits{Model: "m", EnableThinking: &on}, `{"chat_template_kwargs":{ "enable_thinking":true},"model":"m"}`},
		{"thinking into null", `{"chat_template_kwargs":null,"model":"m"}`, Edits{Model: "m", EnableThinking: &off}, `{"chat_template_kwargs":{"enable_thinking":false},"model":"m"}`},
		{"thinking the body's own", `{"chat_template_kwargs":{"enable_thinking":false},"model":"m"}`, Edits{Model: "m", EnableThinking: &on},
			`{"chat_template_kwargs":{"enable_thinking":false},"model":"m"}`},
		{"kwargs not an object", `{"chat_template_kwargs":[],"model":"m"}`, Edits{Model: "m", EnableThinking: &on}, `{"chat_template_kwargs":[],"model":"m"}`},
		{"effort added", `{"model":"m"}`, Edits{Model: "m", ReasoningEffort: "high"}, `{"model":"m","reasoning_effort":"high"}`},
		{"effort the body's own", `{"model":"m","reasoning_effort":"low"}`, Edits{Model: "m", ReasoningEffort: "high"}, `{"model":"m","reasoning_effort":"low"}`},
		{"every edit", `{"model":"a","stream":true}`, Edits{Model: "b", IncludeUsage: true, CacheSalt: "s1", MaxTokens: 9, EnableThinking: &on, ReasoningEffort: "medium"},
			`{"model":"b","stream":true,"stream_options":{"include_usage":true},"cache_salt":"s1","max_tokens":9,"chat_template_kwargs":{"enable_thinking":true},"reasoning_effort":"medium"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseRequest([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Rewrite([]byte(tt.body), tt.e); string(got) != tt.want {
				t.Errorf("Rewrite = %s, want %s", got, tt.want)
			}
		})
	}
}
