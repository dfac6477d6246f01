package bench

// A scripted OpenAI-compatible streaming server for the driver's and the
// command's tests: it answers max_tokens one-token chunks, then the usage
// chunk and [DONE], and can refuse, fail or break a stream on cue.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/tokenize"
)

// fakeRequest is what the fake server saw of one request.
type fakeRequest struct {
	Tenant, Class, Auth string
	Model               string
	MaxTokens           int
	IgnoreEOS           bool
	Stream              bool
	IncludeUsage        bool
	PromptTokens        int
}

// fakeServer streams answers; its fields script it.
type fakeServer struct {
	// tokenDelay is the pause before each token.
	tokenDelay time.Duration
	// script, when set, answers instead of the normal stream for requests
	// it returns true for.
	script func(w http.ResponseWriter, r *fakeRequest) bool

	mu   sync.Mutex // protects seen
	seen []fakeRequest
}

func (f *fakeServer) start(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return srv
}

func (f *fakeServer) requests() []fakeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeRequest(nil), f.seen...)
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" || r.Method != http.MethodPost {
		http.Error(w, `{"error":{"message":"not found","type":"invalid_request_error","param":null,"code":null}}`, http.StatusNotFound)
		return
	}
	var body struct {
		Model    string `json:"model"`
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
		MaxTokens     int  `json:"max_tokens"`
		IgnoreEOS     bool `json:"ignore_eos"`
		Stream        bool `json:"stream"`
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, `{"error":{"message":"bad json","type":"invalid_request_error","param":null,"code":null}}`, http.StatusBadRequest)
		return
	}
	fr := fakeRequest{
		Tenant: r.Header.Get("x-llmgw-tenant"), Class: r.Header.Get("x-llmgw-priority"), Auth: r.Header.Get("Authorization"),
		Model: body.Model, MaxTokens: body.MaxTokens, IgnoreEOS: body.IgnoreEOS, Stream: body.Stream,
		IncludeUsage: body.StreamOptions.IncludeUsage,
	}
	for _, m := range body.Messages {
		fr.PromptTokens += tokenize.Count(m.Content)
	}
	f.mu.Lock()
	f.seen = append(f.seen, fr)
	f.mu.Unlock()
	if f.script != nil && f.script(w, &fr) {
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n")
	fl.Flush()
	for range fr.MaxTokens {
		if f.tokenDelay > 0 {
			select {
			case <-time.After(f.tokenDelay):
			case <-r.Context().Done():
				return
			}
		}
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" tok\"},\"finish_reason\":null}]}\n\n")
		fl.Flush()
	}
	cached := fr.PromptTokens / 2
	fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"prompt_tokens_details\":{\"cached_tokens\":%d}}}\n\n",
		fr.PromptTokens, fr.MaxTokens, cached)
	fmt.Fprint(w, "data: [DONE]\n\n")
}
