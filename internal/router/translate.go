package router

// The APIs served by translation: Anthropic's Messages API and OpenAI's
// Responses API, each turned into a chat completions request as it is
// parsed and its answer turned back as the relay writes it. Past parsing
// such a request is a chat request: it is admitted, dispatched, timed and
// accounted as one.

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
	"gitea.mynodes.xyz/ilker/llmgw/internal/tokenize"
	"gitea.mynodes.xyz/ilker/llmgw/internal/translate"
)

// dialect is an API the router serves by translating it to chat
// completions.
type dialect struct {
	// header checks the request's headers, before its body is read.
	header func(h http.Header) error
	// translate turns the client's body into the chat completions body it
	// asks for, setting what req needs to answer it: the answer's
	// translator, or a count's answer. A chat body past limit bytes is a
	// 413, refused as it is written. It stops with ctx's error when ctx
	// ends.
	translate func(ctx context.Context, body []byte, limit int64, req *parsedRequest) (chat []byte, err error)
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
	translate: func(ctx context.Context, body []byte, limit int64, req *parsedRequest) ([]byte, error) {
		a, err := translate.ParseAnthropic(ctx, body)
		if err != nil {
			return nil, err
		}
		if a.MaxTokens == nil {
			return nil, openai.BadRequest("max_tokens", "max_tokens: field required")
		}
		c, err := a.ToChat(ctx)
		if err != nil {
			return nil, err
		}
		req.hosted = a.ServerTools()
		id := req.id
		req.reasoning, req.messages = a.Reasoning(), body
		hide := req.reasoning.Hidden
		req.answer = func(model string) openai.Translator {
			return &translate.Anthropic{ID: "msg_" + id, Model: model, StopSequences: a.StopSequences, HideThinking: hide}
		}
		return translate.MarshalChat(c, limit)
	},
}

// anthropicCount is the Messages API's token count: parsed as a message,
// without max_tokens, counted, and never sent upstream.
var anthropicCount = &dialect{
	header:     anthropicVersion,
	writeError: translate.WriteAnthropicError,
	translate: func(ctx context.Context, body []byte, limit int64, req *parsedRequest) ([]byte, error) {
		a, err := translate.ParseAnthropic(ctx, body)
		if err != nil {
			return nil, err
		}
		a.Stream = false
		c, err := a.ToChat(ctx)
		if err != nil {
			return nil, err
		}
		req.hosted = a.ServerTools()
		if req.inputTokens, err = translate.PromptTokens(ctx, c, tokenize.Count); err != nil {
			return nil, err
		}
		return translate.MarshalChat(c, limit)
	},
}

var openaiResponses = &dialect{
	header:     func(http.Header) error { return nil },
	writeError: openai.WriteError,
	translate: func(ctx context.Context, body []byte, limit int64, req *parsedRequest) ([]byte, error) {
		q, err := translate.ParseResponses(ctx, body)
		if err != nil {
			return nil, err
		}
		c, err := q.ToChat(ctx)
		if err != nil {
			return nil, err
		}
		req.hosted = q.HostedTools()
		id, created := req.id, time.Now().Unix()
		req.answer = func(model string) openai.Translator {
			return &translate.Responses{ID: "resp_" + id, Model: model, CreatedAt: created, Request: q}
		}
		return translate.MarshalChat(c, limit)
	},
}

// droppedToolsHeader names, comma-separated, the types of the tools a
// translated request named that run on a provider's side, which the
// model was not offered.
const droppedToolsHeader = "X-Llmgw-Dropped-Tools"

// hostedTools settles the tools req named that run on a provider's side,
// once its model is known: a 400 naming the first when the model refuses
// them (hosted_tools: refuse); else they stay left out, and the answer's
// header and log's debug lines say which.
func (req *parsedRequest) hostedTools(w http.ResponseWriter, log *slog.Logger) error {
	if len(req.hosted) == 0 {
		return nil
	}
	if req.model.HostedTools == catalog.HostedToolsRefuse {
		return translate.HostedToolsRefused(req.hosted)
	}
	dropped := translate.DroppedTools(req.hosted)
	w.Header().Set(droppedToolsHeader, dropped)
	log.Debug("hosted tools dropped", "id", req.id, "model", req.model.Name, "tools", dropped)
	return nil
}

// translate turns req's body into chat completions by d, under the
// request's work context and within server.max_body_bytes.
func (r *Router) translate(ctx context.Context, d *dialect, body []byte, req *parsedRequest) ([]byte, error) {
	ctx, cancel := workContext(ctx, req.deadline(r.opts.Server.RequestTimeout))
	defer cancel()
	work := ctx
	if r.wrapWork != nil {
		work = r.wrapWork(ctx)
	}
	chat, err := d.translate(work, body, r.opts.Server.MaxBodyBytes, req)
	if err != nil {
		return nil, stopped(ctx, err)
	}
	return chat, nil
}

// deadline is when req's time is up, timeout (server.request_timeout)
// after it arrived; zero when there is no such limit.
func (req *parsedRequest) deadline(timeout time.Duration) time.Time {
	if timeout <= 0 {
		return time.Time{}
	}
	return req.start.Add(timeout)
}

// errRequestTimeout is why a request's work context ends at its
// deadline.
var errRequestTimeout = errors.New("request took longer than server.request_timeout")

// workContext is the context the gateway's own work on a request runs
// under, translating its body: parent, the client's, which ends when the
// client goes away, ended too at deadline (none when zero) with
// errRequestTimeout as its cause.
func workContext(parent context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	if deadline.IsZero() {
		return context.WithCancel(parent)
	}
	return context.WithDeadlineCause(parent, deadline, errRequestTimeout)
}

// stopped is the error of work that failed with err under ctx: when ctx
// has ended, a 504 past the request's deadline, as a call past it is,
// and otherwise a 499, the client having gone; err itself while ctx
// lasts.
func stopped(ctx context.Context, err error) error {
	if ctx.Err() == nil {
		return err
	}
	cause := context.Cause(ctx)
	if errors.Is(cause, errRequestTimeout) {
		return openai.GatewayTimeout("The request took longer than its time limit.", cause)
	}
	return &openai.Error{Status: openai.StatusClientClosed, Type: "invalid_request_error",
		Message: "The client went away.", Err: cause}
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

// renderAnthropicModels is the /v1/models answer to an Anthropic client,
// in the shape of Anthropic's list: every model and alias key may use
// (with a nil key, every one), one page.
func renderAnthropicModels(c *catalog.Catalog, key *tenant.Key) []byte {
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
	for _, m := range c.Models() {
		if !visible(key, &m) {
			continue
		}
		for _, n := range append([]string{m.Name}, m.Aliases...) {
			list.Data = append(list.Data, model{Type: "model", ID: n, DisplayName: n, CreatedAt: "1970-01-01T00:00:00Z"})
		}
	}
	if n := len(list.Data); n > 0 {
		list.FirstID, list.LastID = &list.Data[0].ID, &list.Data[n-1].ID
	}
	b, _ := json.Marshal(list)
	return append(b, '\n')
}
