package router

// Hosted providers: how a call to a pool of kind anthropic or azure is
// made. Each needs its own URL, headers and, for anthropic, body; the
// answer of an anthropic pool is read as chat completions (see
// proxy.Provider). Every other kind is called as OpenAI-compatible.

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/proxy"
	"gitea.mynodes.xyz/ilker/llmgw/internal/translate"
)

// anthropicVersionDefault is the Messages API version the translation
// writes, sent as anthropic-version when a pool sets none.
const anthropicVersionDefault = "2023-06-01"

// provider is a hosted provider's pool: nil for OpenAI-compatible kinds.
type provider struct {
	kind       string
	apiVersion string
	// setVersion reports whether the pool sets api_version: an anthropic
	// pool without one sends an Anthropic client's own anthropic-version.
	setVersion bool
	// urls holds the URLs calls go to, made once each. key: endpoint URL,
	// API path and, for azure, the deployment.
	urls sync.Map
}

// newProvider is p's provider, nil when p speaks the OpenAI API.
func newProvider(p catalog.Pool) *provider {
	switch p.Kind {
	case catalog.KindAnthropic:
		v := p.APIVersion
		if v == "" {
			v = anthropicVersionDefault
		}
		return &provider{kind: p.Kind, apiVersion: v, setVersion: p.APIVersion != ""}
	case catalog.KindAzure:
		return &provider{kind: p.Kind, apiVersion: p.APIVersion}
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
		h["Anthropic-Version"] = []string{newProvider(p).apiVersion}
		if p.APIKey != "" {
			h["X-Api-Key"] = []string{p.APIKey}
		}
		return h
	case catalog.KindAzure:
		h := proxy.Headers("", stream)
		if p.APIKey != "" {
			h["Api-Key"] = []string{p.APIKey}
		}
		return h
	}
	return proxy.Headers(p.APIKey, stream)
}

// target is the URL a call for the API at path, to model (the pool's name
// for it), goes to at ep.
func (p *pool) target(ep *endpoint, path, model string) *url.URL {
	pr := p.provider
	if pr == nil {
		return ep.targets[path]
	}
	key := ep.url + "\x00" + path + "\x00" + model
	if u, ok := pr.urls.Load(key); ok {
		return u.(*url.URL)
	}
	var raw string
	switch pr.kind {
	case catalog.KindAnthropic:
		raw = ep.url + "/messages"
	case catalog.KindAzure:
		raw = ep.url + "/openai/deployments/" + url.PathEscape(model) + path + "?api-version=" + url.QueryEscape(pr.apiVersion)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil // the call fails as an endpoint whose URL does not parse
	}
	pr.urls.Store(key, u)
	return u
}

// prepare makes c, a call for req with a chat body, the call p's
// provider takes: for anthropic, a Messages API body asking for req's
// max tokens (defaultMaxTokens when it names none), the version an
// Anthropic client asked for unless the pool sets one, and a Provider that
// reads the answer back as chat. An API the provider has no counterpart
// of is a 400. The translation stops when ctx ends or c's deadline passes.
func (p *pool) prepare(ctx context.Context, c *proxy.Call, req *parsedRequest, defaultMaxTokens int64) error {
	if p.provider == nil || p.provider.kind != catalog.KindAnthropic {
		return nil
	}
	if path := req.api.upstreamPath; path != "/chat/completions" {
		return openai.BadRequest("model", "The model is served by Anthropic's Messages API, which has no %s.", strings.TrimPrefix(path, "/"))
	}
	if req.Choices > 1 {
		return openai.BadRequest("n", "The model is served by Anthropic's Messages API, which gives one answer a request: n must be 1.")
	}
	ctx, cancel := workContext(ctx, c.Deadline)
	defer cancel()
	body, err := translate.ChatToAnthropicBody(ctx, c.Body, req.outputBound(defaultMaxTokens))
	if err != nil {
		return stopped(ctx, err)
	}
	c.Body, c.Provider = body, translate.AnthropicUpstream{}
	if v := req.anthropicVersion; v != "" && !p.provider.setVersion && v != p.provider.apiVersion {
		c.Header = c.Header.Clone() // the pool's is shared by every call
		c.Header["Anthropic-Version"] = []string{v}
	}
	return nil
}
