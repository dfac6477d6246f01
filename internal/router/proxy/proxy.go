// Package proxy makes one call to one upstream endpoint and relays its
// answer to the client: whole for a plain response, event by event for a
// stream. What the call came to is its Outcome, which the router reads to
// retry, account and time.
package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// Outcome is what one upstream call came to.
type Outcome struct {
	// Status is what the client was answered, or would be: the upstream's
	// status when it was relayed, the gateway's own on failure, and
	// openai.StatusClientClosed when the client went away.
	Status int
	// Usage is the answer's token accounting: the backend's, or counted by
	// the relay when Estimated. Nil when there was no answer.
	Usage     *openai.Usage
	Estimated bool
	// TTFT is from the request's arrival to the first token of a stream,
	// or to the response headers of a plain answer.
	TTFT time.Duration
	// Decode is from the first token to the last, for streams.
	Decode time.Duration
	// Wrote reports whether anything reached the client. A call that wrote
	// nothing may be tried again elsewhere.
	Wrote bool
	// Reason names the upstream's fault (reason.go); ReasonNone when the
	// upstream did its part.
	Reason Reason
	// Err is the failure for the log and, while nothing was written, for
	// the client (an *openai.Error). Nil on success.
	Err error
	// FinishReason is the answer's first finish_reason (stop, length,
	// tool_calls...), as openai.FinishReason reads it; empty when it gave
	// none, or when a plain answer's call did not ask (Call.Finish).
	FinishReason string
	// RetryAfter is how long an upstream that answered 429 asked not to
	// be called again (its Retry-After); zero when it did not say.
	RetryAfter time.Duration
}

// Retryable reports whether another endpoint may be tried: the upstream
// failed and the client has seen nothing yet.
func (o *Outcome) Retryable() bool {
	return !o.Wrote && o.Reason != ReasonNone && o.Status != openai.StatusClientClosed
}

// Call is one request to send upstream.
type Call struct {
	// URL is the endpoint's base URL joined with the API path, and Header
	// what the request carries (Headers builds it). Do only reads them, so
	// one of each may serve every call to an endpoint.
	URL    *url.URL
	Header http.Header
	Body   []byte
	Stream bool
	// StripUsage drops the usage-only chunk from the stream: the client did
	// not ask for it, the gateway did.
	StripUsage bool
	// Start is when the client's request arrived; TTFT counts from it.
	Start time.Time
	// FirstByte bounds the wait for a stream's first event or a plain
	// answer's headers; Idle bounds the silence between events. Zero
	// means no bound.
	FirstByte, Idle time.Duration
	// Deadline, when set, bounds the whole call: past it the call ends
	// with errDeadline. A caller that retries passes each call the
	// same one, so that it bounds the request.
	Deadline time.Time
	// KeepAlive, when positive, sends an SSE comment after this long
	// without an event.
	KeepAlive time.Duration
	// PromptEstimate is the prompt's size in tokens, used when the backend
	// reports no usage.
	PromptEstimate int64
	// Gap, when set, observes every gap between streamed token events.
	Gap prometheus.Observer
	// Model, when set, is the model every answer object names, whatever
	// the upstream called it: the catalog's name, not the backend's.
	Model string
	// FirstToken, when set, is called once, on the calling goroutine,
	// when a stream's first token arrives or a plain answer's headers do.
	FirstToken func(time.Time)
	// Translate, when set, writes the answer in the client's API rather
	// than as the upstream's chat completion; see openai.Translator.
	Translate openai.Translator
	// Provider, when set, reads an upstream that speaks another API as
	// chat completions; see openai.Provider.
	Provider openai.Provider
	// Finish, when set, reads a plain answer's finish_reason into the
	// Outcome; a stream's is read whenever its finishing chunk passes.
	Finish bool
	// Hold are OpenAI error codes (context_length_exceeded...) an
	// upstream's error about the request is held back for rather than
	// relayed: its Outcome writes nothing and carries it as Err, for the
	// caller to send the request to another model or answer it itself.
	Hold []string
	// Sign, when set, signs each request sent (AWS's SigV4), given a
	// copy of Header to add to; an error is the pool's credentials'
	// failing, a 502 that is the upstream's fault.
	Sign Signer
	// Tap, when set, is told each answer as the upstream sent it.
	Tap Tap
}

// Signer signs a call's request, whose body is body, as it is sent.
type Signer interface {
	Sign(ctx context.Context, req *http.Request, body []byte) error
}

// Proxy sends calls upstream. It is safe for concurrent use.
type Proxy struct {
	// rt carries the calls. It is used directly, not through an
	// http.Client: a call to an inference server never follows a redirect
	// or keeps cookies, and the client's copying of headers for those is
	// work on every request.
	rt http.RoundTripper
}

// maxResponseBytes bounds a plain (not streamed) answer read into memory;
// a completion of 100k tokens is well under 2 MiB of JSON, a batch of
// embeddings can be tens. A larger answer is a 502.
var maxResponseBytes int64 = 64 << 20

// idleConnTimeout is how long an upstream connection is kept idle for
// reuse. Inference servers close theirs after 5 s (uvicorn) or more, and
// a closed one is found before it is used; one kept longer only holds a
// socket.
const idleConnTimeout = 90 * time.Second

// New is a Proxy that sends calls through rt, or when rt is nil through
// llmgw's own HTTP/1.1 client for http:// endpoints and StdTransport for
// the rest, whose connections time out dialling after connect.
func New(connect time.Duration, rt http.RoundTripper) *Proxy {
	if rt != nil {
		return &Proxy{rt: rt}
	}
	return &Proxy{rt: newH1Transport(newDialer(connect), idleConnTimeout, StdTransport(connect))}
}

func newDialer(connect time.Duration) *net.Dialer {
	return &net.Dialer{Timeout: connect, KeepAlive: 30 * time.Second}
}

// StdTransport is net/http's Transport as llmgw sets it up for upstream
// calls, whose connections time out dialling after connect: what carries
// https:// and proxied calls, and every call when the gateway is told to
// use net/http's client alone.
func StdTransport(connect time.Duration) *http.Transport {
	return &http.Transport{
		Proxy:       http.ProxyFromEnvironment,
		DialContext: newDialer(connect).DialContext,
		// Inference servers take many concurrent streams from one gateway;
		// keeping as many idle connections as streams avoids a dial per request.
		MaxIdleConns:        0,
		MaxIdleConnsPerHost: maxIdlePerHost,
		IdleConnTimeout:     idleConnTimeout,
		// Bodies are already compressed as little as they need to be, and a
		// gzip layer would hold back streamed events.
		DisableCompression: true,
		// Each open stream keeps its connection's buffers. A request's
		// headers and a small body fit in 2 KiB, and a larger body is
		// written straight through; a streamed event is a few hundred bytes.
		// The read buffer also bounds a chunk's size line and a trailer,
		// as maxChunkLine and maxTrailer do in llmgw's own client.
		WriteBufferSize: 2 << 10,
		ReadBufferSize:  2 << 10,
		// The same bound on an answer's heads as llmgw's own client.
		MaxResponseHeaderBytes: maxResponseHead,
	}
}

// CloseIdle closes idle upstream connections.
func (p *Proxy) CloseIdle() {
	if t, ok := p.rt.(interface{ CloseIdleConnections() }); ok {
		t.CloseIdleConnections()
	}
}

// CloseIdleTo gives up the connections to one endpoint, host as in its
// URL's Host (host:port): the idle ones close now, and those in use close
// when their answers end instead of going back to the pool. Calls made to
// it later pool their connections as before. A transport that cannot
// close one endpoint's connections (net/http's, for https:// endpoints or
// all of them) has all of its idle ones closed instead.
func (p *Proxy) CloseIdleTo(host string) {
	switch t := p.rt.(type) {
	case *h1Transport:
		t.closeIdleTo(host)
	case interface{ CloseIdleConnections() }:
		t.CloseIdleConnections()
	}
}

// Do sends c upstream and relays the answer to w. It writes nothing when the
// upstream fails before answering, so that the caller may try elsewhere.
func (p *Proxy) Do(ctx context.Context, w http.ResponseWriter, c *Call) Outcome {
	cs := new(callState)
	dog, end := &cs.dog, &cs.end
	end.parent = ctx
	dog.start(end, c.FirstByte, c.Idle, c.Deadline)
	defer dog.stop()
	defer end.unbind()

	if c.URL == nil {
		return Outcome{Status: http.StatusBadGateway, Reason: ReasonConnect, Err: openai.BadGateway(errNoURL)}
	}
	cs.body.Reset(c.Body)
	cs.req = http.Request{
		Method:        http.MethodPost,
		URL:           c.URL,
		Host:          c.URL.Host,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        c.Header,
		Body:          &cs.body,
		ContentLength: int64(len(c.Body)),
	}
	if c.Sign != nil {
		// Signed for the endpoint and the moment it is sent: each call
		// signs its own copy of the headers, under a context the call's
		// end cancels (a credential fetch is interrupted by nothing else).
		cs.req.Header = c.Header.Clone()
		sctx, cancel := end.bind(ctx)
		err := c.Sign.Sign(sctx, &cs.req, c.Body)
		cancel(nil)
		if err != nil {
			if o, ok := cancelled(end); ok {
				return o
			}
			return Outcome{Status: http.StatusBadGateway, Reason: ReasonStatusAuth, Err: openai.UpstreamAuth(err)}
		}
	}
	resp, err := p.roundTrip(ctx, end, &cs.req, c.Body)
	if err != nil {
		return failed(end, ReasonConnect, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// net/http's transport returns a 101, which llmgw's own refuses:
		// what follows it is no answer.
		return failed(end, ReasonConnect, errSwitchingProtocols)
	}
	c.tap(resp)

	if c.Stream && resp.StatusCode == http.StatusOK && c.isStream(resp.Header) {
		// A stream lasts seconds and needs only the body: the answer's
		// headers and the request it answered can go.
		resp.Header, resp.Request = nil, nil
		return p.relay(end, dog, w, c, resp)
	}
	dog.answered()
	if c.FirstToken != nil {
		c.FirstToken(time.Now())
	}
	if resp.StatusCode != http.StatusOK {
		return p.upstreamError(end, w, c, resp)
	}
	return p.copyPlain(end, w, c, resp, &cs.usage)
}

// roundTrip sends req, a call with body, which ends when parent does or
// end is ended. llmgw's own client is handed both beside the request; a
// request for net/http's transport carries a context bound to both, in a
// copy, cancelled when the call is done with (ender.unbind).
func (p *Proxy) roundTrip(parent context.Context, end *ender, req *http.Request, body []byte) (*http.Response, error) {
	if t, ok := p.rt.(*h1Transport); ok && t.handles(req) {
		if body == nil {
			body = []byte{} // not nil: the call can be sent again
		}
		return t.roundTrip(parent, end, req, body)
	}
	req.GetBody = func() (io.ReadCloser, error) { return newRequestBody(body), nil }
	ctx, _ := end.bind(parent)
	return p.rt.RoundTrip(req.WithContext(ctx))
}

// Headers is what a call to an OpenAI-compatible server carries: the JSON
// content type, for a stream the event-stream Accept, and with an API key
// its bearer token. The key is sent, never logged.
func Headers(apiKey string, stream bool) http.Header {
	h := http.Header{"Content-Type": {"application/json"}}
	if stream {
		h["Accept"] = []string{"text/event-stream"}
	}
	if apiKey != "" {
		h["Authorization"] = []string{"Bearer " + apiKey}
	}
	return h
}

// requestBody is a call's body: a reader that closes, in one allocation.
type requestBody struct{ bytes.Reader }

func newRequestBody(b []byte) *requestBody {
	r := new(requestBody)
	r.Reset(b)
	return r
}

func (*requestBody) Close() error { return nil }

// isStream reports whether an answer with headers h is a stream: SSE,
// or the binary stream of c's Provider when it has one.
func (c *Call) isStream(h http.Header) bool {
	if bs, ok := c.Provider.(openai.BinaryStreamer); ok {
		return strings.HasPrefix(h.Get("Content-Type"), bs.StreamContentType())
	}
	return isEventStream(h)
}

func isEventStream(h http.Header) bool {
	ct := h.Get("Content-Type")
	return len(ct) >= 17 && ct[:17] == "text/event-stream"
}

// failed is the Outcome of a call that broke before anything was written.
func failed(end *ender, reason Reason, err error) Outcome {
	if o, ok := cancelled(end); ok {
		return o
	}
	return Outcome{Status: http.StatusBadGateway, Reason: reason, Err: openai.BadGateway(err)}
}

// cancelled is the Outcome of a call that was ended, by its watchdog or
// its caller's context, and false if it was not.
func cancelled(end *ender) (Outcome, bool) {
	cause := end.why(end.parent)
	switch {
	case cause == nil:
		return Outcome{}, false
	case errors.Is(cause, errFirstByte):
		return Outcome{Status: http.StatusGatewayTimeout, Reason: ReasonFirstByteTimeout,
			Err: openai.GatewayTimeout("The model's backend did not answer in time.", cause)}, true
	case errors.Is(cause, errIdle):
		return Outcome{Status: http.StatusGatewayTimeout, Reason: ReasonIdleTimeout,
			Err: openai.GatewayTimeout("The model's backend stalled mid-answer.", cause)}, true
	case errors.Is(cause, errDeadline):
		// The gateway's own limit on the whole request: not the upstream's
		// fault alone, so no reason is counted against it.
		return Outcome{Status: http.StatusGatewayTimeout,
			Err: openai.GatewayTimeout("The request took longer than its time limit.", cause)}, true
	}
	// The client went away: not the upstream's fault.
	return Outcome{Status: openai.StatusClientClosed, Err: cause}, true
}

// relayedStatus reports whether an upstream's error status is about the
// client's own request, and so relayed to it: a malformed request (400),
// an unknown model or path (404), a body too large (413), or one that does
// not validate (422). Any other status is the upstream's trouble or the
// gateway's, never the client's.
func relayedStatus(code int) bool {
	switch code {
	case http.StatusBadRequest, http.StatusNotFound, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		return true
	}
	return false
}

// upstreamError handles a non-200 answer. One about the client's request
// (relayedStatus) is relayed with its secrets redacted, a body that is no
// JSON replaced by the gateway's own words. Every other is the upstream's
// fault, left for the caller to retry or report in the gateway's own
// words, the upstream's body given to the log alone, redacted: a 429 as
// the backend's being full, a 401 or 403 as its refusing the gateway's
// credentials, the rest as its failing.
func (p *Proxy) upstreamError(end *ender, w http.ResponseWriter, c *Call, resp *http.Response) Outcome {
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return failed(end, ReasonStreamBroken, err)
	}
	ttft := time.Since(c.Start)
	code := resp.StatusCode
	if code == http.StatusTooManyRequests {
		wait := retryAfter(resp.Header.Get("Retry-After"), time.Now())
		return Outcome{Status: code, TTFT: ttft, Reason: ReasonStatus429, RetryAfter: wait,
			Err: openai.Overloaded("The model's backends are at capacity; try again shortly.", max(1, int((wait+time.Second-1)/time.Second)))}
	}
	// The credentials of the call as it was sent: a signed call's are in
	// its own copy of the headers, not in c.Header.
	sent := c.Header
	if resp.Request != nil && resp.Request.Header != nil {
		sent = resp.Request.Header
	}
	keys := sentKeys(sent)
	if !relayedStatus(code) {
		o := Outcome{Status: http.StatusBadGateway, TTFT: ttft}
		cause := fmt.Errorf("upstream answered %d: %s", code, loggedBody(body, keys))
		switch {
		case code == http.StatusUnauthorized || code == http.StatusForbidden:
			o.Reason, o.Err = ReasonStatusAuth, openai.UpstreamAuth(cause)
		case code >= 500:
			o.Reason, o.Err = ReasonStatus5xx, openai.BadGateway(cause)
		default:
			o.Reason, o.Err = ReasonStatusOther, openai.BadGateway(cause)
		}
		return o
	}
	if c.Provider != nil {
		body = c.Provider.Error(code, body)
	}
	body, ok := redact(body, keys)
	if !ok {
		body = upstreamErrorOf(code, nil).Body()
	}
	if len(c.Hold) > 0 {
		if e, held := heldError(code, body, c.Hold); held {
			return Outcome{Status: code, TTFT: ttft, Err: e}
		}
	}
	o := Outcome{Status: code, TTFT: ttft, Wrote: true}
	if c.Translate != nil {
		body = c.Translate.ErrorBody(upstreamErrorOf(code, body))
	}
	if err := writeAnswer(w, c.Idle, code, "application/json", "", body); err != nil {
		o.Status, o.Err = openai.StatusClientClosed, err
	}
	return o
}

// maxRetryAfter bounds a Retry-After read: a day, past any provider's
// window; the pool bounds how long it cools an endpoint for itself.
const maxRetryAfter = 24 * time.Hour

// retryAfter is a Retry-After value, seconds or an HTTP date, as a wait
// from now: zero when it is absent, malformed or past.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		return min(time.Duration(min(n, int64(maxRetryAfter/time.Second)))*time.Second, maxRetryAfter)
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return min(t.Sub(now), maxRetryAfter)
	}
	return 0
}

// writeAnswer writes a whole answer to the client, given idle (zero: no
// bound) to take it: a client that does not read cannot hold the call.
// The server lifts the deadline once the answer is finished. An error is
// a client that left. A writer that cannot set a deadline writes without
// one.
func writeAnswer(w http.ResponseWriter, idle time.Duration, status int, contentType, length string, body []byte) error {
	if idle > 0 {
		http.NewResponseController(w).SetWriteDeadline(time.Now().Add(idle))
	}
	if length == "" {
		length = strconv.Itoa(len(body))
	}
	// Both values in one allocation, each its own slice of one: an Add
	// to either appends into a new array, not into the other.
	vals := []string{contentType, length}
	h := w.Header()
	h["Content-Type"], h["Content-Length"] = vals[0:1:1], vals[1:2:2]
	w.WriteHeader(status)
	_, err := w.Write(body)
	return err
}

// firstAlloc is the most a body's buffer starts at, whatever length its
// sender claims; the rest is allocated as the bytes arrive. A peer that
// claims 8 MiB and sends one byte holds 64 KiB, not 8 MiB; a body of up
// to 64 KiB, nearly every prompt and answer, is read in one allocation.
const firstAlloc = 64 << 10

// ReadBody reads a body to its end: a client's request, or an upstream's
// plain answer. Its length, when known (not -1), sizes the buffer as far
// as firstAlloc and bounds its growth; a body that ends short of it or
// runs past it is an error.
func ReadBody(r io.Reader, length int64) ([]byte, error) {
	size := int64(512)
	if length >= 0 {
		size = min(length+1, firstAlloc) // +1: room to see a body that runs past its length
	}
	b := make([]byte, 0, size)
	for {
		if len(b) == cap(b) {
			grow := int64(cap(b)) // doubling, but not past what was claimed
			if length >= 0 {
				grow = min(grow, length+1-int64(cap(b)))
			}
			b = append(b, make([]byte, grow)...)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if errors.Is(err, io.EOF) || length >= 0 && int64(len(b)) > length {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if length >= 0 && int64(len(b)) != length {
		return nil, fmt.Errorf("body of %d bytes, not its Content-Length of %d", len(b), length)
	}
	return b, nil
}

// readAnswer reads a plain answer of length bytes, or when length is
// unknown (-1) to its end. An answer over maxResponseBytes is an error:
// cut to the limit it would no longer be the answer, so it is refused
// rather than passed on in part. So is one shorter or longer than its
// length.
func readAnswer(body io.Reader, length int64) ([]byte, error) {
	if length > maxResponseBytes {
		return nil, errAnswerTooLarge
	}
	if length >= 0 {
		// ReadBody reads no more than length+1 bytes.
		return ReadBody(body, length)
	}
	b, err := ReadBody(io.LimitReader(body, maxResponseBytes+1), length)
	if err == nil && int64(len(b)) > maxResponseBytes {
		return nil, errAnswerTooLarge
	}
	return b, err
}

// sameLength is the upstream's Content-Length value when it is body's
// length written as writeAnswer writes it, with no leading zero, and ""
// when it is not: a body the gateway changed, or one sent in chunks.
func sameLength(resp *http.Response, body []byte) string {
	v := resp.Header["Content-Length"]
	if len(v) != 1 || resp.ContentLength != int64(len(body)) || v[0] == "" || v[0][0] == '0' && len(v[0]) > 1 {
		return ""
	}
	return v[0]
}

// errAnswerTooLarge is an answer over maxResponseBytes.
var errAnswerTooLarge = fmt.Errorf("upstream answer is larger than %d bytes", maxResponseBytes)

// copyPlain relays a whole (not streamed) answer, its usage read into
// usage.
func (p *Proxy) copyPlain(end *ender, w http.ResponseWriter, c *Call, resp *http.Response, usage *openai.Usage) Outcome {
	ttft := time.Since(c.Start)
	body, err := readAnswer(resp.Body, resp.ContentLength)
	if err != nil {
		o := failed(end, ReasonStreamBroken, err)
		o.TTFT = ttft
		return o
	}
	if c.Provider != nil {
		if body, err = c.Provider.Answer(body); err != nil {
			o := failed(end, ReasonBadAnswer, err)
			o.TTFT = ttft
			return o
		}
	}
	o := Outcome{Status: http.StatusOK, TTFT: ttft, Wrote: true}
	if c.Finish {
		o.FinishReason = openai.FinishReason(body)
	}
	if ok, err := openai.ReadUsage(body, usage); !ok || err != nil {
		*usage = openai.Usage{PromptTokens: c.PromptEstimate}
		o.Estimated = true
	}
	o.Usage = usage
	if c.Model != "" {
		body, _ = openai.RenameModel(nil, body, c.Model)
	}
	contentType := resp.Header.Get("Content-Type")
	if c.Translate != nil {
		if body, err = c.Translate.Answer(body); err != nil {
			o = failed(end, ReasonBadAnswer, err)
			o.TTFT = ttft
			return o
		}
		contentType = "application/json"
	}
	if err := writeAnswer(w, c.Idle, http.StatusOK, contentType, sameLength(resp, body), body); err != nil {
		o.Status, o.Err = openai.StatusClientClosed, err
	}
	return o
}
