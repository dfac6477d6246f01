package translate

// A Bedrock Converse answer read back as chat completions, before the
// relay reads it: a whole answer (ConverseOutput) as a chat completion,
// each ConverseStream event-stream message as chat chunks, an error body
// as OpenAI's. Each is read by the AWS SDK's own protocol into its own
// types first, so that what is read is what the SDK would read.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/document"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/schemas"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/aws/smithy-go/transport/http/protocol/restjson1"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// BedrockUpstream reads a Bedrock Converse upstream as chat completions.
// It is an openai.Provider whose streams are AWS event streams, and holds
// no state: one serves every call.
type BedrockUpstream struct{}

var _ openai.BinaryStreamer = BedrockUpstream{}

// BedrockStreamType is the content type of ConverseStream's answers.
const BedrockStreamType = "application/vnd.amazon.eventstream"

// StreamContentType is BedrockStreamType.
func (BedrockUpstream) StreamContentType() string { return BedrockStreamType }

// URL is where a call for model (a model id, inference profile or ARN)
// goes at the endpoint at base: Converse, or ConverseStream for a stream.
func (BedrockUpstream) URL(base, model string, stream bool) string {
	op := "/converse"
	if stream {
		op = "/converse-stream"
	}
	return base + "/model/" + pathEscape(model) + op
}

// pathEscape escapes a model id as the SDK does a label: every byte but
// unreserved ones, ':' of an ARN and '/' of one included.
func pathEscape(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte("0123456789ABCDEF"[c>>4])
		b.WriteByte("0123456789ABCDEF"[c&15])
	}
	return b.String()
}

// bedrockFinish is a Converse stop reason as a chat finish_reason.
func bedrockFinish(stop types.StopReason) string {
	switch stop {
	case types.StopReasonMaxTokens, types.StopReasonModelContextWindowExceeded:
		return "length"
	case types.StopReasonToolUse:
		return "tool_calls"
	case types.StopReasonContentFiltered, types.StopReasonGuardrailIntervened:
		return "content_filter"
	}
	return "stop"
}

// bedrockUsage is a Converse usage as chat's, whose prompt counts every
// input token, read from cache, written to it or neither.
func bedrockUsage(u *types.TokenUsage) *openai.Usage {
	if u == nil {
		return nil
	}
	n := func(p *int32) int64 {
		if p == nil {
			return 0
		}
		return int64(*p)
	}
	return chatUsage(AnthropicUsage{InputTokens: n(u.InputTokens), OutputTokens: n(u.OutputTokens),
		CacheReadInputTokens: n(u.CacheReadInputTokens), CacheCreationInputTokens: n(u.CacheWriteInputTokens)})
}

// documentJSON is a document the SDK read as compact JSON: {} when it
// has none or it does not marshal.
func documentJSON(d document.Interface) string {
	if d == nil {
		return "{}"
	}
	b, err := d.MarshalSmithyDocument()
	if err != nil || !json.Valid(b) {
		return "{}"
	}
	return compact(b)
}

// Answer is a whole Converse answer as a chat completion.
func (BedrockUpstream) Answer(body []byte) ([]byte, error) {
	var out bedrockruntime.ConverseOutput
	resp := &smithyhttp.Response{Response: &http.Response{StatusCode: http.StatusOK, Header: http.Header{},
		Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body))}}
	if err := restjson1.New(nil).DeserializeResponse(context.Background(), converseOp, bedrockruntime.TypeRegistry, resp, &out); err != nil {
		return nil, err
	}
	m, ok := out.Output.(*types.ConverseOutputMemberMessage)
	if !ok {
		return nil, errors.New("a Converse answer with no message")
	}
	var text, thinking strings.Builder
	var calls []ChatToolCall
	for _, b := range m.Value.Content {
		switch b := b.(type) {
		case *types.ContentBlockMemberText:
			text.WriteString(b.Value)
		case *types.ContentBlockMemberReasoningContent:
			if r, ok := b.Value.(*types.ReasoningContentBlockMemberReasoningText); ok && r.Value.Text != nil {
				thinking.WriteString(*r.Value.Text)
			}
		case *types.ContentBlockMemberToolUse:
			var tc ChatToolCall
			tc.ID, tc.Type, tc.Function.Name, tc.Function.Arguments = deref(b.Value.ToolUseId), "function", deref(b.Value.Name), documentJSON(b.Value.Input)
			calls = append(calls, tc)
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
	choice := map[string]any{"index": 0, "message": msg, "finish_reason": bedrockFinish(out.StopReason)}
	answer := map[string]any{"id": "", "object": "chat.completion", "created": 0, "model": "", "choices": []any{choice}}
	if u := bedrockUsage(out.Usage); u != nil {
		answer["usage"] = u
	}
	return mustJSON(answer), nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// contextTooLong reports whether a Bedrock ValidationException's message
// says the prompt is past the model's context window.
func contextTooLong(msg string) bool {
	m := strings.ToLower(msg)
	for _, s := range []string{"too long", "too many input tokens", "context window", "context length", "maximum context"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// Error is a Converse error body ({"message": ...}) as an OpenAI error
// body; a prompt past the context window is context_length_exceeded, the
// code OpenAI gives it.
func (BedrockUpstream) Error(status int, body []byte) []byte {
	var e struct {
		Message  string `json:"message"`
		MessageU string `json:"Message"`
	}
	json.Unmarshal(body, &e)
	if e.Message == "" {
		e.Message = e.MessageU
	}
	oe := &openai.Error{Status: status, Type: "invalid_request_error", Message: e.Message}
	if oe.Message == "" {
		oe.Message = "The model's provider refused the request."
	}
	if status == http.StatusBadRequest && contextTooLong(oe.Message) {
		oe.Code, oe.Param = "context_length_exceeded", "messages"
	}
	return oe.Body()
}

// Stream begins reading a ConverseStream answer.
func (BedrockUpstream) Stream() openai.EventDecoder {
	return &bedrockDecoder{proto: restjson1.New(nil)}
}

// bedrockDecoder turns a ConverseStream answer's messages into chat
// chunks.
type bedrockDecoder struct {
	proto  *restjson1.Protocol // its event-stream codec keeps a buffer: one a stream
	tools  int                 // tool use blocks so far: the next one's chat index
	inTool bool                // the open block is a tool use
	stop   types.StopReason    // the answer's, once messageStop is read
}

func (d *bedrockDecoder) chunk(delta map[string]any, finish any) []byte {
	return mustJSON(map[string]any{"id": "", "object": "chat.completion.chunk", "created": 0, "model": "",
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
}

// Event reads one event-stream message, whole, and appends the chat
// chunks it means.
func (d *bedrockDecoder) Event(_, data []byte, chunks [][]byte) [][]byte {
	ev, err := d.proto.DeserializeEventMessage(schemas.ConverseStreamOutput, bedrockruntime.TypeRegistry, bytes.NewReader(data))
	if err != nil {
		return append(chunks, bedrockStreamError(err))
	}
	switch ev := ev.(type) {
	case *types.MessageStartEvent:
		return append(chunks, d.chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	case *types.ContentBlockStartEvent:
		tu, ok := ev.Start.(*types.ContentBlockStartMemberToolUse)
		d.inTool = ok
		if !ok {
			return chunks
		}
		call := map[string]any{"index": d.tools, "id": deref(tu.Value.ToolUseId), "type": "function",
			"function": map[string]string{"name": deref(tu.Value.Name), "arguments": ""}}
		d.tools++
		return append(chunks, d.chunk(map[string]any{"tool_calls": []any{call}}, nil))
	case *types.ContentBlockDeltaEvent:
		switch delta := ev.Delta.(type) {
		case *types.ContentBlockDeltaMemberText:
			return append(chunks, d.chunk(map[string]any{"content": delta.Value}, nil))
		case *types.ContentBlockDeltaMemberToolUse:
			if !d.inTool || delta.Value.Input == nil || *delta.Value.Input == "" {
				return chunks
			}
			call := map[string]any{"index": d.tools - 1, "function": map[string]string{"arguments": *delta.Value.Input}}
			return append(chunks, d.chunk(map[string]any{"tool_calls": []any{call}}, nil))
		case *types.ContentBlockDeltaMemberReasoningContent:
			if t, ok := delta.Value.(*types.ReasoningContentBlockDeltaMemberText); ok {
				return append(chunks, d.chunk(map[string]any{"reasoning_content": t.Value}, nil))
			}
		}
	case *types.ContentBlockStopEvent:
		d.inTool = false
	case *types.MessageStopEvent:
		d.stop = ev.StopReason
		return append(chunks, d.chunk(map[string]any{}, bedrockFinish(ev.StopReason)))
	case *types.ConverseStreamMetadataEvent:
		// The last event: its usage, then the stream's end.
		if u := bedrockUsage(ev.Usage); u != nil {
			chunks = append(chunks, mustJSON(map[string]any{"id": "", "object": "chat.completion.chunk", "created": 0, "model": "",
				"choices": []any{}, "usage": u}))
		}
		return append(chunks, openai.Done)
	}
	return chunks
}

// bedrockStreamError is the chat error chunk for an exception (or a
// message that does not decode) in a ConverseStream answer.
func bedrockStreamError(err error) []byte {
	typ, msg := "api_error", "The model's provider failed mid-answer."
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "ThrottlingException", "throttlingException":
			typ = "rate_limit_error"
		case "ValidationException", "validationException":
			typ = "invalid_request_error"
		}
		if m := api.ErrorMessage(); m != "" {
			msg = m
		}
	}
	return mustJSON(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}})
}
