package app

// A hosted provider's errors, seen from every client API: a provider that
// refuses the gateway's key and quotes it back, refuses the request and
// quotes the key, fails in some other way, or breaks off a stream with an
// error naming the key. The key reaches neither the client nor the log.

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

// providerWords is in every message the fake provider writes: an answer
// holding it holds the provider's own words.
const providerWords = "provider-words"

// fakeProvider is a hosted provider of one kind, answering every call as
// next says, its message quoting the key the call carried.
type fakeProvider struct {
	kind string
	mu   sync.Mutex // protects next
	next providerAnswer
}

// providerAnswer is an error status and its message, in which KEY stands
// for the key the call carried; status 0 streams a token, then an error
// event with the message.
type providerAnswer struct {
	status  int
	message string
}

func (f *fakeProvider) answer(a providerAnswer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next = a
}

// sentKey is the key a call carried, read as the kind's provider reads it.
func (f *fakeProvider) sentKey(r *http.Request) string {
	switch f.kind {
	case catalog.KindAnthropic:
		return r.Header.Get("X-Api-Key")
	case catalog.KindAzure:
		return r.Header.Get("Api-Key")
	}
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
}

// quoted is msg as a JSON string, as the kind's fake writes it: OpenAI's
// plain, Anthropic's with / and + escaped, Azure's with every a escaped.
func (f *fakeProvider) quoted(msg string) string {
	b, _ := json.Marshal(msg)
	switch f.kind {
	case catalog.KindAnthropic:
		return strings.NewReplacer("/", `\/`, "+", `\u002b`).Replace(string(b))
	case catalog.KindAzure:
		return strings.ReplaceAll(string(b), "a", `\u0061`)
	}
	return string(b)
}

// errorBody is an error as the kind's provider writes one.
func (f *fakeProvider) errorBody(status int, msg string) string {
	switch f.kind {
	case catalog.KindAnthropic:
		return `{"type":"error","error":{"type":"authentication_error","message":` + msg + `}}`
	case catalog.KindAzure:
		return fmt.Sprintf(`{"error":{"code":"%d","message":%s}}`, status, msg)
	}
	return `{"error":{"message":` + msg + `,"type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`
}

func (f *fakeProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	f.mu.Lock()
	a := f.next
	f.mu.Unlock()
	msg := f.quoted(strings.ReplaceAll(a.message, "KEY", f.sentKey(r)))
	if a.status != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.status)
		io.WriteString(w, f.errorBody(a.status, msg))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	if f.kind == catalog.KindAnthropic {
		io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n"+
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"+
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n"+
			"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":"+msg+"}}\n\n")
		return
	}
	io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null}]}\n\n"+
		"data: {\"error\":{\"message\":"+msg+",\"type\":\"server_error\",\"param\":null,\"code\":null}}\n\n")
}

// jsonEscape is an escape a key may hide behind in JSON, its backslash
// itself escaped as often as the JSON was quoted again (in a log line).
var jsonEscape = regexp.MustCompile(`\\+(u[0-9a-fA-F]{4}|/)`)

// leaks reports whether s holds key, as it is or JSON-escaped.
func leaks(s, key string) bool {
	plain := jsonEscape.ReplaceAllStringFunc(s, func(e string) string {
		var r string
		json.Unmarshal([]byte(`"\`+strings.TrimLeft(e, `\`)+`"`), &r)
		return r
	})
	return strings.Contains(s, key) || strings.Contains(plain, key)
}

// clientAPI is one of the gateway's APIs: where a request goes, its body
// whole and streamed, and the headers it needs.
type clientAPI struct {
	name, path, body, stream string
	header                   http.Header
}

var clientAPIs = []clientAPI{
	{"chat", "/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":5,"stream":true}`, nil},
	{"completions", "/completions", `{"model":"m","prompt":"hi","max_tokens":5}`, "", nil},
	{"embeddings", "/embeddings", `{"model":"m","input":"hi"}`, "", nil},
	{"messages", "/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		http.Header{"Anthropic-Version": {"2023-06-01"}}},
	{"responses", "/responses", `{"model":"m","input":"hi","max_output_tokens":5}`,
		`{"model":"m","input":"hi","max_output_tokens":5,"stream":true}`, nil},
}

// TestProviderErrorsKeepTheKey sends every client API's request to a pool
// of each hosted kind whose provider answers with each kind of error,
// quoting the key the gateway sent it: the refusal of the gateway's own
// key is a 502 in llmgw's words, retried and counted as status_auth; a
// refusal of the request is relayed with the key redacted; any other
// failure is a 502 with none of the provider's words. The key is nowhere
// in an answer or the log.
func TestProviderErrorsKeepTheKey(t *testing.T) {
	const (
		refusedKey  = "The model's provider refused the gateway's credentials."
		backendDown = "The model's backend failed to answer."
	)
	type want struct {
		status  int
		message string // what the client's answer says
		relayed bool   // with the provider's words, the key redacted
	}
	cases := []struct {
		name   string
		answer providerAnswer
		want   want
	}{
		{"401", providerAnswer{401, "Incorrect API key provided: KEY. " + providerWords}, want{502, refusedKey, false}},
		{"403", providerAnswer{403, "Key KEY may not use this model. " + providerWords}, want{502, refusedKey, false}},
		{"400", providerAnswer{400, "Invalid request made with key KEY: " + providerWords}, want{400, "made with key [redacted]: " + providerWords, true}},
		{"402", providerAnswer{402, "Key KEY has no credit left. " + providerWords}, want{502, backendDown, false}},
		{"405", providerAnswer{405, "Method refused for KEY. " + providerWords}, want{502, backendDown, false}},
		{"409", providerAnswer{409, "Conflict for KEY. " + providerWords}, want{502, backendDown, false}},
		{"500", providerAnswer{500, "Internal error serving KEY. " + providerWords}, want{502, backendDown, false}},
	}
	for _, kind := range []struct {
		name, key, version string
		v1                 bool // the endpoint's URL ends in /v1
	}{
		{catalog.KindOpenAI, "tok-5e1f0a9c2b7d4e3f", "", true},
		{catalog.KindAnthropic, "sk-ant-api03-Zq9/x+Y7wK", "", true},
		{catalog.KindAzure, "4f2c9a1b7e3d8c6f0a5b2e9d1c7f3a8b", "2024-10-21", false},
	} {
		t.Run(kind.name, func(t *testing.T) {
			t.Setenv("LLMGW_TEST_PROVIDER_KEY", kind.key)
			f := &fakeProvider{kind: kind.name}
			s := httptest.NewServer(f)
			t.Cleanup(s.Close)
			url := s.URL
			if kind.v1 {
				url += "/v1"
			}
			cfg := upstreamConfig("m", kind.name, []string{url})
			cfg.Pools[0].APIKeyEnv, cfg.Pools[0].APIVersion = "LLMGW_TEST_PROVIDER_KEY", kind.version
			logs := &syncWriter{w: new(strings.Builder)}
			g := startLogged(t, cfg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))

			authFailures := 0
			for _, api := range clientAPIs {
				if kind.name == catalog.KindAnthropic && (api.name == "completions" || api.name == "embeddings") {
					continue // the gateway refuses these itself: Anthropic has none
				}
				for _, c := range cases {
					t.Run(api.name+" "+c.name, func(t *testing.T) {
						f.answer(c.answer)
						status, body := post(t, g.URL()+api.path, api.body, api.header)
						if c.want.status == 502 && c.want.message == refusedKey {
							authFailures++
						}
						if leaks(body, kind.key) {
							t.Errorf("the key reached the client: %d %s", status, body)
						}
						if status != c.want.status || !strings.Contains(body, c.want.message) || !json.Valid([]byte(body)) {
							t.Errorf("got %d %s\nwant %d, saying %q", status, body, c.want.status, c.want.message)
						}
						if strings.Contains(body, providerWords) != c.want.relayed {
							t.Errorf("got %s: the provider's words relayed: want %v", body, c.want.relayed)
						}
					})
				}
				if api.stream == "" {
					continue
				}
				t.Run(api.name+" stream broken", func(t *testing.T) {
					f.answer(providerAnswer{0, "Key KEY revoked mid-answer. " + providerWords})
					status, body := post(t, g.URL()+api.path, api.stream, api.header)
					if status != 200 || !strings.Contains(body, "Hi") || leaks(body, kind.key) {
						t.Errorf("got %d %s", status, body)
					}
					// A chat client reads the provider's error event; the
					// translated APIs end in llmgw's own words.
					if api.name == "chat" && !strings.Contains(body, "revoked mid-answer. "+providerWords) {
						t.Errorf("the provider's error event did not reach the chat client: %s", body)
					}
				})
			}

			log := logs.String()
			if leaks(log, kind.key) {
				t.Errorf("the key is in the log:\n%s", log)
			}
			var refused []string
			for _, line := range strings.Split(log, "\n") {
				if strings.Contains(line, "reason=status_auth") && strings.Contains(line, `msg="upstream failed"`) {
					refused = append(refused, line)
				}
			}
			if len(refused) != authFailures {
				t.Errorf("%d refusals of the gateway's key logged, want %d:\n%s", len(refused), authFailures, log)
			}
			for _, line := range refused {
				if !strings.Contains(line, "level=WARN") || !strings.Contains(line, " id=") || !strings.Contains(line, "pool=upstream") ||
					!strings.Contains(line, "[redacted]") || !strings.Contains(line, providerWords) {
					t.Errorf("a refusal logged as %s", line)
				}
			}
			if got := upstreamErrors(t, g, "status_auth"); got != float64(authFailures) {
				t.Errorf("llmgw_upstream_errors_total{reason=status_auth} = %v, want %d", got, authFailures)
			}
		})
	}
}

// post sends body to url with header, and returns the answer's status and
// body.
func post(t *testing.T, url, body string, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// upstreamErrors is llmgw_upstream_errors_total of the pool upstream for
// reason.
func upstreamErrors(t *testing.T, g *Gateway, reason string) float64 {
	t.Helper()
	mfs, err := g.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "llmgw_upstream_errors_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["pool"] == "upstream" && labels["reason"] == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
