package openai

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestParseRequest(t *testing.T) {
	tests := []parseCase{
		{`{"model":"m","messages":[]}`, Request{Model: "m"}},
		{` { "messages" : [{"content":"{\"model\":\"x\"}"}], "model" : "m" , "stream":true}`, Request{Model: "m", Stream: true}},
		{`{"model":"m","stream":true,"stream_options":{"include_usage":true}}`, Request{Model: "m", Stream: true, IncludeUsage: true}},
		{`{"model":"m","stream_options":null,"stream":false}`, Request{Model: "m"}},
		{`{"model":"m","stream_options":{"include_usage":null,"x":{"include_usage":true}}}`, Request{Model: "m"}},
		{`{"model":"m","max_tokens":20,"max_completion_tokens":20}`, Request{Model: "m", MaxTokens: 20}},
		{`{"model":"m","max_completion_tokens":20}`, Request{Model: "m", MaxTokens: 20}},
		{`{"model":"m","max_completion_tokens":null,"max_tokens":10}`, Request{Model: "m", MaxTokens: 10}},
		{`{"model":"m","max_completion_tokens":7,"max_tokens":null}`, Request{Model: "m", MaxTokens: 7}},
		{`{"model":"m","max_completion_tokens":0,"max_tokens":-0}`, Request{Model: "m"}},
		{`{"model":"m","n":4,"max_tokens":10}`, Request{Model: "m", MaxTokens: 10, Choices: 4}},
		{`{"model":"m","n":2,"best_of":5}`, Request{Model: "m", Choices: 5}},
		{`{"model":"m","best_of":1,"n":3}`, Request{Model: "m", Choices: 3}},
		{`{"model":"m","n":null,"best_of":null}`, Request{Model: "m", Choices: 1}},
		{`{"model":"m","n":128}`, Request{Model: "m", Choices: MaxChoices}},
		{`{"model":"m","cache_salt":"team-a"}`, Request{Model: "m", CacheSalt: "team-a"}},
		{`{"model":"m","cache_salt":null}`, Request{Model: "m"}},
		{`{"model":"m","prompt_cache_key":"conv-1"}`, Request{Model: "m", PromptCacheKey: "conv-1"}},
		{`{"prompt_cache_key":null,"model":"m"}`, Request{Model: "m"}},
		{`{"model":"m","max_tokens":-0}`, Request{Model: "m"}},
		{`{"model":"m","max_tokens":2147483647}`, Request{Model: "m", MaxTokens: MaxTokensLimit}},
		{`{"model":"m","max_tokens":null,"stream":null,"user":"u-1"}`, Request{Model: "m", User: "u-1"}},
		{`{"model":"m","user":null}`, Request{Model: "m"}},
		{`{"model":"caf\u00e9"}`, Request{Model: "café"}},
		// Invalid UTF-8 reads as decoders read it, as U+FFFD.
		{"{\"model\":\"m\xff\"}", Request{Model: "m\uFFFD"}},
		// Keys that only look like routing fields.
		{`{"model":"m","models":"x","stream_option":{},"max_tokens_":5,"us\u0065r_":"x","Messages":[]}`, Request{Model: "m"}},
		{`{"model":"m","stream_options":{"include_usage_":true,"Stream":true}}`, Request{Model: "m"}},
	}
	checkParsed(t, tests)
}

// parseCase is a body and the Request it parses to.
type parseCase struct {
	body string
	want Request
}

// checkParsed checks that each body parses to its Request.
func checkParsed(t *testing.T, tests []parseCase) {
	t.Helper()
	for _, tt := range tests {
		if tt.want.Choices == 0 {
			tt.want.Choices = 1 // a body without n or best_of asks one answer
		}
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

// Keys are read as decoders read them, escapes decoded: a body whose key
// is spelled with an escape is routed, limited and billed by the value
// every backend serves.
func TestParseRequestEscapedKeys(t *testing.T) {
	tests := []parseCase{
		{`{"mod\u0065l":"premium"}`, Request{Model: "premium"}},
		{`{"model":"m","max_tok\u0065ns":100000}`, Request{Model: "m", MaxTokens: 100000}},
		{`{"model":"m","max_completion_tokens":5,"\u006dax_completion_tokens\u0020":7}`, Request{Model: "m", MaxTokens: 5}},
		{`{"model":"m","str\u0065am":true}`, Request{Model: "m", Stream: true}},
		{`{"model":"m","stream_opti\u006fns":{"include\u005fusage":true}}`, Request{Model: "m", IncludeUsage: true}},
		{`{"model":"m","\u0075\u0073\u0065\u0072":"u"}`, Request{Model: "m", User: "u"}},
		{`{"model":"m","\/user":"u","user\ud800":"v"}`, Request{Model: "m"}},
	}
	checkParsed(t, tests)
}

func TestParseRequestErrors(t *testing.T) {
	tests := []struct {
		name, body string
		want       Error // Message is matched as a substring
	}{
		{"truncated", `{"model":`, Error{Message: "not valid JSON"}},
		{"array", `[1,2]`, Error{Message: "must be a JSON object"}},
		{"empty", ``, Error{Message: "not valid JSON"}},
		{"trailing comma", `{"model":"m",}`, Error{Message: "not valid JSON"}},
		{"two values", `{"model":"m"} {}`, Error{Message: "not valid JSON"}},
		{"control character", `{"model":"m","messages":[{"content":"a` + "\x01" + `"}]}`, Error{Message: "not valid JSON"}},
		{"bad escape", `{"model":"m","messages":[{"content":"a\q"}]}`, Error{Message: "not valid JSON"}},
		{"leading zero", `{"model":"m","n":01}`, Error{Message: "not valid JSON"}},
		{"array trailing comma", `{"model":"m","x":[1,]}`, Error{Message: "not valid JSON"}},
		{"bad literal", `{"model":"m","x":tru}`, Error{Message: "not valid JSON"}},
		{"no colon", `{"model" "m"}`, Error{Message: "not valid JSON"}},
		{"bad stream_options", `{"model":"m","stream_options":{"include_usage":tru}}`, Error{Message: "not valid JSON"}},
		{"field fault before bad syntax", `{"model":3,"model":"m","stream":"x",]`, Error{Message: "not valid JSON"}},
		{"no model", `{"messages":[]}`, Error{Param: "model", Message: "You must provide a model parameter."}},
		{"empty model", `{"model":""}`, Error{Param: "model", Message: "You must provide a model parameter."}},
		{"negative", `{"model":"m","max_tokens":-1}`, Error{Param: "max_tokens", Code: "integer_below_min_value",
			Message: "Invalid 'max_tokens': integer below minimum value. Expected a value >= 0, but got -1 instead."}},
		// Bounds that disagree: one backend heeds max_tokens, another
		// max_completion_tokens, so neither can be what is reserved.
		{"bounds disagree", `{"model":"m","max_completion_tokens":1,"max_tokens":1000000}`,
			Error{Param: "max_completion_tokens", Message: "max_tokens (1000000) and max_completion_tokens (1) disagree"}},
		{"bounds disagree, other order", `{"model":"m","max_tokens":10,"max_completion_tokens":20}`, Error{Param: "max_completion_tokens", Message: "disagree"}},
		{"a zero bound disagrees", `{"model":"m","max_completion_tokens":0,"max_tokens":10}`, Error{Param: "max_completion_tokens", Message: "disagree"}},
		{"no answers", `{"model":"m","n":0}`, Error{Param: "n", Code: "integer_below_min_value",
			Message: "Invalid 'n': integer below minimum value. Expected a value >= 1, but got 0 instead."}},
		{"minus zero answers", `{"model":"m","n":-0}`, Error{Param: "n", Code: "integer_below_min_value"}},
		{"too many answers", `{"model":"m","n":129}`, Error{Param: "n", Code: "integer_above_max_value",
			Message: "Invalid 'n': integer above maximum value. Expected a value <= 128, but got 129 instead."}},
		{"best_of too many", `{"model":"m","best_of":1000}`, Error{Param: "best_of", Code: "integer_above_max_value"}},
		{"n a string", `{"model":"m","n":"2"}`, Error{Param: "n", Code: "invalid_type"}},
		{"n a decimal", `{"model":"m","n":2.0}`, Error{Param: "n", Code: "invalid_type"}},
		{"n twice", `{"model":"m","n":1,"n":100}`, Error{Param: "n", Message: "Duplicate key 'n'"}},
		{"n in another case", `{"model":"m","N":100}`, Error{Param: "n", Message: "differs from 'n' only in case"}},
		{"cache_salt a number", `{"model":"m","cache_salt":5}`, Error{Param: "cache_salt", Code: "invalid_type"}},
		{"cache_salt twice", `{"model":"m","cache_salt":"a","cache_salt":"b"}`, Error{Param: "cache_salt", Message: "Duplicate key"}},
		{"prompt_cache_key a number", `{"model":"m","prompt_cache_key":5}`, Error{Param: "prompt_cache_key", Code: "invalid_type"}},
		{"prompt_cache_key twice", `{"model":"m","prompt_cache_key":"a","prompt_cache_key":"b"}`, Error{Param: "prompt_cache_key", Message: "Duplicate key"}},
		{"prompt_cache_key in another case", `{"model":"m","Prompt_Cache_Key":"a"}`, Error{Param: "prompt_cache_key", Message: "differs from 'prompt_cache_key' only in case"}},
		{"prompt_cache_key escaped in another case", `{"model":"m","prompt_cache_\u004bey":"a"}`, Error{Param: "prompt_cache_key", Message: "only in case"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkBadRequest(t, tt.body, tt.want)
		})
	}
}

// checkBadRequest checks that body is refused with a 400 *Error like
// want, whose Message is matched as a substring.
func checkBadRequest(t *testing.T, body string, want Error) {
	t.Helper()
	_, err := ParseRequest([]byte(body))
	e, ok := err.(*Error)
	if !ok {
		t.Fatalf("ParseRequest(%s) = %v, want an *Error", body, err)
	}
	if !strings.Contains(e.Message, want.Message) {
		want.Message = e.Message // reported below as a mismatch anyway
		t.Errorf("ParseRequest(%s) message %q, want it to contain %q", body, e.Message, want.Message)
	}
	want.Status, want.Type = http.StatusBadRequest, "invalid_request_error"
	if diff := cmp.Diff(want, *e, cmpopts.IgnoreFields(Error{}, "Message")); diff != "" {
		t.Errorf("ParseRequest(%s) (-want +got):\n%s", body, diff)
	}
}

// A valid body with a field of the wrong type is told which field and
// what it must be, as OpenAI words it.
func TestParseRequestInvalidType(t *testing.T) {
	tests := []struct{ body, param, want, got string }{
		{`{"model":3}`, "model", "a string", "an integer"},
		{`{"model":null}`, "model", "a string", "null"},
		{`{"model":["m"]}`, "model", "a string", "an array"},
		{`{"model":"m","stream":"yes"}`, "stream", "a boolean", "a string"},
		{`{"model":"m","stream":1}`, "stream", "a boolean", "an integer"},
		{`{"model":"m","stream_options":true}`, "stream_options", "an object or null", "a boolean"},
		{`{"model":"m","stream_options":[]}`, "stream_options", "an object or null", "an array"},
		{`{"model":"m","stream_options":{"include_usage":"true"}}`, "stream_options.include_usage", "a boolean", "a string"},
		{`{"model":"m","stream_options":{"include_usage":{}}}`, "stream_options.include_usage", "a boolean", "an object"},
		{`{"model":"m","max_tokens":"5"}`, "max_tokens", "an integer", "a string"},
		{`{"model":"m","max_tokens":1.5}`, "max_tokens", "an integer", "a decimal number"},
		{`{"model":"m","max_tokens":1.0}`, "max_tokens", "an integer", "a decimal number"},
		{`{"model":"m","max_completion_tokens":1e3}`, "max_completion_tokens", "an integer", "a decimal number"},
		{`{"model":"m","max_completion_tokens":true}`, "max_completion_tokens", "an integer", "a boolean"},
		{`{"model":"m","user":42}`, "user", "a string", "an integer"},
		{`{"model":"m","user":{"id":"u"}}`, "user", "a string", "an object"},
	}
	for _, tt := range tests {
		checkBadRequest(t, tt.body, Error{Param: tt.param, Code: "invalid_type",
			Message: "Invalid type for '" + tt.param + "': expected " + tt.want + ", but got " + tt.got + " instead."})
	}
}

// A routing field given twice, or spelled so that Go's encoding/json
// (which folds case) and exact-key decoders read different values, is
// refused, naming the field.
func TestParseRequestAmbiguousKeys(t *testing.T) {
	dup := func(f string) string { return "Duplicate key '" + f + "'" }
	fold := func(f string) string { return "differs from '" + f + "' only in case" }
	tests := []struct{ body, param, msg string }{
		{`{"model":"cheap","model":"premium"}`, "model", dup("model")},
		{`{"model":"cheap","mod\u0065l":"premium"}`, "model", dup("model")},
		{`{"model":"m","stream":false,"stream":true}`, "stream", dup("stream")},
		{`{"model":"m","max_tokens":1,"max_tok\u0065ns":100000}`, "max_tokens", dup("max_tokens")},
		{`{"model":"m","max_completion_tokens":1,"max_completion_tokens":null}`, "max_completion_tokens", dup("max_completion_tokens")},
		{`{"model":"m","user":"a","user":"b"}`, "user", dup("user")},
		{`{"model":"m","stream_options":null,"stream_options":{}}`, "stream_options", dup("stream_options")},
		{`{"model":"m","stream_options":{"include_usage":false,"include_usage":true}}`, "stream_options.include_usage", dup("include_usage")},
		{`{"model":"cheap","Model":"premium"}`, "model", fold("model")},
		{`{"MODEL":"premium","model":"cheap"}`, "model", fold("model")},
		{`{"model":"m","\u017ftream":true}`, "stream", fold("stream")},
		{"{\"model\":\"m\",\"\u017ftream\":true}", "stream", fold("stream")},
		{`{"model":"m","max_\u212Aens":1}`, "", ""}, // not a fold of max_tokens: too short
		{`{"model":"m","max_to\u212Aens":100000}`, "max_tokens", fold("max_tokens")},
		{`{"model":"m","Max_Completion_Tokens":100000}`, "max_completion_tokens", fold("max_completion_tokens")},
		{`{"model":"m","USER":"u"}`, "user", fold("user")},
		{`{"model":"m","Stream_Options":{"include_usage":true}}`, "stream_options", fold("stream_options")},
		{`{"model":"m","stream_options":{"Include_Usage":true}}`, "stream_options.include_usage", fold("include_usage")},
		{`{"model":"m","stream_options":{"include_u\u017fage":true}}`, "stream_options.include_usage", fold("include_usage")},
	}
	for _, tt := range tests {
		if tt.param == "" {
			if _, err := ParseRequest([]byte(tt.body)); err != nil {
				t.Errorf("ParseRequest(%s): %v", tt.body, err)
			}
			continue
		}
		checkBadRequest(t, tt.body, Error{Param: tt.param, Message: tt.msg})
	}
}

// max_tokens and max_completion_tokens are bounded, so that a token
// reservation of the prompt and the answer cannot overflow.
func TestParseRequestMaxTokensLimit(t *testing.T) {
	above := func(f, got string) Error {
		return Error{Param: f, Code: "integer_above_max_value",
			Message: "Invalid '" + f + "': integer above maximum value. Expected a value <= 2147483647, but got " + got + " instead."}
	}
	checkBadRequest(t, `{"model":"m","max_tokens":2147483648}`, above("max_tokens", "2147483648"))
	checkBadRequest(t, `{"model":"m","max_tokens":9223372036854775807}`, above("max_tokens", "9223372036854775807"))
	checkBadRequest(t, `{"model":"m","max_completion_tokens":9223372036854775807}`, above("max_completion_tokens", "9223372036854775807"))
	checkBadRequest(t, `{"model":"m","max_tokens":1`+strings.Repeat("0", 40)+`}`, above("max_tokens", "100000000000000000000..."))
	checkBadRequest(t, `{"model":"m","max_tokens":-9223372036854775808}`, Error{Param: "max_tokens", Code: "integer_below_min_value",
		Message: "Invalid 'max_tokens': integer below minimum value. Expected a value >= 0, but got -9223372036854775808 instead."})
}

// Only two characters outside ASCII fold to an ASCII letter, which
// foldEqual relies on.
func TestFoldToASCII(t *testing.T) {
	var got []rune
	for r := rune(utf8.RuneSelf); r <= unicode.MaxRune; r++ {
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if f < utf8.RuneSelf {
				got = append(got, r)
				break
			}
		}
	}
	if diff := cmp.Diff([]rune{'\u017f', '\u212a'}, got); diff != "" {
		t.Errorf("runes folding to ASCII (-want +got):\n%s", diff)
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
		{`{"choices":[{"delta":{"reasoning":"hmm"}}]}`, true, false, false, false},
		{`{"choices":[{"delta":{"thinking_blocks":[{"type":"thinking","signature":"s"}]}}]}`, false, false, false, false},
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
				r.Rewrite(body, Edits{Model: "meta-llama/Llama-3.1-8B-Instruct", IncludeUsage: true, CacheSalt: "3f9a0c1e5b7d2a4c6e8f0a1b3c5d7e9f"})
			}
		})
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

func TestParseRequestPrompt(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`, `[{"role":"user","content":"hi"}]`},
		{`{"prompt":"Once upon","model":"m"}`, `"Once upon"`},
		{`{"model":"m","input":"x"}`, ``},
		{`{"model":"m","messages":[1],"messages":[2]}`, `[2]`}, // the last given, as most decoders keep
		{`{"model":"m","x":{"messages":[1]}}`, ``},             // only at the top level
	} {
		var r Request
		body := []byte(tc.body)
		if err := r.Parse(body); err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		if got := string(r.Prompt(body)); got != tc.want {
			t.Errorf("Prompt(%s) = %q, want %q", tc.body, got, tc.want)
		}
	}
}
