package router

// The handler, in the order a request lives: route, read and parse the
// body (translating it to chat completions for the Messages and Responses
// APIs), find the model, authenticate, admit, dispatch, account. Each step
// past parsing has its own file. A count of a prompt's tokens takes every
// step but dispatch, and is answered by the gateway itself.

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/limits"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/admission"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/observe"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/pool"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/proxy"
	"gitea.mynodes.xyz/ilker/llmgw/internal/translate"
)

// api is one endpoint the router serves.
type api struct {
	upstreamPath string // appended to an endpoint's base URL
	// generates reports whether its answers are generated tokens, which
	// are reserved against token limits and may be streamed; embeddings
	// are not.
	generates bool
	dialect   *dialect // nil: the body goes upstream as it came
	// counts reports whether the gateway answers it itself with the
	// prompt's size in tokens, as the Messages API's count_tokens does:
	// it is read, resolved and admitted as any request, taking a request
	// and no tokens from its limits, and never dispatched.
	counts bool
	// lists names the field whose list of prompts a backend answers, or
	// embeds, one by one (openai.Request.Prompts); empty where a request
	// is one prompt.
	lists string
}

var apis = map[string]api{
	"/v1/chat/completions":      {upstreamPath: "/chat/completions", generates: true},
	"/v1/completions":           {upstreamPath: "/completions", generates: true, lists: "prompt"},
	"/v1/embeddings":            {upstreamPath: "/embeddings", lists: "input"},
	"/v1/messages":              {upstreamPath: "/chat/completions", generates: true, dialect: anthropicMessages},
	"/v1/messages/count_tokens": {dialect: anthropicCount, counts: true},
	"/v1/responses":             {upstreamPath: "/chat/completions", generates: true, dialect: openaiResponses},
}

// parsedRequest is a request on its way through the router.
type parsedRequest struct {
	openai.Request
	id    string
	api   api
	start time.Time
	body  []byte
	model *catalog.Model // the catalog entry the name resolved to
	// fellBack is the class of failure whose fallback the calls now go
	// to; empty while they go to the model or its ordinary fallbacks.
	fellBack catalog.ErrorClass
	key      *tenant.Key // nil without authentication
	estimate int64       // prompt tokens, estimated from the body
	prompts  int64       // how many prompts it lists, each answered on its own; at least 1
	reserve  limits.Reservation
	reserved bool              // whether reserve holds a reservation to settle
	class    admission.Class   // its priority class
	tenant   string            // the tenant admission shares the queue by; empty for none
	salt     domainSalt        // what keeps its prompt in its isolation domain
	ticket   *admission.Ticket // its hold on its pool's gate; nil without admission
	// modelValue is the X-Llmgw-Model header's value, made with the
	// request id's (serve); nil before. Only setModelHeader writes it.
	modelValue []string

	// answer makes the translator of a translated API's answer, given
	// the model; nil for chat, completions and embeddings.
	answer      func(model string) openai.Translator
	inputTokens int64             // a count's answer: the prompt's size in tokens
	translator  openai.Translator // answer's, once the model is known
	// hosted are the tools of a translated request that run on a
	// provider's side, which its translation left out.
	hosted []translate.HostedTool
	// anthropicVersion and anthropicBeta are an Anthropic client's
	// anthropic-version and anthropic-beta headers, the latter's lines
	// joined with commas.
	anthropicVersion, anthropicBeta string
	// reasoning is what a Messages request asked of the model's
	// reasoning, told to each pool in its own terms (pools.go); zero
	// for other APIs.
	reasoning translate.Reasoning
	// messages is a Messages request's body as the client sent it, which
	// an anthropic pool is sent in place of the chat body (pools.go);
	// nil for other APIs, and once the model is known to have no
	// anthropic pool. own is it as the request scanner reads it, and
	// ownErr why the scanner refused it, once the model is known to have
	// one.
	messages []byte
	own      openai.Request
	ownErr   error

	// span is the request's SERVER span, and ctx the request's context
	// holding it; both nil when tracing is off (account.go).
	span trace.Span
	ctx  context.Context
	// snap is the snapshot the request is served from, read once when
	// its model is found; nil before.
	snap *snapshot
	// done is what the request came to, filled in and handed to the
	// observers once it ends (account.go).
	done observe.Completed
	// route is the request as routing sees it, made ready for each pool
	// it is sent to (dispatch.go).
	route pool.Route
}

// ServeHTTP answers the OpenAI API, and Anthropic's Messages API and
// OpenAI's Responses API by translation.
func (r *Router) ServeHTTP(w http.ResponseWriter, hr *http.Request) {
	path := hr.URL.Path
	switch path {
	case "/healthz":
		w.Write([]byte("ok\n"))
		return
	case "/v1/models":
		if hr.Method != http.MethodGet {
			openai.WriteError(w, openai.MethodNotAllowed(hr.Method))
			return
		}
		r.serveModels(w, hr)
		return
	case "/v1/llmgw/usage":
		r.serveSelfUsage(w, hr)
		return
	case "/mcp":
		r.serveMCP(w, hr)
		return
	}
	a, ok := apis[path]
	if !ok {
		openai.WriteError(w, openai.NotFound(path))
		return
	}
	if hr.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		a.writeError(w, openai.MethodNotAllowed(hr.Method))
		return
	}
	r.serveCompletion(w, hr, a)
}

// serveModels answers GET /v1/models with every model and alias the key
// may use, as one it may not use answers like one that does not exist:
// in the shape of Anthropic's list, one page, to an Anthropic client (one
// that sends anthropic-version), else in OpenAI's.
func (r *Router) serveModels(w http.ResponseWriter, hr *http.Request) {
	anthropic := hr.Header.Get("anthropic-version") != ""
	writeError := openai.WriteError
	if anthropic {
		writeError = translate.WriteAnthropicError
	}
	s := r.snap.Load()
	if s == nil {
		writeError(w, openai.Unavailable("No catalog is loaded yet.", nil))
		return
	}
	var key *tenant.Key
	if r.opts.Auth != nil {
		var err error
		if key, err = authenticate(r.opts.Auth, hr); err != nil {
			writeError(w, err)
			return
		}
	}
	var models []byte
	switch {
	case anthropic:
		models = renderAnthropicModels(s.cat, key)
	case key != nil && len(key.Models) > 0:
		models = renderModels(s.cat, key)
	default:
		models = s.models
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(models)
}

// requests are parsedRequests to reuse: one is a few KiB, most of what a
// request allocates, and so most of what the collector is run for.
// Nothing holds a request past its handler (an observer keeps no
// Completed past its call, and a hedged try returns once its calls
// end), so a request goes back once it is served; one whose handler
// panicked is left to the collector.
var requests = sync.Pool{New: func() any { return new(parsedRequest) }}

// serveCompletion serves a request of api a, its parsedRequest taken from
// requests and put back, emptied, when it is served.
func (r *Router) serveCompletion(w http.ResponseWriter, hr *http.Request, a api) {
	req := requests.Get().(*parsedRequest)
	req.id, req.api, req.start = r.ids.next(), a, time.Now()
	r.serve(w, hr, req)
	*req = parsedRequest{}
	requests.Put(req)
}

// serve takes a request through its steps: receive it, find its model,
// then admit, dispatch and account it; a count is answered once its
// limits are reserved.
func (r *Router) serve(w http.ResponseWriter, hr *http.Request, req *parsedRequest) {
	a := req.api
	// The request id's header value and that of the model that answers
	// it, once dispatched, in one allocation, each its own slice of one:
	// an Add to either appends into a new array, not into the other.
	vals := make([]string, 2)
	vals[0] = req.id
	w.Header()["X-Request-Id"] = vals[0:1:1]
	req.modelValue = vals[1:2:2]
	hr = startSpan(r.tracing, hr, req)
	if err := r.receive(w, hr, req); err != nil {
		r.refuse(w, req, "", err)
		return
	}
	snap, err := r.findModel(w, req)
	if err != nil {
		r.refuse(w, req, "", err)
		return
	}
	if req.Stream && !a.generates {
		r.refuse(w, req, "", openai.BadRequest("stream", "This endpoint cannot be streamed."))
		return
	}
	if a.counts {
		// Answered here, from the prompt alone, with its size in
		// tokens: never queued for a pool's gate nor dispatched.
		if err := r.limits.reserve(hr.Context(), w, req); err != nil {
			r.refuse(w, req, "", err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(append(strconv.AppendInt([]byte(`{"input_tokens":`), req.inputTokens, 10), '}'))
		r.complete(req, dispatchResult{outcome: proxy.Outcome{Status: http.StatusOK}})
		return
	}
	if req.class, err = admission.RequestClass(hr, req.key); err != nil {
		r.refuse(w, req, "", err)
		return
	}
	req.tenant = admission.RequestTenant(hr, req.key)
	if a.generates {
		req.salt = r.iso.of(req.tenant, req.CacheSalt)
	}

	label := req.model.Name
	inflight := r.m.inflight.WithLabelValues(label)
	inflight.Inc()
	defer inflight.Dec()

	if err := r.limits.reserve(hr.Context(), w, req); err != nil {
		r.refuse(w, req, "", err)
		return
	}
	if req.ticket, err = admitSLO(hr.Context(), r.gates, req, snap); err != nil {
		r.refuse(w, req, "", err)
		return
	}
	res := r.dispatch(hr.Context(), w, req, snap)
	if !res.outcome.Wrote && res.outcome.Status != openai.StatusClientClosed {
		a.writeError(w, res.outcome.Err)
	}
	r.complete(req, res)
}

// receive authenticates a request, checks its dialect's headers, and
// reads and parses its body.
func (r *Router) receive(w http.ResponseWriter, hr *http.Request, req *parsedRequest) error {
	// A body that trickles in holds its connection and what it has sent:
	// all of it must arrive within server.body_timeout, the deadline the
	// listener's server sets on every body (h1.Deadlines.Body), past
	// which a read fails with a timeout, answered 408 (parse).
	//
	// The key is in a header: a request without a valid one is refused
	// before its body is read, so that nobody without a key can make the
	// gateway hold a body.
	if r.opts.Auth != nil {
		key, err := authenticate(r.opts.Auth, hr)
		if err != nil {
			return err
		}
		req.key = key
	}
	if d := req.api.dialect; d != nil {
		if err := d.header(hr.Header); err != nil {
			return err
		}
		req.anthropicVersion = hr.Header.Get("anthropic-version")
		req.anthropicBeta = strings.Join(hr.Header["Anthropic-Beta"], ",") // the key as parsed headers hold it: no canonicalising
	}
	return r.parse(hr.Context(), w, hr, req)
}

// findModel resolves a received request's model for its key, in the
// catalog it is then served from, and readies what depends on the model:
// the answer's translator and the hosted tools.
func (r *Router) findModel(w http.ResponseWriter, req *parsedRequest) (*snapshot, error) {
	snap := r.snap.Load()
	if snap == nil {
		return nil, openai.Unavailable("No catalog is loaded yet.", nil)
	}
	m, err := snap.modelFor(req.key, req.Model)
	if err != nil {
		return nil, err
	}
	req.model, req.snap = m, snap
	if req.messages != nil && !snap.reachesAnthropic(m) {
		req.messages = nil // held no longer than it may be sent
	}
	if req.messages != nil {
		// Read as chat bodies are, before anything is reserved: refused
		// here when the model's own pool is sent it, and by the call
		// when a fallback's is.
		if req.ownErr = req.own.Parse(req.messages); req.ownErr != nil && snap.speaksMessages(m) {
			return nil, req.ownErr
		}
	}
	if req.answer != nil {
		req.translator = req.answer(m.Name)
	}
	if err := req.hostedTools(w, r.log); err != nil {
		return nil, err
	}
	if err := req.billedFields(w, r.log); err != nil {
		return nil, err
	}
	return snap, nil
}

// parse reads the body, within the size limit, and the fields routing
// needs, translating it first for an API served by translation; the
// translation stops when ctx ends or the request's time is up. A body
// that could not be read to its end leaves the connection unusable: the
// answer closes it.
func (r *Router) parse(ctx context.Context, w http.ResponseWriter, hr *http.Request, req *parsedRequest) error {
	limit := r.opts.Server.MaxBodyBytes
	if hr.ContentLength > limit {
		w.Header().Set("Connection", "close")
		return openai.TooLarge(limit)
	}
	// A body of known length was held to the limit above, and is read no
	// further than its length; only a chunked one needs its reads
	// counted.
	var src io.Reader = hr.Body
	if hr.ContentLength < 0 {
		src = http.MaxBytesReader(w, hr.Body, limit)
	}
	body, err := proxy.ReadBody(src, hr.ContentLength)
	if err != nil {
		w.Header().Set("Connection", "close")
		hr.Body.Close()
		var tooLarge *http.MaxBytesError
		var netErr net.Error
		switch {
		case errors.As(err, &tooLarge):
			return openai.TooLarge(limit)
		case errors.As(err, &netErr) && netErr.Timeout():
			return errBodyTimeout
		}
		return openai.BadRequest("", "The request body could not be read.")
	}
	if d := req.api.dialect; d != nil {
		if body, err = r.translate(ctx, d, body, req); err != nil {
			return err
		}
	}
	req.body = body
	if err := req.Request.Parse(body); err != nil {
		return err
	}
	list, err := req.Prompts(req.api.lists)
	if err != nil {
		return err
	}
	req.prompts = max(list.Count, 1)
	req.estimate = estimatePrompt(body, list)
	return nil
}

// errBodyTimeout answers a body that did not arrive within
// server.body_timeout.
var errBodyTimeout = openai.BodyTimedOut()

// bytesPerToken is how much request JSON one prompt token takes, roughly.
const bytesPerToken = pool.BytesPerToken

// estimatePrompt is the size in tokens of the prompts a body holds, which
// lists those of list, estimated without decoding it: a token for every
// bytesPerToken bytes of the body, but for those of its token ids, each
// one token. It is what token limits reserve, and what is billed when a
// backend reports no usage.
func estimatePrompt(body []byte, list openai.PromptList) int64 {
	return (int64(len(body))-list.TokenBytes+bytesPerToken-1)/bytesPerToken + list.Tokens
}

// refuse answers a request that never reached an upstream, and counts it.
func (r *Router) refuse(w http.ResponseWriter, req *parsedRequest, pool string, err error) {
	req.api.writeError(w, err)
	e := openai.AsError(err)
	if e.Status >= 500 {
		r.log.Warn("request refused", "id", req.id, "status", e.Status, "err", e)
	}
	r.complete(req, dispatchResult{pool: pool, outcome: proxy.Outcome{Status: e.Status, Err: err}})
}
