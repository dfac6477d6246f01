package proxy

// Translated answers: a client that speaks another API than the upstream
// (Anthropic's Messages, OpenAI's Responses) is answered through a
// Translator. The relay still reads, times and accounts the upstream's own
// chat completion events; the Translator only decides what is written for
// each, so a translated stream is measured exactly as a chat stream is.

import (
	"encoding/json"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// Translator turns one request's chat completions answer into the client's
// API. A nil Translator relays the answer as it came.
type Translator interface {
	// Stream begins the translation of a streamed answer: a fresh one for
	// every upstream call, as a retried call starts over.
	Stream() EventTranslator
	// Answer is the client's body for a whole chat completion body; an
	// error means the upstream's answer is not one.
	Answer(chat []byte) ([]byte, error)
	// ErrorBody is the client's body for an error, its status e.Status.
	ErrorBody(e *openai.Error) []byte
}

// EventTranslator translates one streamed answer, event by event.
type EventTranslator interface {
	// Event writes through emit what the client is sent for one upstream
	// event's data: a chat completion chunk, an error object, or
	// openai.Done, which ends a whole answer. It may write nothing, and
	// an error from emit is returned: the client has gone.
	Event(data []byte, emit Emit) error
	// Fail writes the events that end a broken stream with e, in place of
	// an answer's end: the client must not take the part for the whole.
	Fail(e *openai.Error, emit Emit)
}

// Emit writes one event to the client: kind is its SSE event type (none
// when empty), data its data line. data may be reused once Emit returns.
type Emit func(kind, data []byte) error

// upstreamErrorOf is an upstream's 4xx answer as an *openai.Error, for a
// Translator to put in its client's shape: the message the upstream gave
// when its body is an OpenAI error, and a generic one otherwise.
func upstreamErrorOf(status int, body []byte) *openai.Error {
	var b struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Param   string `json:"param"`
			Code    any    `json:"code"`
		} `json:"error"`
		// vLLM and FastAPI answer {"detail": ...} or {"message": ...}.
		Message string `json:"message"`
	}
	json.Unmarshal(body, &b)
	e := &openai.Error{Status: status, Type: b.Error.Type, Param: b.Error.Param, Message: b.Error.Message}
	if e.Message == "" {
		e.Message = b.Message
	}
	if e.Message == "" {
		e.Message = "The model's backend refused the request."
	}
	if e.Type == "" {
		e.Type = "invalid_request_error"
	}
	return e
}

// Provider reads an upstream that speaks another API than chat
// completions (Anthropic's Messages API) as if it spoke chat: its answers,
// stream events and errors are turned into chat's before anything else
// reads them, so that the relay times, counts and relays chat as always.
// A nil Provider reads chat completions as they come.
type Provider interface {
	// Stream begins reading a streamed answer: a fresh one for every call.
	Stream() EventDecoder
	// Answer is a whole answer as a chat completion body.
	Answer(body []byte) ([]byte, error)
	// Error is an error answer's body as an OpenAI error body.
	Error(status int, body []byte) []byte
}

// EventDecoder turns one upstream stream's events into chat chunks.
type EventDecoder interface {
	// Event appends to chunks the chat chunks (or openai.Done) that one
	// upstream event of type kind means, and returns them; they may use
	// memory of the decoder's until the next call.
	Event(kind, data []byte, chunks [][]byte) [][]byte
}
