package sim

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"gitea.mynodes.xyz/ilker/llmgw/internal/tokenize"
)

func TestWordsAreOneTokenEach(t *testing.T) {
	for _, w := range words {
		if n := tokenize.Count(" " + w); n != 1 {
			t.Errorf("%q is %d tokens, want 1", w, n)
		}
	}
}

func TestCompletionPrompt(t *testing.T) {
	tests := []struct {
		prompt     string
		wantTokens int
		wantErr    bool
	}{
		{`"Once upon a time"`, 4, false},
		{`["Once upon a time"]`, 4, false},
		{`[1, 2, 3, 4, 5]`, 5, false},
		{`[[1, 2, 3]]`, 3, false},
		{`["a", "b"]`, 0, true},
		{`[[1], [2]]`, 0, true},
		{`""`, 0, true},
		{`[]`, 0, true},
		{`42`, 0, true},
		{``, 0, true},
		{`[1.5]`, 0, true},
	}
	for _, tt := range tests {
		p, err := completionPrompt(json.RawMessage(tt.prompt), 16)
		if (err != nil) != tt.wantErr || p.tokens != tt.wantTokens {
			t.Errorf("completionPrompt(%s) = %d tokens, %v; want %d, error %v", tt.prompt, p.tokens, err, tt.wantTokens, tt.wantErr)
		}
	}
	// A string prompt and the same tokens as ids are different prompts, but
	// each is stable.
	a, _ := completionPrompt(json.RawMessage(`[7, 8, 9]`), 2)
	b, _ := completionPrompt(json.RawMessage(`[[7, 8, 9]]`), 2)
	if diff := cmp.Diff(a, b, cmp.AllowUnexported(promptInfo{})); diff != "" {
		t.Errorf("the same ids in two forms (-a +b):\n%s", diff)
	}
	if len(a.hashes) != 1 {
		t.Errorf("3 tokens in blocks of 2: %d full blocks, want 1", len(a.hashes))
	}
}

func TestBlockHashesAreChained(t *testing.T) {
	// Two prompts whose second blocks hold the same tokens but whose first
	// blocks differ must not share the second block's hash.
	x := newPromptHasher(2)
	y := newPromptHasher(2)
	for _, tok := range []string{"a", "b", "c", "d"} {
		x.addToken(tok)
	}
	for _, tok := range []string{"z", "b", "c", "d"} {
		y.addToken(tok)
	}
	px, py := x.result(), y.result()
	if px.hashes[1] == py.hashes[1] {
		t.Error("second blocks hash alike despite different first blocks")
	}
	// Token boundaries matter: "ab"+"c" is not "a"+"bc".
	u, v := newPromptHasher(16), newPromptHasher(16)
	u.addToken("ab")
	u.addToken("c")
	v.addToken("a")
	v.addToken("bc")
	if u.result().digest == v.result().digest {
		t.Error(`"ab","c" and "a","bc" hash alike`)
	}
}

// FuzzChatRequest feeds arbitrary bodies to the chat endpoint: every one
// gets a JSON answer or an OpenAI error, never a panic.
func FuzzChatRequest(f *testing.F) {
	for _, s := range []string{
		`{"messages":[{"role":"user","content":"hi"}]}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url"}]}],"max_tokens":3,"stream":true,"stream_options":{"include_usage":true}}`,
		`{"messages":[{"role":"user","content":null}],"max_completion_tokens":-1}`,
		`{"model":"x","messages":[]}`,
		`{"messages":[{"role":"user","content":"hi"}],"n":0,"seed":-5,"ignore_eos":true,"max_tokens":2}`,
		`[]`, `{`, `null`,
	} {
		f.Add(s)
	}
	s := New(Config{FixedTiming: true, MaxModelLen: 512})
	f.Cleanup(s.Close)
	f.Fuzz(func(t *testing.T, body string) {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body)))
		switch ct := rec.Header().Get("Content-Type"); {
		case rec.Code == 200 && ct == "text/event-stream":
			if !strings.HasSuffix(rec.Body.String(), "data: [DONE]\n\n") {
				t.Fatalf("stream without [DONE]: %q", rec.Body.String())
			}
		case ct == "application/json":
			var v map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
				t.Fatalf("status %d, body not JSON: %q", rec.Code, rec.Body.String())
			}
			if _, isErr := v["error"]; isErr != (rec.Code != 200) {
				t.Fatalf("status %d with body %q", rec.Code, rec.Body.String())
			}
		default:
			t.Fatalf("status %d, Content-Type %q", rec.Code, ct)
		}
	})
}
