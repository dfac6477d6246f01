package router

// A request's translation runs under its work context: it stops when the
// client goes away (499) or server.request_timeout passes (504), and the
// Messages API's count_tokens is read, resolved and admitted as every
// other route is.

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/limits"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/proxy"
)

// workGateway is a router on a real listener in front of up, its settings
// changed by set and its translations' contexts wrapped by wrap (none
// when nil), and a channel that takes each request once the router has
// answered and accounted it.
func workGateway(t *testing.T, up http.Handler, set func(*config.Config), wrap func(context.Context) context.Context) (*Router, *prometheus.Registry, string, <-chan struct{}) {
	t.Helper()
	u := httptest.NewServer(up)
	t.Cleanup(u.Close)
	cfg := config.Default()
	cfg.Pools = []catalog.Pool{{Name: "main", Endpoints: []catalog.Endpoint{{URL: u.URL + "/v1"}}}}
	cfg.Models = []catalog.Model{{Name: "m", Pool: "main"}}
	if set != nil {
		set(&cfg)
	}
	cat, err := catalog.New(cfg.Pools, cfg.Models)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	r, err := New(Options{Server: serverOptions(cfg.Server), Router: routerOptions(cfg.Router), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	r.SetCatalog(cat)
	r.wrapWork = wrap // before the router serves, so that no request races it
	served := make(chan struct{}, 16)
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, hr *http.Request) {
		r.ServeHTTP(w, hr)
		served <- struct{}{}
	}))
	t.Cleanup(gw.Close)
	return r, reg, gw.URL, served
}

// turns is a Messages API body of n turns.
func turns(n int) string {
	var b strings.Builder
	b.WriteString(`{"model":"m","max_tokens":5,"messages":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"role":%q,"content":[{"type":"text","text":"turn %d"}]}`, [2]string{"user", "assistant"}[i%2], i)
	}
	b.WriteString(`]}`)
	return b.String()
}

// hangUpMidway is a translation's context that counts its looks at it.
// At look at it has the client hang up (midway is closed), waits for the
// client's context to end, and answers as it does.
type hangUpMidway struct {
	context.Context
	at     int64
	looks  atomic.Int64
	midway chan struct{}
}

func (c *hangUpMidway) Err() error {
	if c.looks.Add(1) == c.at {
		close(c.midway)
		select {
		case <-c.Context.Done():
		case <-time.After(10 * time.Second): // the test fails below
		}
	}
	return c.Context.Err()
}

// TestClientGoneStopsTranslation: a client that hangs up while its
// Messages request is being translated ends the translation at its next
// look at its context: the request is accounted as 499, no further look
// is made, and no upstream is called.
func TestClientGoneStopsTranslation(t *testing.T) {
	up := &upstream{tokens: 1}
	work := &hangUpMidway{at: 10, midway: make(chan struct{})}
	_, reg, url, served := workGateway(t, up, func(c *config.Config) { c.Server.MaxBodyBytes = 64 << 20 },
		func(ctx context.Context) context.Context {
			work.Context = ctx // the one request's
			return work
		})
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body := turns(20000) // thousands of items: hundreds of looks
	fmt.Fprintf(c, "POST /v1/messages HTTP/1.1\r\nHost: llmgw\r\nAnthropic-Version: 2023-06-01\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	select {
	case <-work.midway:
	case <-served:
		t.Fatalf("the translation looked at its context %d times and never reached look %d", work.looks.Load(), work.at)
	}
	c.Close()
	<-served
	if got := work.looks.Load(); got != work.at {
		t.Errorf("the translation looked at its context %d times; want it to stop at look %d, when its client had gone", got, work.at)
	}
	if got := requestsOf(t, reg, "499"); got != 1 {
		t.Errorf("requests accounted as 499: %v; want 1", got)
	}
	if up.hits.Load() != 0 {
		t.Errorf("the upstream was called %d times", up.hits.Load())
	}
}

// requestsOf is how many requests llmgw_requests_total counts with the
// given code.
func requestsOf(t *testing.T, reg *prometheus.Registry, code string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, f := range families {
		if f.GetName() != "llmgw_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "code" && l.GetValue() == code {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

// TestTranslationRunsUnderTheRequestDeadline: the context a request is
// translated under ends at server.request_timeout after it arrived.
func TestTranslationRunsUnderTheRequestDeadline(t *testing.T) {
	const timeout = time.Hour
	deadlines := make(chan time.Time, 1)
	_, _, url, served := workGateway(t, &upstream{tokens: 1}, func(c *config.Config) { c.Server.RequestTimeout = timeout },
		func(ctx context.Context) context.Context {
			d, _ := ctx.Deadline()
			deadlines <- d
			return ctx
		})
	before := time.Now()
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/messages", strings.NewReader(turns(2)))
	req.Header.Set("Anthropic-Version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	<-served
	after := time.Now()
	d := <-deadlines
	if d.Before(before.Add(timeout)) || d.After(after.Add(timeout)) {
		t.Errorf("translated under a deadline %v after the request was sent; want %v after it arrived", d.Sub(before), timeout)
	}
}

// TestTranslationPastRequestTimeout: a translation whose request is past
// server.request_timeout stops, and the request is answered 504 in its
// API's shape, as a call past it is, without calling any upstream: the
// client's API translated on arrival, and a chat request translated for
// an anthropic pool.
func TestTranslationPastRequestTimeout(t *testing.T) {
	for _, c := range []struct {
		name, path, body string
		kind             string
		want             string
	}{
		{"messages", "/v1/messages", turns(3), "",
			`{"type":"error","error":{"type":"timeout_error","message":"The request took longer than its time limit."}}`},
		{"responses", "/v1/responses", `{"model":"m","input":"hi"}`, "",
			`{"error":{"message":"The request took longer than its time limit.","type":"upstream_error","param":null,"code":"timeout"}}`},
		{"chat to an anthropic pool", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, catalog.KindAnthropic,
			`{"error":{"message":"The request took longer than its time limit.","type":"upstream_error","param":null,"code":"timeout"}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			up := &upstream{tokens: 1}
			_, reg, url, served := workGateway(t, up, func(cfg *config.Config) {
				cfg.Server.RequestTimeout = time.Nanosecond // past before the body is read
				cfg.Pools[0].Kind = c.kind
			}, nil)
			req, _ := http.NewRequest(http.MethodPost, url+c.path, strings.NewReader(c.body))
			req.Header.Set("Anthropic-Version", "2023-06-01")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			<-served
			if resp.StatusCode != http.StatusGatewayTimeout || string(b) != c.want {
				t.Errorf("%d %s; want 504 %s", resp.StatusCode, b, c.want)
			}
			if got := requestsOf(t, reg, "504"); got != 1 {
				t.Errorf("requests accounted as 504: %v; want 1", got)
			}
			if up.hits.Load() != 0 {
				t.Errorf("the upstream was called %d times", up.hits.Load())
			}
		})
	}
}

// TestPrepareForAnthropic: a chat call to an anthropic pool asks for the
// request's max tokens, or the default when it names none, and its
// translation stops when the client has gone (499) or the call's deadline
// has passed (504), and is refused (413) once it passes max_body_bytes.
func TestPrepareForAnthropic(t *testing.T) {
	const maxBody = 256 // ten tool messages, a chat body of 186 bytes, are a Messages API body of 432
	p := &servedPool{provider: newProvider(catalog.Pool{Kind: catalog.KindAnthropic})}
	gone, cancel := context.WithCancel(t.Context())
	cancel()
	hour := time.Now().Add(time.Hour)
	for _, c := range []struct {
		name     string
		ctx      context.Context
		deadline time.Time
		chat     string
		status   int    // of the error; 0 for none
		want     string // in the Messages API body
	}{
		{"max_completion_tokens", t.Context(), hour, `{"model":"m","max_completion_tokens":7,"messages":[]}`, 0, `"max_tokens":7,`},
		{"both, agreeing", t.Context(), hour, `{"model":"m","max_completion_tokens":7,"max_tokens":7,"messages":[]}`, 0, `"max_tokens":7,`},
		{"several answers", t.Context(), hour, `{"model":"m","n":2,"messages":[]}`, http.StatusBadRequest, ""},
		{"max_tokens", t.Context(), hour, `{"model":"m","max_tokens":20,"messages":[]}`, 0, `"max_tokens":20,`},
		{"none", t.Context(), hour, `{"model":"m","messages":[]}`, 0, `"max_tokens":1024,`},
		{"client gone", gone, hour, `{"model":"m","messages":[]}`, openai.StatusClientClosed, ""},
		{"past the deadline", t.Context(), time.Now().Add(-time.Second), `{"model":"m","messages":[]}`, http.StatusGatewayTimeout, ""},
		{"past max_body_bytes once translated", t.Context(), hour, `{"model":"m","messages":[` + strings.Repeat(`{"role":"tool"},`, 9) + `{"role":"tool"}]}`,
			http.StatusRequestEntityTooLarge, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := &parsedRequest{api: apis["/v1/chat/completions"]}
			if err := req.Request.Parse([]byte(c.chat)); err != nil {
				t.Fatal(err)
			}
			call := &proxy.Call{Body: []byte(c.chat), Deadline: c.deadline}
			err := p.prepare(c.ctx, call, req, &catalog.Model{Name: "m"}, 1024, maxBody)
			if got := openai.AsError(err); err != nil && got.Status != c.status || err == nil && c.status != 0 {
				t.Fatalf("error %v; want status %d", err, c.status)
			}
			if c.want != "" && !strings.Contains(string(call.Body), c.want) {
				t.Errorf("the Messages API body %s has no %s", call.Body, c.want)
			}
		})
	}
}

// TestCountTokens answers the Messages API's count through every step a
// message takes but the upstream: the key, from the headers, before the
// body; anthropic-version; the model, within the key's globs; the key's
// request limit, taking no tokens. Errors are Anthropic's.
func TestCountTokens(t *testing.T) {
	up := &upstream{tokens: 1}
	s := httptest.NewServer(up)
	t.Cleanup(s.Close)
	cfg := config.Default()
	cat, err := catalog.New([]catalog.Pool{{Name: "main", Endpoints: []catalog.Endpoint{{URL: s.URL + "/v1"}}}},
		[]catalog.Model{{Name: "m", Pool: "main"}, {Name: "hidden", Pool: "main"}})
	if err != nil {
		t.Fatal(err)
	}
	lim := &recordingLimiter{Local: limits.NewLocal()}
	recs := &records{}
	r, err := New(Options{Server: serverOptions(cfg.Server), Router: routerOptions(cfg.Router), Auth: globKey{}, Limits: lim, Recorder: recs})
	if err != nil {
		t.Fatal(err)
	}
	r.SetCatalog(cat)
	count := func(key, version, body string) (int, http.Header, string) {
		t.Helper()
		req := httptest.NewRequest(http.MethodPost, "/v1/messages/count_tokens", strings.NewReader(body))
		if key != "" {
			req.Header.Set("x-api-key", key)
		}
		if version != "" {
			req.Header.Set("anthropic-version", version)
		}
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		return w.Code, w.Header(), w.Body.String()
	}
	const hi = `{"model":"m","messages":[{"role":"user","content":"Hello there"}]}`
	for _, c := range []struct {
		name, key, version, body string
		status                   int
		want                     string // the body, or its start for a 429
	}{
		{"counted", "sk-good", "2023-06-01", hi, 200, `{"input_tokens":8}`},
		{"counted again", "sk-good", "2023-06-01", hi, 200, `{"input_tokens":8}`},
		{"no key", "", "2023-06-01", hi, 401, `{"type":"error","error":{"type":"authentication_error","message":"You didn't provide an API key. Send it as 'Authorization: Bearer YOUR_API_KEY'."}}`},
		{"no version", "sk-good", "", hi, 400, `{"type":"error","error":{"type":"invalid_request_error","message":"anthropic-version: header is required"}}`},
		{"outside the key's globs", "sk-good", "2023-06-01", strings.Replace(hi, `"m"`, `"hidden"`, 1), 404,
			`{"type":"error","error":{"type":"not_found_error","message":"The model \"hidden\" does not exist or you do not have access to it."}}`},
		{"past the request limit", "sk-good", "2023-06-01", hi, 429,
			`{"type":"error","error":{"type":"rate_limit_error","message":"Rate limit reached for requests per minute.`},
	} {
		status, h, body := count(c.key, c.version, c.body)
		if status != c.status || body != c.want && (status != 429 || !strings.HasPrefix(body, c.want)) {
			t.Errorf("%s: %d %s; want %d %s", c.name, status, body, c.status, c.want)
		}
		if c.status == 200 && (h.Get("Content-Type") != "application/json" || h.Get("X-Ratelimit-Limit-Requests") != "2") {
			t.Errorf("%s: headers %v", c.name, h)
		}
		if c.status == 429 && h.Get("Retry-After") == "" {
			t.Errorf("%s: no Retry-After in %v", c.name, h)
		}
	}
	if up.hits.Load() != 0 {
		t.Errorf("the upstream was called %d times", up.hits.Load())
	}
	// Three asked to be admitted, none for a token: a key with a TPM of
	// 1 has both counts answered.
	if len(lim.reserved) != 3 || lim.reserved[0] != 0 || lim.reserved[1] != 0 || lim.reserved[2] != 0 {
		t.Errorf("the counts reserved %v tokens; want three reservations of none", lim.reserved)
	}
	// Each answered count is accounted as a request of its model, with no
	// pool, no tokens and nothing to settle.
	if len(recs.recs) != 3 || recs.recs[0].Status != 200 || recs.recs[0].Model != "m" || recs.recs[0].Pool != "" || recs.recs[0].PromptTokens != 0 || recs.recs[2].Status != 429 {
		t.Errorf("records %+v", recs.recs)
	}
	if len(lim.settled) != 2 || lim.settled[0] != 0 {
		t.Errorf("settled %v; want two of nothing", lim.settled)
	}
}

// globKey knows one key, "sk-good", limited to 2 requests a minute and to
// the models matching m*.
type globKey struct{}

func (globKey) Authenticate(_ context.Context, secret string) (*tenant.Key, error) {
	if secret != "sk-good" {
		return nil, openai.Unauthorized("Incorrect API key provided.")
	}
	return &tenant.Key{ID: "key_1", Tenant: "acme", Models: []string{"m*"}, Limits: tenant.Limits{RPM: 2, TPM: 1}}, nil
}
