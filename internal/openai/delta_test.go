package openai

import "testing"

func TestDeltaText(t *testing.T) {
	for _, c := range []struct {
		chunk string
		want  string // the raw text; empty when DeltaText says false
	}{
		{`{"id":"c","choices":[{"index":0,"delta":{"content":"hi"},"logprobs":null,"finish_reason":null}]}`, `"hi"`},
		{`{"choices":[{"delta":{"role":"assistant","content":""}}]}`, `""`},
		{`{"choices":[{"delta":{"role":null,"content":"a\"b","reasoning_content":null,"tool_calls":null}}],"usage":null}`, `"a\"b"`},
		{`{"choices":[{"delta":{"content":"x"},"logprobs":{"content":[{"token":"x"}]}}]}`, `"x"`},
		{`{"choices":[{"delta":{"content":"x"},"finish_reason":"stop"}]}`, ""},
		{`{"choices":[{"delta":{"content":"x"}}],"usage":{"prompt_tokens":1}}`, ""},
		{`{"choices":[{"delta":{"tool_calls":[{"index":0}],"content":"x"}}]}`, ""},
		{`{"choices":[{"delta":{"content":null}}]}`, ""},
		{`{"choices":[{"delta":{"content":"a","reasoning_content":"b"}}]}`, ""},
		{`{"choices":[{"delta":{"content":"","reasoning":"b"}}]}`, ""},
		{`{"choices":[{"delta":{"content":"a","reasoning":null,"thinking_blocks":null}}]}`, `"a"`},
		{`{"choices":[{"delta":{"content":"","thinking_blocks":[{"type":"thinking","signature":"s"}]}}]}`, ""},
		{`{"choices":[{"delta":{"content":"a"}},{"delta":{"content":"b"}}]}`, ""},
		{`{"choices":[]}`, ""},
		{`{"choices":[{"delta":{"content":"a","Content":"b"}}]}`, ""},
		{`{"choices":[{"delta":{"content":"a","content":"b"}}]}`, ""},
		{`{"choices":[{"delta":{"\u0063ontent":"a"}}]}`, ""},
		{`{"Choices":[{"delta":{"content":"a"}}]}`, ""},
		{`{"choices":[{"delta":{"content":"a"}}]`, ""},
		{`{"choices":`, ""},
		{`{"x":{"content":"a"},"choices":[{"delta":{}}]}`, ""},
	} {
		got, ok := DeltaText([]byte(c.chunk))
		if ok != (c.want != "") || string(got) != c.want && ok {
			t.Errorf("DeltaText(%s) = %s, %v; want %s", c.chunk, got, ok, c.want)
		}
	}
}

// TestDeltaReader reads a stream's text chunks by their unchanged bytes,
// and whatever else in full.
func TestDeltaReader(t *testing.T) {
	var d DeltaReader
	for _, c := range []struct{ chunk, want string }{
		{`{"id":"c","choices":[{"delta":{"content":"one"},"finish_reason":null}]}`, `"one"`},
		{`{"id":"c","choices":[{"delta":{"content":"two \u00e9"},"finish_reason":null}]}`, `"two \u00e9"`},
		{`{"id":"c","choices":[{"delta":{"content":"a","x":"b"},"finish_reason":null}]}`, `"a"`},
		{`{"id":"c","choices":[{"delta":{"content":"a"},"finish_reason":"stop"}]}`, ""},
		{`{"id":"c","choices":[{"delta":{"content":"a"},"finish_reason":null}]}`, `"a"`},
		{`{"id":"c","choices":[{"delta":{"content":"a"},"finish_reason":null}]}}`, ""},
		{`{"id":"c","choices":[{"delta":{"content":"a" "b"},"finish_reason":null}]}`, ""},
	} {
		got, ok := d.Text([]byte(c.chunk))
		if ok != (c.want != "") || ok && string(got) != c.want {
			t.Errorf("Text(%s) = %s, %v; want %s", c.chunk, got, ok, c.want)
		}
	}
}
