package openai

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
)

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

// FuzzFinishReasonMatchesEncodingJSON: in an answer encoding/json wrote,
// whatever its text, FinishReason reads the first choice's finish_reason
// that is not null as encoding/json reads it back: the reason itself, or
// "other" where it is written with an escape or runs past 64 bytes.
func FuzzFinishReasonMatchesEncodingJSON(f *testing.F) {
	f.Add(`say "finish_reason":"stop"`, "length", true, "stop")
	f.Add(`{"finish_reason": "x"}`, "", false, "tool_calls")
	f.Add("\\\"finish_reason\\\":\"", "a\"b", true, "")
	f.Fuzz(func(t *testing.T, content, first string, firstNull bool, second string) {
		type choice struct {
			Index        int               `json:"index"`
			Message      map[string]string `json:"message"`
			FinishReason *string           `json:"finish_reason"`
		}
		c0 := choice{Index: 0, Message: map[string]string{"content": content, "role": "assistant"}, FinishReason: &first}
		if firstNull {
			c0.FinishReason = nil
		}
		c1 := choice{Index: 1, Message: map[string]string{"content": content}, FinishReason: &second}
		body, err := json.Marshal(map[string]any{"id": content, "choices": []choice{c0, c1}})
		if err != nil {
			t.Fatal(err)
		}
		var back struct{ Choices []choice }
		if err := json.Unmarshal(body, &back); err != nil {
			t.Fatal(err)
		}
		sent := second
		if !firstNull {
			sent = first
		}
		want := *back.Choices[1].FinishReason
		if !firstNull {
			want = *back.Choices[0].FinishReason
		}
		raw, _ := json.Marshal(sent)
		if !slices.Contains(finishReasons, want) && (len(raw)-2 > maxFinishReason || bytes.IndexByte(raw, '\\') >= 0) {
			want = "other"
		}
		if got := FinishReason(body); got != want {
			t.Fatalf("FinishReason(%s) = %q, want %q", body, got, want)
		}
	})
}
