package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func simpleRequests(n int, gap time.Duration, maxTokens int) []Request {
	reqs := make([]Request, n)
	for i := range reqs {
		reqs[i] = Request{
			At: time.Duration(i) * gap, Tenant: "bench", Class: "standard",
			Prompt:    []Message{{Role: "user", Content: []string{" hello", " there \"quoted\"\n"}}},
			MaxTokens: maxTokens, IgnoreEOS: true,
		}
	}
	return reqs
}

// TestDriverIsOpenLoop sends eight requests 40ms apart to a server that
// answers none of them until all eight have arrived: a closed-loop driver
// would never send the second. Arrival times at the server must follow
// the schedule.
func TestDriverIsOpenLoop(t *testing.T) {
	const n, gap = 8, 40 * time.Millisecond
	var mu sync.Mutex
	var arrivals []time.Time
	all := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrivals = append(arrivals, time.Now())
		if len(arrivals) == n {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
		case <-time.After(5 * time.Second): // a closed-loop driver: give up
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, sse("\n", tokenChunk, "[DONE]"))
	}))
	defer srv.Close()
	d := &Driver{Client: newClient(), URL: srv.URL + "/v1/chat/completions", Model: "m"}
	results := d.Run(context.Background(), simpleRequests(n, gap, 1))
	mu.Lock()
	defer mu.Unlock()
	if len(arrivals) != n {
		t.Fatalf("%d arrivals, want %d", len(arrivals), n)
	}
	for i, r := range results {
		if r.Outcome != OutcomeOK {
			t.Errorf("request %d: %v %s", i, r.Outcome, r.Err)
		}
	}
	// Generous bounds: each arrival within 30ms before to 150ms after its
	// slot, measured from the first.
	for i, at := range arrivals {
		off, want := at.Sub(arrivals[0]), time.Duration(i)*gap
		if off < want-30*time.Millisecond || off > want+150*time.Millisecond {
			t.Errorf("arrival %d at +%v, scheduled at +%v", i, off, want)
		}
	}
}

func TestDriverOutcomes(t *testing.T) {
	f := &fakeServer{script: func(w http.ResponseWriter, r *fakeRequest) bool {
		switch r.MaxTokens {
		case 2: // shed
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"error":{"message":"overloaded","type":"rate_limit_error","param":null,"code":"overloaded"}}`)
			return true
		case 3: // upstream broke
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadGateway)
			fmt.Fprint(w, `{"error":{"message":"The model's backend failed to answer.","type":"upstream_error","param":null,"code":"bad_gateway"}}`)
			return true
		case 4: // dies mid-stream
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, sse("\n", tokenChunk, tokenChunk))
			return true
		case 5: // error event
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, sse("\n", tokenChunk, `{"error":{"message":"stalled","type":"upstream_error","param":null,"code":null}}`, "[DONE]"))
			return true
		}
		return false
	}}
	srv := f.start(t)
	var reqs []Request
	for _, mt := range []int{1, 2, 3, 4, 5, 6} {
		r := simpleRequests(1, 0, mt)[0]
		r.At = time.Duration(mt) * time.Millisecond
		reqs = append(reqs, r)
	}
	d := &Driver{Client: newClient(), URL: srv.URL + "/v1/chat/completions", Model: "m"}
	results := d.Run(context.Background(), reqs)
	type row struct {
		Outcome Outcome
		Status  int
		Err     string
		Tokens  int
		Asked   int64
	}
	var got []row
	for _, r := range results {
		got = append(got, row{r.Outcome, r.Status, r.Err, r.Tokens, r.Asked})
	}
	// Each request asked its max_tokens, whether it was served or not.
	want := []row{
		{OutcomeOK, 200, "", 1, 1},
		{OutcomeRejected, 429, "status 429: overloaded", 0, 2},
		{OutcomeError, 502, "status 502: The model's backend failed to answer.", 0, 3},
		{OutcomeError, 200, errNoDone.Error(), 2, 4},
		{OutcomeError, 200, errErrorEvent.Error() + ": stalled", 1, 5},
		{OutcomeOK, 200, "", 6, 6},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if r := results[5]; r.CompletionTokens != 6 || r.PromptTokens == 0 || len(r.Gaps) != 5 {
		t.Errorf("usage or gaps not read: %+v", r)
	}
}

// TestDriverSendsWhatTheServerNeeds checks the request as the server sees
// it: a streamed chat completion asking for usage, max_tokens with
// ignore_eos, the tenant and class headers, and each tenant's own key.
func TestDriverSendsWhatTheServerNeeds(t *testing.T) {
	var body map[string]any
	var mu sync.Mutex
	var headers []http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		headers = append(headers, r.Header.Clone())
		if body == nil {
			json.NewDecoder(r.Body).Decode(&body)
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, sse("\n", tokenChunk, "[DONE]"))
	}))
	defer srv.Close()
	reqs := simpleRequests(2, time.Millisecond, 7)
	reqs[0].Tenant, reqs[0].Class = "acme/search", "critical"
	reqs[1].Tenant, reqs[1].Class = "beta/batch", "sheddable"
	d := &Driver{Client: newClient(), URL: srv.URL + "/v1/chat/completions", Model: "sim-8b",
		APIKey: "sk-default", Keys: map[string]string{"acme/search": "sk-acme"}}
	d.Run(context.Background(), reqs)

	wantBody := map[string]any{
		"model":          "sim-8b",
		"messages":       []any{map[string]any{"role": "user", "content": " hello there \"quoted\"\n"}},
		"max_tokens":     float64(7),
		"ignore_eos":     true,
		"stream":         true,
		"stream_options": map[string]any{"include_usage": true},
	}
	if diff := cmp.Diff(wantBody, body); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
	type hdr struct{ Tenant, Priority, Auth string }
	var got []hdr
	for _, h := range headers {
		got = append(got, hdr{h.Get("x-llmgw-tenant"), h.Get("x-llmgw-priority"), h.Get("Authorization")})
	}
	want := []hdr{{"acme/search", "critical", "Bearer sk-acme"}, {"beta/batch", "sheddable", "Bearer sk-default"}}
	// Two arrivals a millisecond apart may reach the server in either order.
	if diff := cmp.Diff(want, got, cmpopts.SortSlices(func(a, b hdr) bool { return a.Tenant < b.Tenant })); diff != "" {
		t.Errorf("headers (-want +got):\n%s", diff)
	}
}

// TestDriverCapDropsAndDrainCuts checks the two limits: arrivals past the
// concurrency cap are dropped rather than delayed, and requests still
// running when the drain ends are cut and counted as errors.
func TestDriverCapDropsAndDrainCuts(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, sse("\n", tokenChunk))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	d := &Driver{Client: newClient(), URL: srv.URL + "/v1/chat/completions", Model: "m", Cap: 2, Drain: 50 * time.Millisecond}
	results := d.Run(context.Background(), simpleRequests(4, 5*time.Millisecond, 3))
	var got []Outcome
	for _, r := range results {
		got = append(got, r.Outcome)
	}
	if diff := cmp.Diff([]Outcome{OutcomeError, OutcomeError, OutcomeDropped, OutcomeDropped}, got); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(results[0].Err, "cut at the end of the drain") {
		t.Errorf("cut request's error %q", results[0].Err)
	}
	if r := results[3]; r.Tenant != "bench" || r.Class != "standard" || r.Asked != 3 {
		t.Errorf("dropped request lost what it was: tenant %q, class %q, asked %d", r.Tenant, r.Class, r.Asked)
	}
}

func TestRequestBodyEscapes(t *testing.T) {
	r := Request{Prompt: []Message{{Role: "user", Content: []string{"a\"b\\c\n\t\x01é", "<&>"}}}, MaxTokens: 3}
	var got struct {
		Messages []struct{ Content string }
	}
	if err := json.Unmarshal(requestBody("m\"x", &r), &got); err != nil {
		t.Fatal(err)
	}
	if want := "a\"b\\c\n\t\x01é<&>"; got.Messages[0].Content != want {
		t.Errorf("content %q, want %q", got.Messages[0].Content, want)
	}
}

// TestDriverSpreadsOverURLs sends to two servers: each gets a share, and
// the same seed sends the same requests to the same server.
func TestDriverSpreadsOverURLs(t *testing.T) {
	spread := func(seed uint64) [2][]int {
		var got [2][]int
		var mu sync.Mutex
		var urls []string
		for i := range 2 {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var body struct {
					MaxTokens int `json:"max_tokens"`
				}
				json.NewDecoder(r.Body).Decode(&body)
				mu.Lock()
				got[i] = append(got[i], body.MaxTokens)
				mu.Unlock()
				w.Header().Set("Content-Type", "text/event-stream")
				fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\ndata: [DONE]\n\n")
			}))
			t.Cleanup(srv.Close)
			urls = append(urls, srv.URL+"/v1/chat/completions")
		}
		reqs := simpleRequests(40, 0, 1)
		for i := range reqs {
			reqs[i].MaxTokens = i + 1 // names the request
		}
		d := &Driver{Client: newClient(), URLs: urls, Seed: seed, Model: "m"}
		for _, r := range d.Run(context.Background(), reqs) {
			if r.Outcome != OutcomeOK {
				t.Fatalf("outcome %v: %s", r.Outcome, r.Err)
			}
		}
		for i := range got {
			slices.Sort(got[i])
		}
		return got
	}
	a, b := spread(7), spread(7)
	if len(a[0]) < 5 || len(a[1]) < 5 || len(a[0])+len(a[1]) != 40 {
		t.Errorf("requests per server %d and %d; want both a share of 40", len(a[0]), len(a[1]))
	}
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("the same seed spread requests differently (-first +second):\n%s", diff)
	}
	if c := spread(8); cmp.Equal(a, c) {
		t.Error("seeds 7 and 8 spread requests the same way")
	}
}
