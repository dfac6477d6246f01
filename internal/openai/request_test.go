package openai

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestParseRequest(t *testing.T) {
	tests := []struct {
		body string
		want Request
	}{
		{`{"model":"m","messages":[]}`, Request{Model: "m"}},
		{` { "messages" : [{"content":"{\"model\":\"x\"}"}], "model" : "m" , "stream":true}`, Request{Model: "m", Stream: true}},
		{`{"model":"m","stream":true,"stream_options":{"include_usage":true}}`, Request{Model: "m", Stream: true, IncludeUsage: true}},
		{`{"model":"m","max_tokens":10,"max_completion_tokens":20}`, Request{Model: "m", MaxTokens: 20}},
		{`{"model":"m","max_completion_tokens":20,"max_tokens":10}`, Request{Model: "m", MaxTokens: 20}},
		{`{"model":"m","max_tokens":null,"stream":null,"user":"u-1"}`, Request{Model: "m", User: "u-1"}},
		{`{"model":"caf\u00e9"}`, Request{Model: "café"}},
	}
	for _, tt := range tests {
		got, err := ParseRequest([]byte(tt.body))
		if err != nil {
			t.Errorf("ParseRequest(%s): %v", tt.body, err)
			continue
		}
		if diff := cmp.Diff(tt.want, *got, cmpopts.IgnoreUnexported(Request{})); diff != "" {
			t.Errorf("ParseRequest(%s) (-want +got):\n%s", tt.body, diff)
		}
	}
}

func TestParseRequestErrors(t *testing.T) {
	tests := []struct{ body, param, msg string }{
		{`{"model":`, "", "not valid JSON"},
		{`[1,2]`, "", "must be a JSON object"},
		{``, "", "not valid JSON"},
		{`{"model":"m",}`, "", "not valid JSON"},
		{`{"model":"m"} {}`, "", "not valid JSON"},
		{`{"model":"m","messages":[{"content":"a` + "\x01" + `"}]}`, "", "not valid JSON"},
		{`{"model":"m","messages":[{"content":"a\q"}]}`, "", "not valid JSON"},
		{`{"model":"m","n":01}`, "", "not valid JSON"},
		{`{"model":"m","x":[1,]}`, "", "not valid JSON"},
		{`{"model":"m","x":tru}`, "", "not valid JSON"},
		{`{"model" "m"}`, "", "not valid JSON"},
		{`{"messages":[]}`, "model", "provide a model"},
		{`{"model":""}`, "model", "provide a model"},
		{`{"model":3}`, "model", "must be a string"},
		{`{"model":"m","stream":"yes"}`, "stream", "wrong type"},
		{`{"model":"m","max_tokens":-1}`, "max_tokens", "non-negative"},
		{`{"model":"m","max_tokens":1.5}`, "max_tokens", "must be an integer"},
	}
	for _, tt := range tests {
		_, err := ParseRequest([]byte(tt.body))
		e, ok := err.(*Error)
		if !ok {
			t.Errorf("ParseRequest(%s) = %v, want an *Error", tt.body, err)
			continue
		}
		if e.Status != http.StatusBadRequest || e.Param != tt.param || !strings.Contains(e.Message, tt.msg) {
			t.Errorf("ParseRequest(%s) = %d param %q %q, want 400 param %q containing %q", tt.body, e.Status, e.Param, e.Message, tt.param, tt.msg)
		}
	}
}

func TestRewrite(t *testing.T) {
	tests := []struct {
		name, body, model string
		usage             bool
		want              string
	}{
		{"unchanged is the same bytes", `{"model":"m", "x":1}`, "m", false, `{"model":"m", "x":1}`},
		{"rename", `{ "model" : "alias", "messages":[] }`, "upstream/8b", false, `{ "model" : "upstream/8b", "messages":[] }`},
		{"usage added", `{"model":"m","stream":true}`, "m", true, `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`},
		{"usage merged", `{"stream_options":{"continuous_usage_stats":false},"model":"a","stream":true}`, "b", true,
			`{"stream_options":{"continuous_usage_stats":false,"include_usage":true},"model":"b","stream":true}`},
		{"usage already asked", `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`, "m", true,
			`{"model":"m","stream":true,"stream_options":{"include_usage":true}}`},
		{"rename after options", `{"stream_options":{},"model":"a"}`, "bb", true, `{"stream_options":{"include_usage":true},"model":"bb"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseRequest([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			got := r.Rewrite([]byte(tt.body), tt.model, tt.usage)
			if string(got) != tt.want {
				t.Errorf("Rewrite = %s, want %s", got, tt.want)
			}
			if !json.Valid(got) {
				t.Errorf("Rewrite made invalid JSON: %s", got)
			}
		})
	}
}

func TestWriteError(t *testing.T) {
	w := httptest.NewRecorder()
	WriteError(w, RateLimited("rate_limit_exceeded", "slow down", 7))
	if w.Code != 429 || w.Header().Get("Retry-After") != "7" || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("got %d %v", w.Code, w.Header())
	}
	want := `{"error":{"message":"slow down","type":"rate_limit_error","param":null,"code":"rate_limit_exceeded"}}`
	if w.Body.String() != want {
		t.Errorf("body %s, want %s", w.Body, want)
	}
	w = httptest.NewRecorder()
	WriteError(w, ModelNotFound("gpt-x"))
	var body struct {
		Error struct{ Message, Type, Param, Code string }
	}
	json.Unmarshal(w.Body.Bytes(), &body)
	if w.Code != 404 || body.Error.Code != "model_not_found" || body.Error.Param != "model" {
		t.Errorf("model not found: %d %+v", w.Code, body)
	}
}

func TestChunkScans(t *testing.T) {
	tests := []struct {
		chunk                           string
		token, usage, usageOnly, finish bool
	}{
		{`{"choices":[{"delta":{"role":"assistant","content":""}}]}`, false, false, false, false},
		{`{"choices":[{"delta":{"content":"Hi"},"finish_reason":null}],"usage":null}`, true, false, false, false},
		{`{"choices":[{"delta":{"content": "\"usage\":{"}}]}`, true, false, false, false},
		{`{"choices":[{"text":"x","finish_reason":"length"}]}`, true, false, false, true},
		{`{"choices":[{"delta":{},"finish_reason":"stop"}]}`, false, false, false, true},
		{`{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}`, false, true, true, false},
		{`{"choices": [ ], "usage": {"prompt_tokens":3}}`, false, true, true, false},
		{`{"choices":[{"delta":{"tool_calls":[{"id":"c"}]}}]}`, true, false, false, false},
		{`{"choices":[{"delta":{"reasoning_content":"hmm"}}]}`, true, false, false, false},
	}
	for _, tt := range tests {
		c := []byte(tt.chunk)
		if got := HasToken(c); got != tt.token {
			t.Errorf("HasToken(%s) = %v", tt.chunk, got)
		}
		if got := HasUsage(c); got != tt.usage {
			t.Errorf("HasUsage(%s) = %v", tt.chunk, got)
		}
		if got := IsUsageOnly(c); got != tt.usageOnly {
			t.Errorf("IsUsageOnly(%s) = %v", tt.chunk, got)
		}
		if got := HasFinish(c); got != tt.finish {
			t.Errorf("HasFinish(%s) = %v", tt.chunk, got)
		}
	}
}

// FuzzParseRequest checks that any body either fails with a 400 or parses,
// and that a rewrite of a parsed body is valid JSON carrying the new model.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{`{"model":"m"}`, `{"model":"a","stream":true,"stream_options":{"x":1}}`, `{"model":"\u0041","max_tokens":5}`, `{}`, `[]`, `"x"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := ParseRequest(body)
		if err != nil {
			if e, ok := err.(*Error); !ok || e.Status != 400 {
				t.Fatalf("error %v is not a 400", err)
			}
			return
		}
		out := r.Rewrite(body, "renamed", true)
		if !json.Valid(out) {
			t.Fatalf("rewrite of %q is invalid: %q", body, out)
		}
		r2, err := ParseRequest(out)
		if err != nil || r2.Model != "renamed" || !r2.IncludeUsage {
			t.Fatalf("rewrite of %q reads back as %+v, %v", body, r2, err)
		}
	})
}

// BenchmarkParseAndRewrite is a chat request's way through the parser:
// a short one and one with a long prompt, as agents and RAG send.
func BenchmarkParseAndRewrite(b *testing.B) {
	for _, size := range []struct {
		name    string
		repeats int
	}{{"1KB", 40}, {"32KB", 1200}} {
		body := []byte(`{"model":"default","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"` + strings.Repeat("Tell me about the weather. ", size.repeats) + `"}],"stream":true,"max_tokens":256}`)
		b.Run(size.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				var r Request
				if err := r.Parse(body); err != nil {
					b.Fatal(err)
				}
				r.Rewrite(body, "meta-llama/Llama-3.1-8B-Instruct", true)
			}
		})
	}
}

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

// The scanner accepts exactly what encoding/json does, and a value ends
// where the decoder's does. The seeds run with every go test; go test
// -fuzz FuzzScanMatchesJSONValid ./internal/openai explores further.
func FuzzScanMatchesJSONValid(f *testing.F) {
	for _, s := range []string{
		`{}`, `[]`, `""`, `0`, `-0`, `1.5e+3`, `-12.0E-1`, `true`, `false`, `null`,
		`{"a":[1,{"b":null}],"c":"\u00e9\n\"x\""}`, ` [ 1 , 2 ] `,
		`01`, `1.`, `.5`, `1e`, `-`, `+1`, `"\x"`, `"\u12"`, `"a` + "\x1f" + `"`, `[1,]`, `{"a" 1}`,
		`{"a":1,}`, `[1 2]`, `{1:2}`, `nul`, `truex`, `"unterminated`, `[[[[`, "\xff", `"\xff\xfe"`,
		strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth),
		strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		want := json.Valid(b)
		if got := valid(b); got != want {
			t.Fatalf("valid(%q) = %v, json.Valid says %v", b, got, want)
		}
		if !want {
			return
		}
		end, err := scanValue(b, 0)
		var raw json.RawMessage
		dec := json.NewDecoder(bytes.NewReader(b))
		if err != nil || dec.Decode(&raw) != nil || end != int(dec.InputOffset()) {
			t.Fatalf("scanValue(%q) = %d, %v; the decoder's value ends at %d", b, end, err, dec.InputOffset())
		}
	})
}
