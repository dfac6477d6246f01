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
