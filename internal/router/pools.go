package router

// A pool as the router calls it: what routing knows of it (pool.Pool),
// and how a call to it is made — the headers a call carries, a hosted
// provider's URL, headers and body, the isolation domain's cache salt —
// with its routing counters and its hedging (hedge.go).

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/cespare/xxhash/v2"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/clouds"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/extproc"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/observe"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/pool"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/proxy"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/scrape"
	"gitea.mynodes.xyz/ilker/llmgw/internal/translate"
)

// servedPool is a catalog pool as the router calls it.
type servedPool struct {
	*pool.Pool
	name      string
	plain     http.Header // what a call carries, unstreamed and streamed
	streamed  http.Header
	provider  *provider // a hosted provider's; nil for OpenAI-compatible kinds
	takesSalt bool      // whether calls carry the request's cache_salt
	kind      string    // the pool's kind: what its servers speak

	hedge catalog.Hedge   // when a request is also sent to a second endpoint; After zero: never
	epp   *extproc.Picker // the Endpoint Picker a pool of policy epp asks; nil for other policies
	m     poolMetrics
}

// upstreamPaths are the API paths an endpoint's calls go to.
var upstreamPaths = func() []string {
	var paths []string
	for _, a := range apis {
		paths = append(paths, a.upstreamPath)
	}
	return paths
}()

// newServedPool builds a pool from its catalog entry, keeping what prev
// learned (pool.New).
func newServedPool(p catalog.Pool, prev *servedPool, m *metrics, log *slog.Logger) *servedPool {
	var learned *pool.Pool
	var picker *extproc.Picker
	if prev != nil {
		learned, picker = prev.Pool, prev.epp
	}
	sp := &servedPool{
		Pool: pool.New(p, learned, upstreamPaths), name: p.Name, plain: poolHeaders(p, false), streamed: poolHeaders(p, true),
		provider: newProvider(p), takesSalt: takesSalt(p.Kind), kind: p.Kind, hedge: p.Hedge,
	}
	sp.m = m.forPool(sp.name, sp.Policy())
	sp.epp = extproc.NewPicker(p, picker, extproc.PickerEnv{NoEndpoint: observe.ErrNoEndpoint, Dropped: sp.m.eppDropped, Log: log})
	return sp
}

// loadedName is m's name as p's servers list the models they have
// loaded: its upstream name as Ollama writes it on an ollama pool; empty
// on every other kind, whose servers list none.
func (p *servedPool) loadedName(m *catalog.Model) string {
	if p.kind != catalog.KindOllama {
		return ""
	}
	return scrape.OllamaName(m.UpstreamName())
}

// header is what a call to the pool carries.
func (p *servedPool) header(stream bool) http.Header {
	if stream {
		return p.streamed
	}
	return p.plain
}

// Hosted providers: how a call to a pool of kind anthropic, azure or a
// cloud's (internal/router/clouds) is made. Each needs its own URL,
// headers and, for anthropic, body; the anthropic ones, and the reading
// of its answer as chat completions, are translate.AnthropicUpstream's,
// for a vertex pool of Anthropic's models too. Every other kind is
// called as OpenAI-compatible. And what each kind is told of a
// request's reasoning.

// provider is a hosted provider's pool: nil for OpenAI-compatible kinds.
type provider struct {
	kind       string
	apiVersion string
	// setVersion reports whether the pool sets api_version: an anthropic
	// pool without one sends an Anthropic client's own anthropic-version.
	setVersion bool
	// translated reports whether the pool is a cloud's whose calls'
	// bodies are translated from chat (clouds.Translated).
	translated bool
	// messages reports whether its calls are Anthropic's Messages API's:
	// an anthropic pool's, and a vertex pool's of Anthropic's models.
	messages bool
	// vertexMessages reports whether the pool is a vertex pool of
	// Anthropic's models: Messages API bodies, as Vertex takes them.
	vertexMessages bool
	// urls holds the URLs calls go to, made once each. key: endpoint URL,
	// API path and, for azure and bedrock, the deployment or model.
	urls sync.Map
	// signer signs a bedrock or vertex pool's calls; nil for other kinds.
	signer proxy.Signer
	// prefix is the path a vertex pool's model paths follow its
	// endpoint's URL with: its project's, location's and publisher's.
	prefix string
}

// newProvider is p's provider, nil when p speaks the OpenAI API.
func newProvider(p catalog.Pool) *provider {
	switch p.Kind {
	case catalog.KindAnthropic:
		v := p.APIVersion
		if v == "" {
			v = translate.AnthropicVersion
		}
		return &provider{kind: p.Kind, apiVersion: v, setVersion: p.APIVersion != "", messages: true}
	case catalog.KindAzure:
		return &provider{kind: p.Kind, apiVersion: p.APIVersion}
	case catalog.KindBedrock, catalog.KindGemini, catalog.KindVertex:
		return &provider{kind: p.Kind, signer: clouds.Signer(p), prefix: clouds.Prefix(p),
			translated: clouds.Translated(p), messages: clouds.Anthropic(p), vertexMessages: clouds.Anthropic(p)}
	}
	return nil
}

// poolHeaders is what a call to p carries: the JSON content type, for a
// stream the event-stream Accept, and the key as p's kind sends it. The
// key is sent, never logged.
func poolHeaders(p catalog.Pool, stream bool) http.Header {
	switch p.Kind {
	case catalog.KindAnthropic:
		h := proxy.Headers("", stream)
		translate.AnthropicUpstream{}.SetHeader(h, p.APIKey, p.APIVersion)
		return h
	case catalog.KindAzure:
		h := proxy.Headers("", stream)
		if p.APIKey != "" {
			h["Api-Key"] = []string{p.APIKey}
		}
		return h
	case catalog.KindBedrock, catalog.KindVertex:
		// Signed per call (clouds.Signer); no key, and no SSE Accept:
		// ConverseStream answers in AWS's event stream,
		// streamGenerateContent asks for SSE in its URL, and
		// streamRawPredict answers in SSE.
		return http.Header{"Content-Type": {"application/json"}}
	case catalog.KindGemini:
		h := http.Header{"Content-Type": {"application/json"}}
		if p.APIKey != "" {
			h["X-Goog-Api-Key"] = []string{p.APIKey}
		}
		return h
	}
	return proxy.Headers(p.APIKey, stream)
}

// target is the URL a call for the API at path, to model (the pool's name
// for it), streamed or not, goes to at ep.
func (p *servedPool) target(ep *pool.Endpoint, path, model string, stream bool) *url.URL {
	pr := p.provider
	if pr == nil {
		return ep.Target(path)
	}
	key := ep.URL() + "\x00" + path + "\x00" + model
	if stream {
		key += "\x00s"
	}
	if u, ok := pr.urls.Load(key); ok {
		return u.(*url.URL)
	}
	var raw string
	switch pr.kind {
	case catalog.KindAnthropic:
		raw = translate.AnthropicUpstream{}.URL(ep.URL())
	case catalog.KindAzure:
		raw = ep.URL() + "/openai/deployments/" + url.PathEscape(model) + path + "?api-version=" + url.QueryEscape(pr.apiVersion)
	case catalog.KindBedrock:
		raw = translate.BedrockUpstream{}.URL(ep.URL(), model, stream)
	case catalog.KindGemini, catalog.KindVertex:
		raw = translate.GeminiUpstream{}.URL(ep.URL()+pr.prefix, model, stream)
		if pr.vertexMessages {
			raw = translate.VertexAnthropicURL(ep.URL()+pr.prefix, model, stream)
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil // the call fails as an endpoint whose URL does not parse
	}
	pr.urls.Store(key, u)
	return u
}

// Switches enable_thinking is set to; pointed at, never changed.
var thinkingOn, thinkingOff = true, false

// reason puts in e what a pool of p's kind is told of a request's
// reasoning r, when the request said whether to think; a request that
// did not gets nothing added:
//
//   - vllm, sglang: chat_template_kwargs.enable_thinking, true for
//     thinking enabled or adaptive and false for disabled, the switch
//     Qwen3-style chat templates read (other templates ignore it);
//   - llamacpp, ollama: nothing, as their servers read no switch of
//     one name for every model;
//   - openai, azure: reasoning_effort, the effort asked (low, medium,
//     high), when the request asks for thinking and says how hard;
//     nothing for disabled or a bare adaptive, leaving the model's default;
//   - anthropic: nothing here, as the client's own body goes (prepare).
func (p *servedPool) reason(r translate.Reasoning, e *openai.Edits) {
	if !r.Asked {
		return
	}
	switch p.kind {
	case catalog.KindVLLM, catalog.KindSGLang:
		e.EnableThinking = &thinkingOff
		if r.On {
			e.EnableThinking = &thinkingOn
		}
	case catalog.KindOpenAI, catalog.KindAzure:
		if r.On {
			e.ReasoningEffort = r.Effort
		}
	}
}

// reachesAnthropic reports whether a request for m may be sent to a
// pool that speaks Anthropic's Messages API: m's own pool, or a
// fallback's.
func (s *snapshot) reachesAnthropic(m *catalog.Model) bool {
	if s.speaksMessages(m) {
		return true
	}
	for _, name := range m.Fallbacks {
		if f, ok := s.cat.Resolve(name); ok && s.speaksMessages(f) {
			return true
		}
	}
	return false
}

// speaksMessages reports whether m's pool is served and its calls are
// Anthropic's Messages API's.
func (s *snapshot) speaksMessages(m *catalog.Model) bool {
	p := s.pools[m.Pool]
	return p != nil && p.speaksMessages()
}

// speaksMessages reports whether p's calls are Anthropic's Messages
// API's.
func (p *servedPool) speaksMessages() bool { return p.provider != nil && p.provider.messages }

// prepare makes c, a call for req to model m with a chat body, the call
// p's provider takes: a cloud's body translated from chat (prepareCloud),
// or, for anthropic and a vertex pool of Anthropic's models:
//
//   - a Messages request's own body, its model renamed to the pool's
//     name for m and max_tokens the bound reserved: the fields the client
//     sent reach the provider, thinking, cache_control and
//     context_management among them, but for its server tools, dropped
//     as on every pool, and the billed fields m does not allow, its MCP
//     servers among them (billed.go); it is refused (400) when it gives
//     model or max_tokens twice or in another case, as a provider could
//     read it otherwise than the gateway;
//   - any other request's chat body as a Messages API body asking for
//     req's max tokens (defaultMaxTokens when it names none), refused
//     with a 413 as it is written once it passes limit bytes;
//   - the version an Anthropic client asked for unless the pool sets one,
//     and its anthropic-beta;
//   - on Vertex, the body without its model and with Vertex's
//     anthropic_version, and no anthropic-version sent
//     (prepareVertexMessages);
//   - a Provider that reads the answer back as chat.
//
// An API the provider has no counterpart of is a 400. The translation
// stops when ctx ends or c's deadline passes.
func (p *servedPool) prepare(ctx context.Context, c *proxy.Call, req *parsedRequest, m *catalog.Model, defaultMaxTokens, limit int64) error {
	if p.provider != nil && p.provider.translated {
		return p.prepareCloud(ctx, c, req, defaultMaxTokens, limit)
	}
	if !p.speaksMessages() {
		return nil
	}
	if path := req.api.upstreamPath; path != "/chat/completions" {
		return openai.BadRequest("model", "The model is served by Anthropic's Messages API, which has no %s.", strings.TrimPrefix(path, "/"))
	}
	if req.Choices > 1 {
		return openai.BadRequest("n", "The model is served by Anthropic's Messages API, which gives one answer a request: n must be 1.")
	}
	bound := req.outputBound(defaultMaxTokens)
	if req.messages != nil {
		if req.ownErr != nil {
			return req.ownErr
		}
		own, drop := req.own, dropped(&req.own, m)
		body := req.messages
		if len(req.hosted) > 0 {
			// Server tools, dropped (hosted_tools: drop), leave the body
			// too: they run, and are billed, on the pool's account.
			var err error
			if body, err = translate.WithoutServerTools(body); err != nil {
				return err
			}
			if err := own.Parse(body); err != nil {
				return err
			}
		}
		c.Body = own.Rewrite(body, openai.Edits{Model: m.UpstreamName(), MaxTokens: bound, Drop: drop})
	} else {
		ctx, cancel := workContext(ctx, c.Deadline)
		defer cancel()
		body, err := translate.ChatToAnthropicBody(ctx, c.Body, bound, limit)
		if err != nil {
			return stopped(ctx, err)
		}
		c.Body = body
	}
	c.Provider = translate.AnthropicUpstream{}
	if p.provider.vertexMessages {
		return p.prepareVertexMessages(c, req)
	}
	version := req.anthropicVersion
	if p.provider.setVersion || version == p.provider.apiVersion {
		version = ""
	}
	c.Header = translate.AnthropicUpstream{}.ClientHeader(c.Header, version, req.anthropicBeta)
	return nil
}

// prepareVertexMessages makes c, a call with a Messages API body, a call
// of Anthropic's models on Vertex AI: the body as Vertex takes it (no
// model, its anthropic_version), and the client's anthropic-beta; the
// version an Anthropic client asked for is not sent, as Vertex serves
// one.
func (p *servedPool) prepareVertexMessages(c *proxy.Call, req *parsedRequest) error {
	body, err := translate.ToVertexAnthropic(c.Body)
	if err != nil {
		return err
	}
	c.Body, c.Sign = body, p.provider.signer
	c.Header = translate.AnthropicUpstream{}.ClientHeader(c.Header, "", req.anthropicBeta)
	return nil
}

// prepareCloud makes c, a call for req with a chat body, a call of p's
// cloud's own API: its body the request that asks what the chat body
// asks, for req's max tokens (defaultMaxTokens when it names none),
// refused with a 413 past limit bytes; signed as it is sent where the
// cloud signs; its answer read back as chat. An API the cloud has no
// counterpart of is a 400.
func (p *servedPool) prepareCloud(ctx context.Context, c *proxy.Call, req *parsedRequest, defaultMaxTokens, limit int64) error {
	kind := p.provider.kind
	if path := req.api.upstreamPath; path != "/chat/completions" {
		return openai.BadRequest("model", "The model is served by %s, which has no %s.", clouds.API(kind), strings.TrimPrefix(path, "/"))
	}
	if req.Choices > 1 {
		return openai.BadRequest("n", "The model is served by %s, which gives one answer a request: n must be 1.", clouds.API(kind))
	}
	ctx, cancel := workContext(ctx, c.Deadline)
	defer cancel()
	translateBody, provider := translate.ChatToBedrockBody, openai.Provider(translate.BedrockUpstream{})
	if kind != catalog.KindBedrock {
		translateBody, provider = translate.ChatToGeminiBody, translate.GeminiUpstream{}
	}
	body, err := translateBody(ctx, c.Body, req.outputBound(defaultMaxTokens), limit)
	if err != nil {
		return stopped(ctx, err)
	}
	c.Body, c.Provider, c.Sign = body, provider, p.provider.signer
	return nil
}

// Cache isolation: prompts of two isolation domains — tenants cut to
// router.cache_isolation's level — never share a cached prefix, so that
// no tenant can learn another's prompts from which of its own are served
// from cache. Each domain's prompts are hashed into the prefix index from
// a seed of its own, so the gateway neither predicts nor steers toward a
// hit on another domain's blocks; and pools whose servers take a
// cache_salt (vLLM's and SGLang's) are sent one made for the domain, so
// the servers keep the domains' blocks apart too. A salt is an HMAC of
// the domain under a secret the gateways sharing a store agree on: no
// tenant's name reaches a server, and no client can make another
// domain's salt.

// maxCachedDomains bounds the salts kept made: far more tenants than a
// gateway serves at once, and a bound on what clients naming tenants in a
// header (without keys) can make it hold.
const maxCachedDomains = 4096

// domainSalt is what keeps a request's prompts to its domain: the
// cache_salt sent to pools that take one, and the seed its prompt's
// blocks are hashed from. Both are zero without isolation and without a
// salt of the client's own.
type domainSalt struct {
	salt string
	seed uint64
}

// isolation makes each request's domainSalt.
type isolation struct {
	level string // org, team or user; empty: none
	key   []byte // the HMAC key salts are made with
	mu    sync.Mutex
	made  map[string]domainSalt // key: domain; at most maxCachedDomains
}

// newIsolation isolates at level (org, team, user, none, or empty for
// the default, org) with salts made under secret; a nil secret is one of
// this process's alone.
func newIsolation(level string, secret []byte) *isolation {
	switch level {
	case CacheIsolationNone:
		level = ""
	case "":
		level = tenant.LevelOrg
	}
	if secret == nil {
		secret = make([]byte, 32)
		rand.Read(secret)
	}
	return &isolation{level: level, key: secret, made: make(map[string]domainSalt)}
}

// of is the domainSalt of a request from tenantPath ("" for none) that
// sent clientSalt ("" for none). A client's own salt keeps its prompts
// apart within its domain, never joins them to another's: it is made into
// the domain's salt, not sent as it came.
func (iso *isolation) of(tenantPath, clientSalt string) domainSalt {
	if iso.level == "" {
		if clientSalt == "" {
			return domainSalt{}
		}
		return domainSalt{seed: xxhash.Sum64String(clientSalt)}
	}
	domain := tenant.AtLevel(tenantPath, iso.level)
	if clientSalt != "" {
		return iso.derive(domain, clientSalt)
	}
	iso.mu.Lock()
	defer iso.mu.Unlock()
	d, ok := iso.made[domain]
	if !ok {
		if len(iso.made) >= maxCachedDomains {
			clear(iso.made)
		}
		d = iso.derive(domain, "")
		iso.made[domain] = d
	}
	return d
}

// derive makes the salt of domain and clientSalt: 128 bits of the HMAC,
// as hex, and the seed from 64 more.
func (iso *isolation) derive(domain, clientSalt string) domainSalt {
	m := hmac.New(sha256.New, iso.key)
	m.Write([]byte(domain))
	m.Write([]byte{0})
	m.Write([]byte(clientSalt))
	sum := m.Sum(nil)
	return domainSalt{salt: hex.EncodeToString(sum[:16]), seed: binary.LittleEndian.Uint64(sum[16:24])}
}

// salt is the cache_salt calls to p carry for req: its domain's, on a
// pool that takes one; empty to send the body's own, if any.
func (p *servedPool) salt(req *parsedRequest) string {
	if !p.takesSalt {
		return ""
	}
	return req.salt.salt
}

// takesSalt reports whether a pool of kind sends requests a cache_salt:
// vLLM and SGLang servers key their prefix caches by it; others would
// refuse it or ignore it. llama.cpp's server reads the fields it knows
// and passes over the rest, and keeps one cache per slot, not keyed by
// any salt; Ollama's OpenAI API decodes into a fixed request type. Neither
// is sent one: it would keep nothing apart there.
func takesSalt(kind string) bool {
	return kind == catalog.KindVLLM || kind == catalog.KindSGLang
}
