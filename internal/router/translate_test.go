package router

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
	"gitea.mynodes.xyz/ilker/llmgw/internal/limits"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// tpmKey authenticates every request as one key with a token limit.
type tpmKey struct{}

func (tpmKey) Authenticate(context.Context, string) (*tenant.Key, error) {
	return &tenant.Key{ID: "k1", Tenant: "acme", Limits: tenant.Limits{TPM: 100000}}, nil
}

// recordingLimiter is the in-process limiter, noting what each request
// reserved and settled.
type recordingLimiter struct {
	*limits.Local
	mu       sync.Mutex
	reserved []int64
	settled  []int64
}

func (l *recordingLimiter) Admit(ctx context.Context, r limits.Request) (limits.Decision, error) {
	l.mu.Lock()
	l.reserved = append(l.reserved, r.Tokens)
	l.mu.Unlock()
	return l.Local.Admit(ctx, r)
}

func (l *recordingLimiter) Settle(ctx context.Context, res limits.Reservation, used int64, cost float64) {
	l.mu.Lock()
	l.settled = append(l.settled, used)
	l.mu.Unlock()
	l.Local.Settle(ctx, res, used, cost)
}

type records struct {
	mu   sync.Mutex
	recs []usage.Record
}

func (r *records) Record(rec usage.Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec)
}

// accounted is what a gateway counted of the requests it served: token
// metric samples by name, ledger records without their times and ids,
// token reservations and settlements, and the upstream bodies.
type accounted struct {
	Samples           map[string]uint64
	Records           []usage.Record
	Reserved, Settled []int64
	Upstream          []string
}

// serveAndAccount sends body to path on a fresh gateway in front of a
// streaming upstream, and says what the gateway counted.
func serveAndAccount(t *testing.T, path, body string, header http.Header) (string, accounted) {
	t.Helper()
	up := &upstream{tokens: 6, bodies: make(chan []byte, 1)}
	return serveAndAccountOn(t, up, up.bodies, catalog.Pool{}, path, body, header)
}

// serveAndAccountOn is serveAndAccount in front of up, which sends every
// request body it reads to bodies, in a pool like pool.
func serveAndAccountOn(t *testing.T, up http.Handler, bodies <-chan []byte, pool catalog.Pool, path, body string, header http.Header) (string, accounted) {
	t.Helper()
	s := httptest.NewServer(up)
	t.Cleanup(s.Close)
	cfg := config.Default()
	pool.Name, pool.Endpoints = "main", []catalog.Endpoint{{URL: s.URL + "/v1"}}
	cfg.Pools = []catalog.Pool{pool}
	cfg.Models = []catalog.Model{{Name: "m", Pool: "main", Price: catalog.Price{InputPerMillion: 1, OutputPerMillion: 2}}}
	cat, err := catalog.New(cfg.Pools, cfg.Models)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	lim := &recordingLimiter{Local: limits.NewLocal()}
	recs := &records{}
	r, err := New(Options{Server: serverOptions(cfg.Server), Router: routerOptions(cfg.Router), Registerer: reg, Auth: tpmKey{}, Limits: lim, Recorder: recs})
	if err != nil {
		t.Fatal(err)
	}
	r.SetCatalog(cat)
	gw := httptest.NewServer(r)
	t.Cleanup(gw.Close)

	req, _ := http.NewRequest(http.MethodPost, gw.URL+path, strings.NewReader(body))
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Authorization", "Bearer sk-test")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("%s: %d %s", path, resp.StatusCode, answer)
	}

	a := accounted{Samples: map[string]uint64{}, Reserved: lim.reserved, Settled: lim.settled, Upstream: []string{string(<-bodies)}}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			switch {
			case m.GetHistogram() != nil:
				a.Samples[f.GetName()] += m.GetHistogram().GetSampleCount()
			case m.GetCounter() != nil:
				a.Samples[f.GetName()] += uint64(m.GetCounter().GetValue())
			}
		}
	}
	for _, rec := range recs.recs {
		rec.ID, rec.Time, rec.TTFT, rec.Duration, rec.Endpoint = "", time.Time{}, 0, 0, "" // each gateway has its own upstream
		a.Records = append(a.Records, rec)
	}
	return string(answer), a
}

// TestTranslatedStreamCountsAsChat sends the same stream as chat, as an
// Anthropic message and as a response: token metrics, token limits and
// the ledger count all three alike.
func TestTranslatedStreamCountsAsChat(t *testing.T) {
	const chat = `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":10,"stream":true,"stream_options":{"include_usage":true}}`
	_, want := serveAndAccount(t, "/v1/chat/completions", chat, nil)
	if want.Samples["llmgw_tpot_seconds"] != 1 || want.Samples["llmgw_inter_token_seconds"] != 5 || len(want.Records) != 1 || want.Records[0].CompletionTokens != 6 || want.Settled[0] != 11 {
		t.Fatalf("the chat stream itself was counted as %+v", want)
	}
	for _, c := range []struct {
		path, body string
		header     http.Header
		last       string // the answer's final event
	}{
		{"/v1/messages", `{"model":"m","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			http.Header{"Anthropic-Version": {"2023-06-01"}}, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"},
		{"/v1/responses", `{"model":"m","input":"hi","max_output_tokens":10,"stream":true}`, nil, "event: response.completed\n"},
	} {
		t.Run(c.path, func(t *testing.T) {
			answer, got := serveAndAccount(t, c.path, c.body, c.header)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("counted differently from chat (-chat +%s):\n%s", c.path, diff)
			}
			if !strings.Contains(answer, c.last) || strings.Contains(answer, "[DONE]") {
				t.Errorf("answer:\n%s", answer)
			}
		})
	}
}

// denyAll refuses every key.
type denyAll struct{}

func (denyAll) Authenticate(context.Context, string) (*tenant.Key, error) {
	return nil, openai.Unauthorized("Incorrect API key provided.")
}

// TestAnthropicErrors answers every failure on /v1/messages in
// Anthropic's shape, with the status chat would get.
func TestAnthropicErrors(t *testing.T) {
	send := func(t *testing.T, url, body string, h http.Header) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/messages", strings.NewReader(body))
		for k, v := range h {
			req.Header[k] = v
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	version := http.Header{"Anthropic-Version": {"2023-06-01"}}
	msg := `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`
	for _, c := range []struct {
		name     string
		upstream *upstream
		body     string
		status   int
		want     string
	}{
		{"unknown model", &upstream{tokens: 1}, strings.Replace(msg, `"m"`, `"nope"`, 1), 404,
			`{"type":"error","error":{"type":"not_found_error","message":"The model \"nope\" does not exist or you do not have access to it."}}`},
		{"wrong type", &upstream{tokens: 1}, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":7}]}`, 400,
			`{"type":"error","error":{"type":"invalid_request_error","message":"messages[0].content: must be a string or an array of content blocks, got an integer"}}`},
		{"nested wrong type", &upstream{tokens: 1}, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":false}]}]}`, 400,
			`{"type":"error","error":{"type":"invalid_request_error","message":"messages[0].content[0].text: must be a string, got a boolean"}}`},
		{"no max_tokens", &upstream{tokens: 1}, `{"model":"m","messages":[]}`, 400,
			`{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: field required"}}`},
		{"backend full", &upstream{status: 429}, msg, 429,
			`{"type":"error","error":{"type":"rate_limit_error","message":"The model's backends are at capacity; try again shortly."}}`},
		{"backend broken", &upstream{status: 500}, msg, 502,
			`{"type":"error","error":{"type":"api_error","message":"The model's backend failed to answer."}}`},
		{"backend refuses", &upstream{status: 400}, msg, 400,
			`{"type":"error","error":{"type":"invalid_request_error","message":"down"}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := newTestGateway(t, nil, c.upstream)
			status, body := send(t, g.url, c.body, version)
			if status != c.status || body != c.want {
				t.Errorf("got %d %s\nwant %d %s", status, body, c.status, c.want)
			}
		})
	}

	t.Run("no key", func(t *testing.T) {
		r, err := New(Options{Auth: denyAll{}})
		if err != nil {
			t.Fatal(err)
		}
		gw := httptest.NewServer(r)
		defer gw.Close()
		status, body := send(t, gw.URL, msg, http.Header{"X-Api-Key": {"sk-bad"}, "Anthropic-Version": {"2023-06-01"}})
		if want := `{"type":"error","error":{"type":"authentication_error","message":"Incorrect API key provided."}}`; status != 401 || body != want {
			t.Errorf("got %d %s", status, body)
		}
	})
}

// TestAnthropicThinking answers a reasoning model's reasoning_content as
// a thinking block before the text.
func TestAnthropicThinking(t *testing.T) {
	g := newTestGateway(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, d := range []string{
			`{"choices":[{"delta":{"role":"assistant","content":null,"reasoning_content":"Think"}}]}`,
			`{"choices":[{"delta":{"content":null,"reasoning_content":" hard."}}]}`,
			`{"choices":[{"delta":{"content":"Answer.","reasoning_content":null}}]}`,
			`{"choices":[{"delta":{},"finish_reason":"stop"}]}`,
			`[DONE]`,
		} {
			io.WriteString(w, "data: "+d+"\n\n")
		}
	}))
	req, _ := http.NewRequest(http.MethodPost, g.url+"/v1/messages", strings.NewReader(`{"model":"m","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var got []string
	for _, line := range strings.Split(string(body), "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(d, "content_block") {
			got = append(got, d)
		}
	}
	want := []string{
		`{"content_block":{"signature":"","thinking":"","type":"thinking"},"index":0,"type":"content_block_start"}`,
		`{"delta":{"thinking":"Think","type":"thinking_delta"},"index":0,"type":"content_block_delta"}`,
		`{"delta":{"thinking":" hard.","type":"thinking_delta"},"index":0,"type":"content_block_delta"}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Answer."}}`,
		`{"type":"content_block_stop","index":1}`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("blocks (-want +got):\n%s", diff)
	}
}
