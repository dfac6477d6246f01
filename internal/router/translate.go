package router

// The APIs served by translation: Anthropic's Messages API and OpenAI's
// Responses API, each turned into a chat completions request as it is
// parsed and its answer turned back as the relay writes it. Past parsing
// such a request is a chat request: it is admitted, dispatched, timed and
// accounted as one.

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/proxy"
	"gitea.mynodes.xyz/ilker/llmgw/internal/translate"
)

// dialect is an API the router serves by translating it to chat
// completions.
type dialect struct {
	// header checks the request's headers, before its body is read.
	header func(h http.Header) error
	// translate turns the client's body into the chat completions body it
	// asks for, and what will answer it once its model is known. id is the
	// request's.
	translate func(body []byte, id string) (chat []byte, answer func(model string) proxy.Translator, err error)
	// writeError answers with an error in the API's own shape.
	writeError func(w http.ResponseWriter, err error)
}

// writeError answers a request to a with err, in a's error shape.
func (a api) writeError(w http.ResponseWriter, err error) {
	if a.dialect != nil {
		a.dialect.writeError(w, err)
		return
	}
	openai.WriteError(w, err)
}

var anthropicMessages = &dialect{
	header:     anthropicVersion,
	writeError: translate.WriteAnthropicError,
	translate: func(body []byte, id string) ([]byte, func(string) proxy.Translator, error) {
		a, err := translate.ParseAnthropic(body)
		if err != nil {
			return nil, nil, err
		}
		if a.MaxTokens == nil {
			return nil, nil, openai.BadRequest("max_tokens", "max_tokens: field required")
		}
		chat, err := marshalChat(a.ToChat())
		if err != nil {
			return nil, nil, err
		}
		return chat, func(model string) proxy.Translator {
			return &translate.Anthropic{ID: "msg_" + id, Model: model, StopSequences: a.StopSequences}
		}, nil
	},
}

// anthropicCount is the Messages API's token count: parsed as a message,
// without max_tokens, and never sent upstream.
var anthropicCount = &dialect{
	header:     anthropicVersion,
	writeError: translate.WriteAnthropicError,
	translate: func(body []byte, _ string) ([]byte, func(string) proxy.Translator, error) {
		a, err := translate.ParseAnthropic(body)
		if err != nil {
			return nil, nil, err
		}
		a.Stream = false
		chat, err := marshalChat(a.ToChat())
		if err != nil {
			return nil, nil, err
		}
		return chat, nil, nil
	},
}

var openaiResponses = &dialect{
	header:     func(http.Header) error { return nil },
	writeError: openai.WriteError,
	translate: func(body []byte, id string) ([]byte, func(string) proxy.Translator, error) {
		q, err := translate.ParseResponses(body)
		if err != nil {
			return nil, nil, err
		}
		chat, err := marshalChat(q.ToChat())
		if err != nil {
			return nil, nil, err
		}
		created := time.Now().Unix()
		return chat, func(model string) proxy.Translator {
			return &translate.Responses{ID: "resp_" + id, Model: model, CreatedAt: created, Request: q}
		}, nil
	},
}

// marshalChat is the chat completions body of a translated request, or
// the translation's error.
func marshalChat(c any, err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	chat, err := json.Marshal(c)
	if err != nil {
		return nil, openai.BadRequest("", "The request could not be translated: %v", err)
	}
	return chat, nil
}

// anthropicVersion refuses a Messages API request without the
// anthropic-version header, as Anthropic does. Any version is taken: the
// translation reads the fields every version shares.
func anthropicVersion(h http.Header) error {
	if h.Get("anthropic-version") == "" {
		return openai.BadRequest("", "anthropic-version: header is required")
	}
	return nil
}

// serveCountTokens answers POST /v1/messages/count_tokens with the
// prompt's size in tokens, as the gateway estimates it, without calling
// any upstream: {"input_tokens": n}.
func (r *Router) serveCountTokens(w http.ResponseWriter, hr *http.Request) {
	a := api{dialect: anthropicCount}
	if hr.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		a.writeError(w, openai.MethodNotAllowed(hr.Method))
		return
	}
	req := &parsedRequest{id: r.ids.next(), api: a, start: time.Now()}
	w.Header().Set("X-Request-Id", req.id)
	if r.opts.Auth != nil {
		key, err := r.authenticate(hr)
		if err != nil {
			a.writeError(w, err)
			return
		}
		req.key = key
	}
	if err := a.dialect.header(hr.Header); err != nil {
		a.writeError(w, err)
		return
	}
	if err := r.parse(w, hr, req); err != nil {
		a.writeError(w, err)
		return
	}
	s := r.snap.Load()
	if s == nil {
		a.writeError(w, openai.Unavailable("No catalog is loaded yet.", nil))
		return
	}
	m, ok := s.cat.Resolve(req.Model)
	if !ok || req.key != nil && !req.key.Allows(append([]string{m.Name}, m.Aliases...)...) {
		a.writeError(w, openai.ModelNotFound(req.Model))
		return
	}
	var c translate.ChatRequest
	json.Unmarshal(req.body, &c) // the body the translation made
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(append([]byte(`{"input_tokens":`), strconv.FormatInt(translate.PromptTokens(&c), 10)...), '}'))
}

// serveAnthropicModels answers GET /v1/models from an Anthropic client
// (one that sends anthropic-version) in the shape of Anthropic's list:
// every model and alias the key may use, one page.
func (r *Router) serveAnthropicModels(w http.ResponseWriter, hr *http.Request) {
	s := r.snap.Load()
	if s == nil {
		translate.WriteAnthropicError(w, openai.Unavailable("No catalog is loaded yet.", nil))
		return
	}
	var key *tenant.Key
	if r.opts.Auth != nil {
		var err error
		if key, err = r.authenticate(hr); err != nil {
			translate.WriteAnthropicError(w, err)
			return
		}
	}
	type model struct {
		Type        string `json:"type"`
		ID          string `json:"id"`
		DisplayName string `json:"display_name"`
		CreatedAt   string `json:"created_at"`
	}
	list := struct {
		Data    []model `json:"data"`
		HasMore bool    `json:"has_more"`
		FirstID *string `json:"first_id"`
		LastID  *string `json:"last_id"`
	}{Data: []model{}}
	for _, m := range s.cat.Models() {
		names := append([]string{m.Name}, m.Aliases...)
		if key != nil && len(key.Models) > 0 && !key.Allows(names...) {
			continue
		}
		for _, n := range names {
			list.Data = append(list.Data, model{Type: "model", ID: n, DisplayName: n, CreatedAt: "1970-01-01T00:00:00Z"})
		}
	}
	if n := len(list.Data); n > 0 {
		list.FirstID, list.LastID = &list.Data[0].ID, &list.Data[n-1].ID
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(list)
}
