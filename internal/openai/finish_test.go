package openai

import "testing"

func TestFinishReason(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"choices":[{"delta":{"content":"x"},"finish_reason":null}]}`, ""},
		{`{"choices":[{"delta":{},"finish_reason":"stop"}]}`, "stop"},
		{`{"choices":[{"index":0,"finish_reason":null},{"index":1,"finish_reason" : "length"}]}`, "length"},
		{`{"choices":[{"message":{"content":"finish_reason"},"finish_reason":"tool_calls"}]}`, "tool_calls"},
		{`{"choices":[{"finish_reason":"end_turn"}]}`, "end_turn"},
		{`{"choices":[{"finish_reason":"st\"op"}]}`, "other"},
		{`{"choices":[{"finish_reason":"stop`, ""},
		{`{"usage":{"prompt_tokens":1}}`, ""},
	}
	for _, tt := range tests {
		if got := FinishReason([]byte(tt.in)); got != tt.want {
			t.Errorf("FinishReason(%s) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { FinishReason([]byte(`{"choices":[{"finish_reason":"stop"}]}`)) }); n != 0 {
		t.Errorf("a known reason allocates %v times", n)
	}
}
