package translate

// A generateContent answer, the Gemini API's or Vertex AI's, read back as
// chat completions before the relay reads it: a whole answer as a chat
// completion, each streamed answer (an SSE event of its own) as chat
// chunks, an error body as OpenAI's. Each is read into the genai SDK's own
// GenerateContentResponse first.

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"google.golang.org/genai"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// geminiFinish is a finish reason as chat's: tool_calls when the answer
// called a function.
func geminiFinish(r genai.FinishReason, called bool) string {
	switch r {
	case genai.FinishReasonMaxTokens:
		return "length"
	case genai.FinishReasonSafety, genai.FinishReasonRecitation, genai.FinishReasonBlocklist, genai.FinishReasonProhibitedContent,
		genai.FinishReasonSPII, genai.FinishReasonImageSafety, genai.FinishReasonImageProhibitedContent:
		return "content_filter"
	}
	if called {
		return "tool_calls"
	}
	return "stop"
}

// geminiUsage is a generateContent usage as chat's: the prompt counts its
// cached tokens, the completion its thoughts.
func geminiUsage(u *genai.GenerateContentResponseUsageMetadata) *openai.Usage {
	if u == nil {
		return nil
	}
	completion := int64(u.CandidatesTokenCount) + int64(u.ThoughtsTokenCount)
	cu := &openai.Usage{PromptTokens: int64(u.PromptTokenCount), CompletionTokens: completion, TotalTokens: int64(u.PromptTokenCount) + completion}
	if u.CachedContentTokenCount > 0 {
		cu.PromptTokensDetails = &struct {
			CachedTokens int64 `json:"cached_tokens"`
		}{int64(u.CachedContentTokenCount)}
	}
	return cu
}

// geminiCall is p's function call as a chat tool call; a call without
// an id (the Gemini API gives none for some models) is given one from its
// place i, and p's thought signature is carried in the id (signedCallID).
func geminiCall(p *genai.Part, i int) ChatToolCall {
	fc := p.FunctionCall
	var tc ChatToolCall
	tc.ID, tc.Type, tc.Function.Name = fc.ID, "function", fc.Name
	if tc.ID == "" {
		tc.ID = "call_" + strconv.Itoa(i)
	}
	tc.ID = signedCallID(tc.ID, p.ThoughtSignature)
	args, err := json.Marshal(fc.Args)
	if err != nil || fc.Args == nil {
		args = []byte("{}")
	}
	tc.Function.Arguments = string(args)
	return tc
}

// Answer is a whole generateContent answer as a chat completion.
func (GeminiUpstream) Answer(body []byte) ([]byte, error) {
	var r genai.GenerateContentResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, err
	}
	if len(r.Candidates) == 0 || r.Candidates[0] == nil {
		if r.PromptFeedback != nil && r.PromptFeedback.BlockReason != "" {
			return blockedAnswer(geminiUsage(r.UsageMetadata)), nil
		}
		return nil, errors.New("a generateContent answer with no candidate")
	}
	cand := r.Candidates[0]
	var text, thinking strings.Builder
	var calls []ChatToolCall
	if cand.Content != nil {
		for _, p := range cand.Content.Parts {
			switch {
			case p == nil:
			case p.FunctionCall != nil:
				calls = append(calls, geminiCall(p, len(calls)))
			case p.Thought:
				thinking.WriteString(p.Text)
			default:
				text.WriteString(p.Text)
			}
		}
	}
	msg := map[string]any{"role": "assistant", "content": text.String()}
	if thinking.Len() > 0 {
		msg["reasoning_content"] = thinking.String()
	}
	if len(calls) > 0 {
		msg["tool_calls"] = calls
		if text.Len() == 0 {
			msg["content"] = nil
		}
	}
	choice := map[string]any{"index": 0, "message": msg, "finish_reason": geminiFinish(cand.FinishReason, len(calls) > 0)}
	answer := map[string]any{"id": short(r.ResponseID), "object": "chat.completion", "created": 0, "model": short(r.ModelVersion), "choices": []any{choice}}
	if u := geminiUsage(r.UsageMetadata); u != nil {
		answer["usage"] = u
	}
	return mustJSON(answer), nil
}

// blockedAnswer is the chat completion of a prompt the provider blocked:
// no content, finished by its content filter.
func blockedAnswer(u *openai.Usage) []byte {
	answer := map[string]any{"id": "", "object": "chat.completion", "created": 0, "model": "",
		"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": ""}, "finish_reason": "content_filter"}}}
	if u != nil {
		answer["usage"] = u
	}
	return mustJSON(answer)
}

// Error is a Google API error body ({"error":{"code","message","status"}})
// as an OpenAI error body; a prompt past the context window is
// context_length_exceeded, the code OpenAI gives it.
func (GeminiUpstream) Error(status int, body []byte) []byte {
	var e struct {
		Error struct {
			Message string `json:"message"`
			Status  string `json:"status"`
		} `json:"error"`
	}
	json.Unmarshal(body, &e)
	oe := &openai.Error{Status: status, Type: "invalid_request_error", Message: e.Error.Message}
	if oe.Message == "" {
		oe.Message = "The model's provider refused the request."
	}
	m := strings.ToLower(oe.Message)
	if status == http.StatusBadRequest && (contextTooLong(oe.Message) || strings.Contains(m, "exceeds the maximum number of tokens")) {
		oe.Code, oe.Param = "context_length_exceeded", "messages"
	}
	return oe.Body()
}

// Stream begins reading a streamGenerateContent answer.
func (GeminiUpstream) Stream() openai.EventDecoder { return &geminiDecoder{} }

// geminiDecoder turns a streamed answer's events, each a
// GenerateContentResponse, into chat chunks.
type geminiDecoder struct {
	started bool
	calls   int // function calls so far: the next one's chat index
}

func (d *geminiDecoder) chunk(delta map[string]any, finish any) []byte {
	return mustJSON(map[string]any{"id": "", "object": "chat.completion.chunk", "created": 0, "model": "",
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
}

// Event reads one streamed answer and appends the chat chunks it means:
// its text, thoughts and function calls, and with its finish reason the
// usage and the stream's end.
func (d *geminiDecoder) Event(_, data []byte, chunks [][]byte) [][]byte {
	var r genai.GenerateContentResponse
	if err := json.Unmarshal(data, &r); err != nil {
		var e struct {
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(data, &e) == nil && e.Error != nil {
			return append(chunks, mustJSON(map[string]any{"error": map[string]any{"message": e.Error.Message, "type": "api_error", "param": nil, "code": nil}}))
		}
		return chunks
	}
	if !d.started {
		d.started = true
		chunks = append(chunks, d.chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	}
	if len(r.Candidates) == 0 || r.Candidates[0] == nil {
		if r.PromptFeedback != nil && r.PromptFeedback.BlockReason != "" {
			chunks = append(chunks, d.chunk(map[string]any{}, "content_filter"))
			return d.end(chunks, r.UsageMetadata)
		}
		return chunks
	}
	cand := r.Candidates[0]
	if cand.Content != nil {
		for _, p := range cand.Content.Parts {
			switch {
			case p == nil:
			case p.FunctionCall != nil:
				tc := geminiCall(p, d.calls)
				call := map[string]any{"index": d.calls, "id": tc.ID, "type": "function",
					"function": map[string]string{"name": tc.Function.Name, "arguments": tc.Function.Arguments}}
				d.calls++
				chunks = append(chunks, d.chunk(map[string]any{"tool_calls": []any{call}}, nil))
			case p.Thought:
				chunks = append(chunks, d.chunk(map[string]any{"reasoning_content": p.Text}, nil))
			case p.Text != "":
				chunks = append(chunks, d.chunk(map[string]any{"content": p.Text}, nil))
			}
		}
	}
	if cand.FinishReason == "" {
		return chunks
	}
	chunks = append(chunks, d.chunk(map[string]any{}, geminiFinish(cand.FinishReason, d.calls > 0)))
	return d.end(chunks, r.UsageMetadata)
}

// end appends the usage chunk, when there is usage, and the stream's end.
func (d *geminiDecoder) end(chunks [][]byte, u *genai.GenerateContentResponseUsageMetadata) [][]byte {
	if cu := geminiUsage(u); cu != nil {
		chunks = append(chunks, mustJSON(map[string]any{"id": "", "object": "chat.completion.chunk", "created": 0, "model": "", "choices": []any{}, "usage": cu}))
	}
	return append(chunks, openai.Done)
}

// callSignatureSep parts a tool call's id from the thought signature
// it carries.
const callSignatureSep = "__sig_"

// signedCallID is a tool call's id carrying sig, the thought signature
// Gemini gave its function call, which the model requires back on the
// turns after it: id itself without one, and otherwise id, then
// callSignatureSep, then sig in unpadded URL-safe base64, so that every
// client, which sends a call's id back as it got it, sends the signature
// back too, in letters, digits, _ and - as any id may hold.
func signedCallID(id string, sig []byte) string {
	if len(sig) == 0 {
		return id
	}
	return id + callSignatureSep + base64.RawURLEncoding.EncodeToString(sig)
}

// splitCallID is a tool call's id and the thought signature it carries
// (signedCallID); an id that carries none, or none that decodes, is
// itself, with none.
func splitCallID(id string) (string, []byte) {
	base, enc, ok := strings.Cut(id, callSignatureSep)
	if !ok {
		return id, nil
	}
	sig, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil || len(sig) == 0 {
		return id, nil
	}
	return base, sig
}
