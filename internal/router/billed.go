package router

// Fields that change what a provider bills or runs beyond a request's
// tokens (openai.BilledFields: a service tier, web searches, audio,
// stored completions...). A request's model allows some
// (billed_fields.allow), which are sent as asked and priced, a service
// tier at its own price; the rest are taken out of what each call sends
// or, as the model says, refused before anything is reserved. Only a
// body that goes upstream as its client wrote it can carry one: the chat,
// completions and embeddings bodies, and a Messages request's to an
// anthropic pool; a translation carries none.

import (
	"log/slog"
	"net/http"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// droppedFieldsHeader names, comma-separated, the billed fields a request
// named that its model does not allow, which were taken out of what its
// provider was sent.
const droppedFieldsHeader = "X-Llmgw-Dropped-Fields"

// billedFields settles the billed fields req names, once its model is
// known: a 400 naming the first the model does not allow when it refuses
// them (billed_fields.others: refuse); else those are dropped from every
// call, and the answer's header and log's debug lines say which.
func (req *parsedRequest) billedFields(w http.ResponseWriter, log *slog.Logger) error {
	body := &req.Request
	if req.messages != nil {
		body = &req.own
	}
	drop := dropped(body, req.model)
	if drop == 0 {
		return nil
	}
	if req.model.BilledFields.Others == catalog.BilledFieldsRefuse {
		f, _ := drop.First()
		return openai.BilledFieldRefused(f)
	}
	w.Header().Set(droppedFieldsHeader, drop.String())
	log.Debug("billed fields dropped", "id", req.id, "model", req.model.Name, "fields", drop.String())
	return nil
}

// dropped is which of the billed fields body names a call for model m
// leaves out: those m does not allow at the service tier body asks.
func dropped(body *openai.Request, m *catalog.Model) openai.BilledFields {
	drop := body.Billed
	for _, name := range m.BilledFields.Allow {
		if f, ok := openai.BilledFieldNamed(name); ok && m.Allows(name, body.ServiceTier) {
			drop &^= openai.Of(f)
		}
	}
	return drop
}

// sentBody is the parsed body a call sends as its client wrote it, but
// for what the call drops: a Messages request's own to a pool that
// speaks the Messages API (messages), the chat body to any other; nil
// for the chat body such a pool is sent translated, which carries no
// billed field.
func (req *parsedRequest) sentBody(messages bool) *openai.Request {
	switch {
	case !messages:
		return &req.Request
	case req.messages != nil:
		return &req.own
	}
	return nil
}

// tier is the service tier a call to a pool, for model m, asks of its
// provider: the body's, unless the call drops it; empty for none. The
// call's answer is priced at it (catalog.Price.At). messages reports
// whether the pool speaks the Messages API.
func (req *parsedRequest) tier(messages bool, m *catalog.Model) string {
	body := req.sentBody(messages)
	if body == nil || dropped(body, m).Has(openai.ServiceTier) {
		return ""
	}
	return body.ServiceTier
}
