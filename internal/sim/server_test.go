package sim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"gitea.mynodes.xyz/ilker/llmgw/internal/tokenize"
)

// fast is a zero-latency replica's timing.
var fast = Config{FixedTiming: true}

func newTestServer(t *testing.T, cfg Config) (*Server, *httptest.Server) {
	t.Helper()
	s := New(cfg)
	ts := httptest.NewServer(s)
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
		s.Close()
	})
	return s, ts
}

func post(t *testing.T, ctx context.Context, url string, body any) *http.Response {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	return resp
}

// stream is a read SSE body: each data payload before [DONE], whether
// [DONE] came, and the error that ended reading early, if any.
type stream struct {
	chunks []chunk
	done   bool
	err    error
}

// chunk is the part of a streamed chunk the tests look at, chat and
// completions alike.
type chunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta *struct {
			Role    string  `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		Text         *string `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
}

// token is the output text a chunk carries, and whether it carries any.
func (c chunk) token() (string, bool) {
	if len(c.Choices) == 0 {
		return "", false
	}
	ch := c.Choices[0]
	switch {
	case ch.Delta != nil && ch.Delta.Content != nil:
		return *ch.Delta.Content, true
	case ch.Text != nil && *ch.Text != "":
		return *ch.Text, true
	}
	return "", false
}

func readStream(t *testing.T, r io.Reader) stream {
	t.Helper()
	var st stream
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("SSE line %q is not data", line)
		}
		if st.done {
			t.Fatalf("data after [DONE]: %q", data)
		}
		if data == "[DONE]" {
			st.done = true
			continue
		}
		var c chunk
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		st.chunks = append(st.chunks, c)
	}
	st.err = sc.Err()
	return st
}

// answer is a non-streamed answer, chat or completions.
type answer struct {
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Message *struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
		Text         *string `json:"text"`
		FinishReason string  `json:"finish_reason"`
	} `json:"choices"`
	Usage usage `json:"usage"`
}

func (a answer) text() string {
	if a.Choices[0].Message != nil {
		return a.Choices[0].Message.Content
	}
	return *a.Choices[0].Text
}

func decode[T any](t *testing.T, resp *http.Response, wantStatus int) T {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != wantStatus {
		t.Fatalf("status %d, want %d; body %s", resp.StatusCode, wantStatus, b)
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("body %s: %v", b, err)
	}
	return v
}

func chatBody(prompt string, extra map[string]any) map[string]any {
	b := map[string]any{"model": DefaultModel, "messages": []map[string]any{{"role": "user", "content": prompt}}}
	for k, v := range extra {
		b[k] = v
	}
	return b
}

func TestStreamShape(t *testing.T) {
	_, ts := newTestServer(t, fast)
	ctx := t.Context()
	for _, ep := range []string{"chat/completions", "completions"} {
		for _, includeUsage := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/include_usage=%v", ep, includeUsage), func(t *testing.T) {
				body := map[string]any{"model": DefaultModel, "max_tokens": 40, "stream": true}
				if ep == "chat/completions" {
					body = chatBody("Tell me about continuous batching.", body)
				} else {
					body["prompt"] = "Tell me about continuous batching."
				}
				if includeUsage {
					body["stream_options"] = map[string]any{"include_usage": true}
				}
				resp := post(t, ctx, ts.URL+"/v1/"+ep, body)
				if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
					t.Errorf("Content-Type %q", ct)
				}
				st := readStream(t, resp.Body)
				resp.Body.Close()
				if st.err != nil || !st.done {
					t.Fatalf("stream ended with %v, [DONE] %v", st.err, st.done)
				}

				// The same request unstreamed gives the same text.
				delete(body, "stream")
				delete(body, "stream_options")
				whole := decode[answer](t, post(t, ctx, ts.URL+"/v1/"+ep, body), http.StatusOK)

				wantObject := "chat.completion.chunk"
				if ep == "completions" {
					wantObject = "text_completion"
				}
				var text strings.Builder
				tokens, finishes, usages := 0, 0, 0
				for i, c := range st.chunks {
					if c.Object != wantObject || c.Model != DefaultModel || c.ID != st.chunks[0].ID {
						t.Errorf("chunk %d: object %q, model %q, id %q", i, c.Object, c.Model, c.ID)
					}
					if c.Usage != nil {
						usages++
						if len(c.Choices) != 0 || i != len(st.chunks)-1 {
							t.Errorf("usage chunk %d of %d has %d choices; want the last, with none", i, len(st.chunks), len(c.Choices))
						}
						if diff := cmp.Diff(whole.Usage, *c.Usage); diff != "" {
							t.Errorf("streamed usage differs from unstreamed (-unstreamed +streamed):\n%s", diff)
						}
						continue
					}
					if tok, ok := c.token(); ok {
						tokens++
						if n := tokenize.Count(tok); n != 1 {
							t.Errorf("chunk %d carries %q, %d tokens; want 1", i, tok, n)
						}
						text.WriteString(tok)
					}
					if ep == "chat/completions" && (i == 0) != (c.Choices[0].Delta.Role == "assistant") {
						t.Errorf("chunk %d: role %q; want assistant on the first chunk only", i, c.Choices[0].Delta.Role)
					}
					if fr := c.Choices[0].FinishReason; fr != nil {
						finishes++
						if *fr != whole.Choices[0].FinishReason {
							t.Errorf("finish_reason %q, unstreamed %q", *fr, whole.Choices[0].FinishReason)
						}
					}
				}
				if want := map[bool]int{false: 0, true: 1}[includeUsage]; usages != want {
					t.Errorf("%d usage chunks, want %d", usages, want)
				}
				if finishes != 1 {
					t.Errorf("%d chunks with a finish_reason, want 1", finishes)
				}
				if tokens != whole.Usage.CompletionTokens {
					t.Errorf("%d token chunks, usage says %d", tokens, whole.Usage.CompletionTokens)
				}
				if text.String() != whole.text() {
					t.Errorf("streamed text %q, unstreamed %q", text.String(), whole.text())
				}
			})
		}
	}
}

func TestOutputLength(t *testing.T) {
	_, ts := newTestServer(t, fast)
	ctx := t.Context()
	url := ts.URL + "/v1/chat/completions"

	lengths := map[int]bool{}
	for i := range 20 {
		a := decode[answer](t, post(t, ctx, url, chatBody(fmt.Sprintf("question %d", i), map[string]any{"max_tokens": 30})), 200)
		n := a.Usage.CompletionTokens
		lengths[n] = true
		if n < 1 || n > 30 {
			t.Errorf("%d completion tokens for max_tokens 30", n)
		}
		if got := tokenize.Count(a.text()); got != n {
			t.Errorf("text %q counts %d tokens, usage says %d", a.text(), got, n)
		}
		if want := map[bool]string{true: "length", false: "stop"}[n == 30]; a.Choices[0].FinishReason != want {
			t.Errorf("%d of 30 tokens: finish_reason %q, want %q", n, a.Choices[0].FinishReason, want)
		}
	}
	if len(lengths) < 5 {
		t.Errorf("20 prompts gave only %d distinct lengths: %v", len(lengths), lengths)
	}

	for _, field := range []string{"max_tokens", "max_completion_tokens"} {
		a := decode[answer](t, post(t, ctx, url, chatBody("hi", map[string]any{field: 77, "ignore_eos": true})), 200)
		if a.Usage.CompletionTokens != 77 || a.Choices[0].FinishReason != "length" {
			t.Errorf("ignore_eos with %s 77: %d tokens, finish_reason %q", field, a.Usage.CompletionTokens, a.Choices[0].FinishReason)
		}
	}
	a := decode[answer](t, post(t, ctx, url, chatBody("no limit given", nil)), 200)
	if n := a.Usage.CompletionTokens; n < 1 || n > DefaultMaxTokens {
		t.Errorf("no max_tokens: %d tokens, want 1 to %d", n, DefaultMaxTokens)
	}
}

func TestDeterminism(t *testing.T) {
	get := func(seed int64, prompt string, reqSeed any) answer {
		_, ts := newTestServer(t, Config{FixedTiming: true, Seed: seed})
		extra := map[string]any{"max_tokens": 50}
		if reqSeed != nil {
			extra["seed"] = reqSeed
		}
		return decode[answer](t, post(t, t.Context(), ts.URL+"/v1/chat/completions", chatBody(prompt, extra)), 200)
	}
	a, b := get(1, "same prompt", nil), get(1, "same prompt", nil)
	if diff := cmp.Diff(a.text(), b.text()); diff != "" || a.Usage != b.Usage {
		t.Errorf("same request, same seed, on two replicas: texts differ (-a +b):\n%s", diff)
	}
	for name, other := range map[string]answer{
		"other prompt":       get(1, "another prompt", nil),
		"other replica seed": get(2, "same prompt", nil),
		"request seed":       get(1, "same prompt", 7),
	} {
		if other.text() == a.text() {
			t.Errorf("%s: same text %q", name, a.text())
		}
	}
}

func TestEmbeddings(t *testing.T) {
	_, ts := newTestServer(t, fast)
	url := ts.URL + "/v1/embeddings"
	type resp struct {
		Object string `json:"object"`
		Data   []struct {
			Object    string    `json:"object"`
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
			TotalTokens  int `json:"total_tokens"`
		} `json:"usage"`
	}
	inputs := []string{"The quick brown fox.", "jumps over the lazy dog", "The quick brown fox."}
	r := decode[resp](t, post(t, t.Context(), url, map[string]any{"model": DefaultModel, "input": inputs}), 200)
	if len(r.Data) != 3 {
		t.Fatalf("%d vectors, want 3", len(r.Data))
	}
	want := 0
	for _, in := range inputs {
		want += tokenize.Count(in)
	}
	if r.Usage.PromptTokens != want || r.Usage.TotalTokens != want {
		t.Errorf("usage %+v, want %d tokens", r.Usage, want)
	}
	for i, d := range r.Data {
		var norm float64
		for _, x := range d.Embedding {
			norm += float64(x) * float64(x)
		}
		if d.Index != i || len(d.Embedding) != DefaultEmbeddingDims || norm < 0.999 || norm > 1.001 {
			t.Errorf("vector %d: index %d, %d dims, squared norm %v", i, d.Index, len(d.Embedding), norm)
		}
	}
	if !cmp.Equal(r.Data[0].Embedding, r.Data[2].Embedding) || cmp.Equal(r.Data[0].Embedding, r.Data[1].Embedding) {
		t.Error("equal inputs must give equal vectors, different inputs different ones")
	}
	one := decode[resp](t, post(t, t.Context(), url, map[string]any{"input": "single", "dimensions": 8}), 200)
	if len(one.Data) != 1 || len(one.Data[0].Embedding) != 8 {
		t.Errorf("single input with 8 dimensions: %+v", one.Data)
	}
}

func TestBadRequests(t *testing.T) {
	_, ts := newTestServer(t, Config{FixedTiming: true, MaxModelLen: 100})
	long := strings.Repeat("word ", 200)
	tests := []struct {
		name       string
		method     string
		path       string
		body       string
		wantStatus int
		wantType   string
		wantParam  *string
		wantCode   *string
	}{
		{"not JSON", "POST", "/v1/chat/completions", `{"model":`, 400, "invalid_request_error", nil, nil},
		{"no messages", "POST", "/v1/chat/completions", `{"messages":[]}`, 400, "invalid_request_error", ptr("messages"), nil},
		{"bad content", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":5}]}`, 400, "invalid_request_error", ptr("messages[0].content"), ptr("invalid_type")},
		{"unknown model", "POST", "/v1/chat/completions", `{"model":"gpt-9","messages":[{"role":"user","content":"hi"}]}`, 404, "invalid_request_error", ptr("model"), ptr("model_not_found")},
		{"n=2", "POST", "/v1/chat/completions", `{"n":2,"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", ptr("n"), nil},
		{"max_tokens 0", "POST", "/v1/chat/completions", `{"max_tokens":0,"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", ptr("max_tokens"), nil},
		{"too long", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"` + long + `"}]}`, 400, "invalid_request_error", ptr("messages"), ptr("context_length_exceeded")},
		{"prompt and max_tokens too long", "POST", "/v1/completions", `{"prompt":"hello","max_tokens":100}`, 400, "invalid_request_error", ptr("prompt"), ptr("context_length_exceeded")},
		{"empty prompt", "POST", "/v1/completions", `{"prompt":""}`, 400, "invalid_request_error", ptr("prompt"), nil},
		{"two prompts", "POST", "/v1/completions", `{"prompt":["a","b"]}`, 400, "invalid_request_error", ptr("prompt"), nil},
		{"bad embedding format", "POST", "/v1/embeddings", `{"input":"a","encoding_format":"hex"}`, 400, "invalid_request_error", ptr("encoding_format"), nil},
		{"GET a POST endpoint", "GET", "/v1/chat/completions", ``, 405, "invalid_request_error", nil, nil},
		{"unknown path", "GET", "/v2/nothing", ``, 404, "invalid_request_error", nil, ptr("unknown_url")},
		{"bad faults", "POST", "/sim/faults", `{"error_rate":2}`, 400, "invalid_request_error", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), tt.method, ts.URL+tt.path, strings.NewReader(tt.body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			type body struct {
				Error struct {
					Message string  `json:"message"`
					Type    string  `json:"type"`
					Param   *string `json:"param"`
					Code    *string `json:"code"`
				} `json:"error"`
			}
			got := decode[body](t, resp, tt.wantStatus).Error
			if got.Message == "" || got.Type != tt.wantType || !cmp.Equal(got.Param, tt.wantParam) || !cmp.Equal(got.Code, tt.wantCode) {
				t.Errorf("error %+v (param %v, code %v); want type %q, param %v, code %v",
					got, deref(got.Param), deref(got.Code), tt.wantType, deref(tt.wantParam), deref(tt.wantCode))
			}
		})
	}
}

// A body that is valid JSON with a value of the wrong type is told which
// field and what it must be, as OpenAI words it; only a body that is not
// JSON is told so.
func TestDecodingErrors(t *testing.T) {
	_, ts := newTestServer(t, fast)
	tests := []struct {
		path, body string
		want       apiError
	}{
		{"/v1/chat/completions", `{"messages":"hi"}`,
			apiError{Param: "messages", Code: "invalid_type", Message: "Invalid type for 'messages': expected an array, but got a string instead."}},
		{"/v1/chat/completions", `{"messages":[3]}`,
			apiError{Param: "messages[0]", Code: "invalid_type", Message: "Invalid type for 'messages[0]': expected an object, but got a number instead."}},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"a"},{"role":7,"content":"b"}]}`,
			apiError{Param: "messages[1].role", Code: "invalid_type", Message: "Invalid type for 'messages[1].role': expected a string, but got a number instead."}},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":false}]}]}`,
			apiError{Param: "messages[0].content[1].text", Code: "invalid_type", Message: "Invalid type for 'messages[0].content[1].text': expected a string, but got a boolean instead."}},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"a"}],"max_tokens":"5"}`,
			apiError{Param: "max_tokens", Code: "invalid_type", Message: "Invalid type for 'max_tokens': expected an integer, but got a string instead."}},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"a"}],"max_tokens":1.5}`,
			apiError{Param: "max_tokens", Code: "invalid_type", Message: "Invalid type for 'max_tokens': expected an integer, but got a decimal number instead."}},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"a"}],"max_tokens":99999999999999999999}`,
			apiError{Param: "max_tokens", Code: "integer_out_of_range", Message: "Invalid 'max_tokens': 99999999999999999999 is out of range for an integer."}},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"a"}],"stream":"yes"}`,
			apiError{Param: "stream", Code: "invalid_type", Message: "Invalid type for 'stream': expected a boolean, but got a string instead."}},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"a"}],"stream_options":{"include_usage":1}}`,
			apiError{Param: "stream_options.include_usage", Code: "invalid_type", Message: "Invalid type for 'stream_options.include_usage': expected a boolean, but got a number instead."}},
		{"/v1/completions", `{"prompt":"a","model":["m"]}`,
			apiError{Param: "model", Code: "invalid_type", Message: "Invalid type for 'model': expected a string, but got an array instead."}},
		{"/v1/completions", `{"prompt":"a","stream_options":true}`,
			apiError{Param: "stream_options", Code: "invalid_type", Message: "Invalid type for 'stream_options': expected an object, but got a boolean instead."}},
		{"/v1/embeddings", `{"input":"a","dimensions":{}}`,
			apiError{Param: "dimensions", Code: "invalid_type", Message: "Invalid type for 'dimensions': expected an integer, but got an object instead."}},
		{"/v1/embeddings", `["a"]`, apiError{Message: "The request body must be a JSON object."}},
		{"/v1/embeddings", `{"input":"a",}`, apiError{Message: "The request body is not valid JSON: invalid character '}' looking for beginning of object key string"}},
		{"/v1/chat/completions", `{"messages":[`, apiError{Message: "The request body is not valid JSON: unexpected end of JSON input"}},
	}
	for _, tt := range tests {
		resp, err := http.Post(ts.URL+tt.path, "application/json", strings.NewReader(tt.body))
		if err != nil {
			t.Fatal(err)
		}
		want := tt.want
		want.Type = "invalid_request_error"
		if diff := cmp.Diff(want, decode[errorBody](t, resp, http.StatusBadRequest).Error); diff != "" {
			t.Errorf("POST %s %s (-want +got):\n%s", tt.path, tt.body, diff)
		}
	}
}

// errorBody is an OpenAI-style error body, param and code "" when null.
type errorBody struct {
	Error apiError `json:"error"`
}

type apiError struct{ Message, Type, Param, Code string }

func ptr(s string) *string { return &s }

func deref(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

func TestQueueFullGets429(t *testing.T) {
	// One sequence at a time, one waiting, and a slow token rate: the
	// third request finds the queue full.
	s, ts := newTestServer(t, Config{MaxSeqs: 1, MaxWaiting: 1, TPOT: time.Hour})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	body := chatBody("hold", map[string]any{"stream": true, "max_tokens": 5, "ignore_eos": true})
	// The first is running once its first token comes; a streamed
	// request's headers come once it is queued.
	first := post(t, ctx, ts.URL+"/v1/chat/completions", body)
	defer first.Body.Close()
	if _, err := bufio.NewReader(first.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	second := post(t, ctx, ts.URL+"/v1/chat/completions", body)
	defer second.Body.Close()
	if first.StatusCode != 200 || second.StatusCode != 200 {
		t.Fatalf("statuses %d, %d; want 200, 200", first.StatusCode, second.StatusCode)
	}
	if r, w, _ := s.eng.stats(); r != 1 || w != 1 {
		t.Fatalf("running, waiting = %d, %d; want 1, 1", r, w)
	}
	if got := metricValue(t, s.reg, "vllm:num_requests_waiting"); got != 1 {
		t.Errorf("vllm:num_requests_waiting = %v, want 1", got)
	}
	resp := post(t, ctx, ts.URL+"/v1/chat/completions", body)
	type errBody struct {
		Error struct {
			Type string `json:"type"`
			Code string `json:"code"`
		} `json:"error"`
	}
	if ra := resp.Header.Get("Retry-After"); ra == "" {
		t.Error("429 without Retry-After")
	}
	got := decode[errBody](t, resp, http.StatusTooManyRequests)
	if got.Error.Type != "rate_limit_error" {
		t.Errorf("429 error type %q", got.Error.Type)
	}
}

func TestClientCancelFreesSequence(t *testing.T) {
	// With room for one sequence, a request that would stream for minutes
	// is cancelled; the next must then run at once.
	s, ts := newTestServer(t, Config{MaxSeqs: 1, TPOT: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(t.Context())
	resp := post(t, ctx, ts.URL+"/v1/chat/completions", chatBody("long", map[string]any{"stream": true, "max_tokens": 20000, "ignore_eos": true}))
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil { // the first token
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()

	done, stop := context.WithTimeout(t.Context(), 10*time.Second)
	defer stop()
	a := decode[answer](t, post(t, done, ts.URL+"/v1/chat/completions", chatBody("short", map[string]any{"max_tokens": 3, "ignore_eos": true})), 200)
	if a.Usage.CompletionTokens != 3 {
		t.Errorf("%d tokens, want 3", a.Usage.CompletionTokens)
	}
	if r, w, usage := s.eng.stats(); r != 0 || w != 0 || usage != 0 {
		t.Errorf("after both: running %d, waiting %d, KV usage %v; want 0, 0, 0", r, w, usage)
	}
}

func TestPrefixCacheOverHTTP(t *testing.T) {
	s, ts := newTestServer(t, fast)
	prompt := strings.Repeat("A long shared system prompt about the gateway. ", 100)
	url := ts.URL + "/v1/chat/completions"
	first := decode[answer](t, post(t, t.Context(), url, chatBody(prompt, map[string]any{"max_tokens": 4})), 200)
	second := decode[answer](t, post(t, t.Context(), url, chatBody(prompt, map[string]any{"max_tokens": 4})), 200)
	p := first.Usage.PromptTokens
	if first.Usage.PromptTokensDetails.CachedTokens != 0 {
		t.Errorf("first sight: %d cached tokens, want 0", first.Usage.PromptTokensDetails.CachedTokens)
	}
	if want := (p - 1) / DefaultBlockSize * DefaultBlockSize; second.Usage.PromptTokensDetails.CachedTokens != want {
		t.Errorf("repeat: %d of %d tokens cached, want %d", second.Usage.PromptTokensDetails.CachedTokens, p, want)
	}
	if hits, queries := metricValue(t, s.reg, "vllm:prefix_cache_hits_total"), metricValue(t, s.reg, "vllm:prefix_cache_queries_total"); hits != float64(second.Usage.PromptTokensDetails.CachedTokens) || queries != float64(2*p) {
		t.Errorf("prefix cache hits %v, queries %v; want %d, %d", hits, queries, second.Usage.PromptTokensDetails.CachedTokens, 2*p)
	}
}

// A cache_salt keys a prompt's blocks, as vLLM's does: the same prompt
// hits the cache under the salt it was first sent with, and under no
// other, nor without one.
func TestCacheSalt(t *testing.T) {
	_, ts := newTestServer(t, fast)
	prompt := strings.Repeat("A system prompt one tenant keeps to itself. ", 100)
	url := ts.URL + "/v1/chat/completions"
	cached := func(salt any) int {
		extra := map[string]any{"max_tokens": 2}
		if salt != nil {
			extra["cache_salt"] = salt
		}
		return decode[answer](t, post(t, t.Context(), url, chatBody(prompt, extra)), 200).Usage.PromptTokensDetails.CachedTokens
	}
	if got := cached("tenant-a"); got != 0 {
		t.Fatalf("first sight: %d cached tokens", got)
	}
	for _, salt := range []any{"tenant-b", nil, "tenant-a "} {
		if got := cached(salt); got != 0 {
			t.Errorf("salt %v: %d tokens cached from tenant-a's prompt, want 0", salt, got)
		}
	}
	if got := cached("tenant-a"); got == 0 {
		t.Error("the same salt again: nothing cached")
	}
	if got := cached(nil); got == 0 {
		t.Error("unsalted, after an unsalted request: nothing cached")
	}
	resp := post(t, t.Context(), url, chatBody(prompt, map[string]any{"max_tokens": 2, "cache_salt": ""}))
	if e := decode[errorBody](t, resp, 400); e.Error.Param != "cache_salt" {
		t.Errorf("an empty cache_salt: %+v, want a 400 naming cache_salt", e)
	}
}

func TestTimingOverHTTP(t *testing.T) {
	// Batch timing at 4× speed: a 6,000-token prompt takes three 2,048-token
	// prefill steps of ~40 ms; a short one and a cached repeat, one step of
	// ~1.5 ms.
	_, ts := newTestServer(t, Config{Speed: 4})
	url := ts.URL + "/v1/chat/completions"
	ttft := func(prompt string) time.Duration {
		t0 := time.Now()
		resp := post(t, t.Context(), url, chatBody(prompt, map[string]any{"stream": true, "max_tokens": 2}))
		defer resp.Body.Close()
		if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		return time.Since(t0)
	}
	long := strings.Repeat("Prefill grows with the prompt. ", 1000)
	if n := tokenize.Count(long); n < 5000 {
		t.Fatalf("long prompt is %d tokens", n)
	}
	short, first, again := ttft("hi"), ttft(long), ttft(long)
	if first < 3*short || first < 80*time.Millisecond {
		t.Errorf("TTFT of a 6k-token prompt %v, of a short one %v: want the long one at least 3× and 80 ms", first, short)
	}
	if again > first/2 {
		t.Errorf("TTFT of the cached repeat %v, want under half the first's %v", again, first)
	}
}

func TestMetricsExposition(t *testing.T) {
	s, ts := newTestServer(t, Config{FixedTiming: true, BlockSize: 32, NumBlocks: 1000, Model: "m1"})
	decode[answer](t, post(t, t.Context(), ts.URL+"/v1/chat/completions", map[string]any{
		"model": "m1", "messages": []map[string]any{{"role": "user", "content": "x"}}, "max_tokens": 3, "ignore_eos": true,
	}), 200)

	want := `
# HELP vllm:cache_config_info The KV cache's configuration, in labels; the value is always 1.
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="32",model_name="m1",num_gpu_blocks="1000"} 1
# HELP vllm:generation_tokens_total Output tokens produced.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{model_name="m1"} 3
# HELP vllm:num_requests_running Requests in the running batch.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m1"} 0
`
	if err := testutil.GatherAndCompare(s.reg, strings.NewReader(want),
		"vllm:cache_config_info", "vllm:generation_tokens_total", "vllm:num_requests_running"); err != nil {
		t.Error(err)
	}
	for _, name := range []string{"vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds",
		"vllm:e2e_request_latency_seconds", "vllm:request_queue_time_seconds"} {
		if n, err := testutil.GatherAndCount(s.reg, name); err != nil || n != 1 {
			t.Errorf("%s: %d series, %v; want 1", name, n, err)
		}
	}

	resp, err := http.Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `vllm:kv_cache_usage_perc{model_name="m1"} 0`) {
		t.Errorf("/metrics lacks the KV usage gauge:\n%s", b)
	}

	// Colons are vLLM's names; promlint must find nothing else to fault.
	problems, err := promlint.New(bytes.NewReader(b)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	colons := 0
	for _, p := range problems {
		if strings.Contains(p.Text, "':'") {
			colons++
			continue
		}
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	if colons == 0 {
		t.Error("promlint found no vllm: names; did it read the exposition?")
	}
}

func TestModelsAndHealth(t *testing.T) {
	_, ts := newTestServer(t, Config{Model: "llama-8b", MaxModelLen: 4096})
	resp, err := http.Get(ts.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	type list struct {
		Object string `json:"object"`
		Data   []struct {
			ID          string `json:"id"`
			Object      string `json:"object"`
			MaxModelLen int    `json:"max_model_len"`
		} `json:"data"`
	}
	got := decode[list](t, resp, 200)
	if got.Object != "list" || len(got.Data) != 1 || got.Data[0].ID != "llama-8b" || got.Data[0].Object != "model" || got.Data[0].MaxModelLen != 4096 {
		t.Errorf("models = %+v", got)
	}
	resp, err = http.Get(ts.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("health: %d", resp.StatusCode)
	}
}
