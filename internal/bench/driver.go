package bench

// The open-loop driver: one scheduler walks the precomputed arrival list
// and starts a goroutine per request at its time, whether or not earlier
// requests have finished. Each request is streamed and timed token by
// token as its events arrive.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// Outcome is how a request ended.
type Outcome uint8

const (
	OutcomeOK       Outcome = iota // the stream ended with [DONE] and no error event
	OutcomeRejected                // 429: limited or shed
	OutcomeError                   // any other status, a transport error, a broken stream
	OutcomeDropped                 // never sent: the concurrency cap was reached at its arrival
)

func (o Outcome) String() string {
	switch o {
	case OutcomeOK:
		return "ok"
	case OutcomeRejected:
		return "rejected"
	case OutcomeError:
		return "error"
	case OutcomeDropped:
		return "dropped"
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// Result is what one request measured. Times are from the moment its HTTP
// request was started.
type Result struct {
	Tenant, Class string
	SLO           SLO
	Outcome       Outcome
	Status        int    // HTTP status; 0 when none came
	Err           string // why an error is one; empty otherwise
	// Lag is how late the request was sent against its schedule: the
	// driver's own delay.
	Lag   time.Duration
	Start time.Duration // when it was sent, from the start of the run
	// TTFT is the time to the first token; zero when there was none.
	TTFT time.Duration
	E2E  time.Duration // to the end of the stream
	// Tokens is how many output events carried a token.
	Tokens int
	// Gaps are the times between successive token events, in seconds.
	Gaps []float32
	// LastToken is the time of the last token event; TPOT spans from TTFT
	// to it.
	LastToken time.Duration
	// Usage is from the stream's usage chunk; zero when there was none.
	PromptTokens, CompletionTokens, CachedTokens int64
	// Asked is the answer's length the request asked for, its max_tokens:
	// with ignore_eos, how long the answer is when served. Zero when it
	// asked for none.
	Asked int64
}

// OutputTokens is the answer's length: the usage's completion tokens when
// the server sent them, else the token events counted.
func (r *Result) OutputTokens() int64 {
	if r.CompletionTokens > 0 {
		return r.CompletionTokens
	}
	return int64(r.Tokens)
}

// askedTokens is the request's demand in output tokens: Asked, or, when it
// asked for no length, what was served of it.
func (r *Result) askedTokens() int64 {
	if r.Asked == 0 && r.Outcome == OutcomeOK {
		return r.OutputTokens()
	}
	return r.Asked
}

// TPOT is the mean time per output token after the first, and false for
// an answer of fewer than two tokens.
func (r *Result) TPOT() (time.Duration, bool) {
	n := r.OutputTokens()
	if r.Tokens == 0 || n < 2 {
		return 0, false
	}
	return (r.LastToken - r.TTFT) / time.Duration(n-1), true
}

// MetSLO reports whether the request completed within both parts of its
// SLO. A rejected, dropped or failed request never meets it; an answer too
// short for a TPOT meets that part.
func (r *Result) MetSLO() bool {
	if r.Outcome != OutcomeOK {
		return false
	}
	if r.SLO.TTFT > 0 && (r.Tokens == 0 || r.TTFT > r.SLO.TTFT) {
		return false
	}
	if tpot, ok := r.TPOT(); r.SLO.TPOT > 0 && ok && tpot > r.SLO.TPOT {
		return false
	}
	return true
}

// Driver sends a workload to one OpenAI-compatible endpoint.
type Driver struct {
	Client *http.Client
	// URL is the chat completions endpoint,
	// such as http://127.0.0.1:8080/v1/chat/completions.
	URL string
	// URLs, when it holds more than one, are chat completions endpoints
	// alike, such as gateways in front of one pool: each request goes to
	// one of them at random, drawn from Seed in schedule order, and URL is
	// unused.
	URLs  []string
	Seed  uint64
	Model string
	// APIKey, when set, is sent as a bearer token; Keys, by tenant, wins
	// over it for the tenants it names.
	APIKey string
	Keys   map[string]string
	// Cap, when positive, is the most requests in flight at once; an
	// arrival that finds the cap reached is dropped, not delayed, so the
	// schedule stays open-loop.
	Cap int
	// Drain is how long requests still in flight after the last arrival
	// may run on before they are cut and counted as errors; zero means
	// until they end.
	Drain time.Duration
	// Progress, when set, is updated as requests start and end.
	Progress *Progress
}

// Run sends reqs on their schedule, starting now, and returns one Result
// per request in the same order. It returns early, with the requests not
// yet sent counted as dropped, when ctx ends.
func (d *Driver) Run(ctx context.Context, reqs []Request) []Result {
	results := make([]Result, len(reqs))
	for i := range reqs {
		r := &reqs[i]
		results[i] = Result{Tenant: r.Tenant, Class: r.Class, SLO: r.SLO, Asked: int64(r.MaxTokens)}
	}
	reqCtx, cut := context.WithCancel(context.WithoutCancel(ctx))
	defer cut()
	var wg sync.WaitGroup
	var inflight atomic.Int64
	start := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	pick := d.picker()
	i := 0
schedule:
	for ; i < len(reqs); i++ {
		r := &reqs[i]
		url := pick()
		if wait := r.At - time.Since(start); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
				break schedule
			}
		}
		res := &results[i]
		if d.Cap > 0 && inflight.Load() >= int64(d.Cap) {
			res.Outcome = OutcomeDropped
			res.Err = "concurrency cap reached"
			d.Progress.dropped()
			continue
		}
		inflight.Add(1)
		d.Progress.started()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer inflight.Add(-1)
			d.do(reqCtx, url, r, res, start)
			d.Progress.done(res.Outcome)
		}()
	}
	for ; i < len(reqs); i++ {
		results[i].Outcome, results[i].Err = OutcomeDropped, "run cancelled"
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	var drain <-chan time.Time
	if d.Drain > 0 {
		t := time.NewTimer(d.Drain)
		defer t.Stop()
		drain = t.C
	}
	select {
	case <-finished:
	case <-drain:
		cut()
		<-finished
	case <-ctx.Done():
		cut()
		<-finished
	}
	return results
}

// urlStream is the PCG stream that spreads requests over Driver.URLs.
const urlStream = 0x75726c73 // "urls"

// picker returns the endpoint of each request in turn.
func (d *Driver) picker() func() string {
	if len(d.URLs) <= 1 {
		url := d.URL
		if len(d.URLs) == 1 {
			url = d.URLs[0]
		}
		return func() string { return url }
	}
	rng := rand.New(rand.NewPCG(d.Seed, urlStream))
	return func() string { return d.URLs[rng.IntN(len(d.URLs))] }
}

// do sends one request to url and measures its stream into res.
func (d *Driver) do(ctx context.Context, url string, r *Request, res *Result, runStart time.Time) {
	body := requestBody(d.Model, r)
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		res.Outcome, res.Err = OutcomeError, err.Error()
		return
	}
	h := hreq.Header
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "text/event-stream")
	if r.Tenant != "" {
		h.Set("x-llmgw-tenant", r.Tenant)
	}
	if r.Class != "" {
		h.Set("x-llmgw-priority", r.Class)
	}
	if key := d.key(r.Tenant); key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
	t0 := time.Now()
	res.Start = t0.Sub(runStart)
	res.Lag = res.Start - r.At
	resp, err := d.Client.Do(hreq)
	if err != nil {
		res.Outcome, res.Err, res.E2E = OutcomeError, transportError(err), time.Since(t0)
		if ctx.Err() != nil {
			res.Err = "cut at the end of the drain: " + res.Err
		}
		return
	}
	defer resp.Body.Close()
	res.Status = resp.StatusCode
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		msg := errorMessage(resp.Body)
		res.E2E = time.Since(t0)
		res.Outcome, res.Err = OutcomeError, fmt.Sprintf("status %d: %s", resp.StatusCode, msg)
		if resp.StatusCode == http.StatusTooManyRequests {
			res.Outcome = OutcomeRejected
		}
		return
	}
	if err := measureStream(resp.Body, t0, res); err != nil {
		res.Outcome, res.Err = OutcomeError, err.Error()
		if ctx.Err() != nil {
			res.Err = "cut at the end of the drain: " + res.Err
		}
		return
	}
	res.Outcome = OutcomeOK
}

func (d *Driver) key(tenant string) string {
	if k, ok := d.Keys[tenant]; ok {
		return k
	}
	return d.APIKey
}

// transportError is err without the request URL net/http wraps it in.
func transportError(err error) string {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) && ue.Unwrap() != nil {
		return ue.Unwrap().Error()
	}
	return err.Error()
}

// maxErrorBody is how much of an error response is read for its message.
const maxErrorBody = 4096

// errorMessage is the message of an OpenAI-style error body, or the body's
// start when it is not one.
func errorMessage(body io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(body, maxErrorBody))
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
		return e.Error.Message
	}
	return string(bytes.TrimSpace(b))
}

// Stream errors.
var (
	errNoDone     = errors.New("stream ended without [DONE]")
	errErrorEvent = errors.New("stream carried an error event")
	errAfterDone  = errors.New("stream went on after [DONE]")
)

// measureStream reads an OpenAI chat completion stream, timing each token
// event from t0, and fills res's token figures and usage. It fails when
// the stream breaks, ends without [DONE], or carries an error event.
func measureStream(body io.Reader, t0 time.Time, res *Result) error {
	er := NewEventReader(body)
	var last time.Duration
	for {
		ev, err := er.Next()
		if err != nil {
			res.E2E = time.Since(t0)
			if err == io.EOF {
				return errNoDone
			}
			return fmt.Errorf("reading stream: %w", err)
		}
		now := time.Since(t0)
		if bytes.Equal(ev.Data, openai.Done) {
			res.E2E = now
			if _, err := er.Next(); err != io.EOF {
				return errAfterDone
			}
			return nil
		}
		token := ev.Name != "error" && openai.HasToken(ev.Data)
		// A chunk with a token is no error object, so most events skip
		// the error scan.
		if !token && (ev.Name == "error" || isErrorChunk(ev.Data)) {
			res.E2E = now
			return fmt.Errorf("%w: %s", errErrorEvent, chunkErrorMessage(ev.Data))
		}
		if token {
			if res.Tokens == 0 {
				res.TTFT = now
			} else {
				res.Gaps = append(res.Gaps, float32((now - last).Seconds()))
			}
			res.Tokens++
			last = now
			res.LastToken = now
		}
		if openai.HasUsage(ev.Data) {
			var u struct {
				Usage struct {
					Prompt     int64 `json:"prompt_tokens"`
					Completion int64 `json:"completion_tokens"`
					Details    struct {
						Cached int64 `json:"cached_tokens"`
					} `json:"prompt_tokens_details"`
				} `json:"usage"`
			}
			if err := json.Unmarshal(ev.Data, &u); err != nil {
				return fmt.Errorf("usage chunk: %w", err)
			}
			res.PromptTokens, res.CompletionTokens, res.CachedTokens = u.Usage.Prompt, u.Usage.Completion, u.Usage.Details.Cached
		}
	}
}

// isErrorChunk reports whether a chunk is an error object: a top-level
// "error" key, which a raw quote inside JSON text cannot fake.
func isErrorChunk(data []byte) bool {
	i := bytes.Index(data, []byte(`"error"`))
	if i < 0 {
		return false
	}
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	return json.Unmarshal(data, &e) == nil && len(e.Error) > 0 && string(e.Error) != "null"
}

func chunkErrorMessage(data []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &e) == nil && e.Error.Message != "" {
		return e.Error.Message
	}
	if len(data) > 200 {
		data = data[:200]
	}
	return string(data)
}

// requestBody is the JSON of a streamed chat completion for r, asking for
// the usage chunk. Message texts are written piece by piece.
func requestBody(model string, r *Request) []byte {
	n := 256
	for _, m := range r.Prompt {
		for _, p := range m.Content {
			n += len(p) + 16
		}
	}
	b := make([]byte, 0, n)
	b = append(b, `{"model":`...)
	b = appendJSONString(b, model)
	b = append(b, `,"messages":[`...)
	for i, m := range r.Prompt {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"role":`...)
		b = appendJSONString(b, m.Role)
		b = append(b, `,"content":"`...)
		for _, p := range m.Content {
			b = appendJSONText(b, p)
		}
		b = append(b, `"}`...)
	}
	b = append(b, `],"max_tokens":`...)
	b = strconv.AppendInt(b, int64(r.MaxTokens), 10)
	if r.IgnoreEOS {
		b = append(b, `,"ignore_eos":true`...)
	}
	b = append(b, `,"stream":true,"stream_options":{"include_usage":true}}`...)
	return b
}

func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	b = appendJSONText(b, s)
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"

// appendJSONText appends s escaped for the inside of a JSON string.
func appendJSONText(b []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	return append(b, s[start:]...)
}
