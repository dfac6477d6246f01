package openai

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestUsageOf(t *testing.T) {
	tests := []struct {
		body string
		want *Usage
	}{
		{`{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9,"prompt_tokens_details":{"cached_tokens":4}}}`,
			&Usage{7, 2, 9, &struct {
				CachedTokens int64 `json:"cached_tokens"`
			}{4}}},
		{`{"usage": {"completion_tokens": 3, "prompt_tokens": 5, "total_tokens": 8}, "id": "x"}`, &Usage{PromptTokens: 5, CompletionTokens: 3, TotalTokens: 8}},
		{`{"usage":{"prompt_tokens":5,"prompt_tokens_details":null}}`, &Usage{PromptTokens: 5}},
		{`{"usage":null}`, nil},
		{`{"choices":[{"delta":{"content":"usage"}}]}`, nil},
	}
	// Counts that are not plain integers go to the decoder, which refuses
	// them for an int64 rather than reading part of them.
	for _, bad := range []string{`{"usage":{"prompt_tokens":5,"completion_tokens":1e1}}`, `{"usage":{"prompt_tokens":"5"}}`} {
		if u, err := UsageOf([]byte(bad)); err == nil {
			t.Errorf("UsageOf(%s) = %+v, want an error", bad, u)
		}
	}
	for _, tt := range tests {
		got, err := UsageOf([]byte(tt.body))
		if err != nil {
			t.Errorf("UsageOf(%s): %v", tt.body, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("UsageOf(%s) (-want +got):\n%s", tt.body, diff)
		}
	}
}

// TestUsageOfLlamaCppTimings reads the cached tokens from the timings
// llama.cpp's server writes beside its usage, which has no
// prompt_tokens_details: server_task_result_cmpl_final's
// to_json_oaicompat_chat and, streamed, the usage chunk its
// to_json_oaicompat_chat_stream ends with, and result_timings::to_json,
// in tools/server/server-task.cpp of ggml-org/llama.cpp at commit
// 00efb3e184262872916bf136b3df63c1822a19bd.
func TestUsageOfLlamaCppTimings(t *testing.T) {
	cached := func(n int64) *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} {
		return &struct {
			CachedTokens int64 `json:"cached_tokens"`
		}{n}
	}
	timings := `"timings":{"cache_n":1736,"prompt_n":97,"prompt_ms":88.1,"prompt_per_token_ms":0.908,"prompt_per_second":1101.02,"predicted_n":12,"predicted_ms":121.4,"predicted_per_token_ms":10.1,"predicted_per_second":98.8}`
	for _, tc := range []struct {
		name, body string
		want       *Usage
	}{
		{"answer",
			`{"choices":[{"finish_reason":"stop","index":0,"message":{"role":"assistant","content":"hi"}}],"created":1765130000,"model":"qwen","system_fingerprint":"b7000-fb40266","object":"chat.completion","usage":{"completion_tokens":12,"prompt_tokens":1833,"total_tokens":1845},"id":"chatcmpl-x",` + timings + `}`,
			&Usage{1833, 12, 1845, cached(1736)}},
		{"stream's usage chunk",
			`{"choices":[],"created":1765130000,"id":"chatcmpl-x","model":"qwen","system_fingerprint":"b7000-fb40266","object":"chat.completion.chunk","usage":{"completion_tokens":12,"prompt_tokens":1833,"total_tokens":1845},` + timings + `}`,
			&Usage{1833, 12, 1845, cached(1736)}},
		{"prompt_tokens_details first",
			`{"usage":{"prompt_tokens":1833,"completion_tokens":1,"total_tokens":1834,"prompt_tokens_details":{"cached_tokens":1024}},` + timings + `}`,
			&Usage{1833, 1, 1834, cached(1024)}},
		{"nothing cached", `{"usage":{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10},"timings":{"cache_n":0,"prompt_n":9}}`,
			&Usage{9, 1, 10, cached(0)}},
		// What no server writes is not read as cached tokens.
		{"more cached than the prompt", `{"usage":{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10},"timings":{"cache_n":10}}`, &Usage{9, 1, 10, nil}},
		{"negative", `{"usage":{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10},"timings":{"cache_n":-1}}`, &Usage{9, 1, 10, nil}},
		{"not whole", `{"usage":{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10},"timings":{"cache_n":2.5}}`, &Usage{9, 1, 10, nil}},
		{"a string", `{"usage":{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10},"timings":{"cache_n":"2"}}`, &Usage{9, 1, 10, nil}},
		{"timings not an object", `{"usage":{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10},"timings":[1]}`, &Usage{9, 1, 10, nil}},
		{"timings cut", `{"usage":{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10},"timings":{"cache_n":2`, &Usage{9, 1, 10, nil}},
	} {
		got, err := UsageOf([]byte(tc.body))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}
