package proxy

// Translated answers: an upstream's error put in the shape a Translator
// (openai.Translator) writes for its client.

import (
	"encoding/json"
	"slices"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

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

// heldError is an upstream's error body about the request, of status, as
// the error the gateway answers with, and whether its code is one of
// hold.
func heldError(status int, body []byte, hold []string) (*openai.Error, bool) {
	var b struct {
		Error struct {
			Code any `json:"code"`
		} `json:"error"`
	}
	json.Unmarshal(body, &b)
	code, _ := b.Error.Code.(string)
	if code == "" || !slices.Contains(hold, code) {
		return nil, false
	}
	e := upstreamErrorOf(status, body)
	e.Code = code
	return e, true
}
