package translate

// Chat completions answers as OpenAI's Responses API answers them: the
// translator a Responses client is answered through, and a whole answer
// as a response object with output items. The items are a message,
// function and custom tool calls (named as the client named its tools:
// responses_chat_tools.go) and, when the request asks for a summary, the
// model's reasoning as a reasoning item whose summary is the
// reasoning_content a backend sent; never encrypted_content, which llmgw
// has none of. A streamed answer is responses_chat_stream.go's.

import (
	"encoding/json"
	"strconv"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// Responses answers one Responses API request from a chat completions
// answer. It is an openai.Translator.
type Responses struct {
	// ID is the response's id: resp_ and the request's id.
	ID string
	// Model is the model named in the answer.
	Model     string
	CreatedAt int64 // unix seconds
	// Request is what the response object echoes.
	Request *ResponsesRequest

	decodeAll bool // decode every chunk, for tests comparing with the fast path
}

var _ openai.Translator = (*Responses)(nil)

// callItem is the output item of the chat tool call tc, at output index
// n, named as the client's tool the request's names say it stands for.
func (r *Responses) callItem(tc ChatToolCall, n int, status string) any {
	ref := r.names().ref(tc.Function.Name)
	if ref.custom {
		return customItem{Type: "custom_tool_call", ID: r.itemID("ctc", n), CallID: tc.ID, Name: ref.name, Namespace: ref.namespace,
			Input: customInput(tc.Function.Arguments), Status: status}
	}
	return functionItem{Type: "function_call", ID: r.itemID("fc", n), CallID: tc.ID, Name: ref.name, Namespace: ref.namespace,
		Arguments: tc.Function.Arguments, Status: status}
}

// names is what the request's chat functions stand for.
func (r *Responses) names() *toolNames {
	if r.Request == nil {
		return &toolNames{}
	}
	return &r.Request.names
}

func newOutputText(text json.RawMessage) outputText {
	return outputText{Type: "output_text", Text: text, Annotations: []any{}, Logprobs: []any{}}
}

// object is the response in status, with output and usage.
func (r *Responses) object(status string, output []any, u *openai.Usage) *responseObject {
	o := &responseObject{ID: r.ID, Object: "response", CreatedAt: r.CreatedAt, Status: status, Model: r.Model,
		Output: output, ParallelToolCalls: true, ToolChoice: json.RawMessage(`"auto"`), Tools: []json.RawMessage{},
		Truncation: "disabled", Metadata: map[string]string{}}
	if o.Output == nil {
		o.Output = []any{}
	}
	if q := r.Request; q != nil {
		o.Instructions, o.MaxOutputTokens, o.Temperature, o.TopP = q.Instructions, q.MaxOutputTokens, q.Temperature, q.TopP
		if q.Parallel != nil {
			o.ParallelToolCalls = *q.Parallel
		}
		if !isNull(q.ToolChoice) {
			o.ToolChoice = q.ToolChoice
		}
		if q.Tools != nil {
			o.Tools = rawTools(q.Tools)
		}
		if q.Metadata != nil {
			o.Metadata = q.Metadata
		}
	}
	if u != nil {
		ru := &responsesUsage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.PromptTokens + u.CompletionTokens}
		ru.InputTokensDetails.CachedTokens = u.CachedTokens()
		o.Usage = ru
	}
	return o
}

// finished sets a finished response's status from the chat finish_reason.
func (o *responseObject) finished(finish string) {
	o.Status = "completed"
	switch finish {
	case "length":
		o.Status, o.IncompleteDetails = "incomplete", &incomplete{Reason: "max_output_tokens"}
	case "content_filter":
		o.Status, o.IncompleteDetails = "incomplete", &incomplete{Reason: "content_filter"}
	}
}

// Answer is a whole chat completion as a response object.
func (r *Responses) Answer(chat []byte) ([]byte, error) {
	c, err := readCompletion(chat)
	if err != nil {
		return nil, err
	}
	ch := c.Choices[0]
	var output []any
	if rc := ch.Message.ReasoningContent; rc != "" && r.Request.Summarized() {
		output = append(output, reasoningItem{Type: "reasoning", ID: r.itemID("rs", 0), Summary: []summaryText{{"summary_text", rc}}})
	}
	if text := contentText(ch.Message.Content); text != "" {
		output = append(output, messageItem{Type: "message", ID: r.itemID("msg", len(output)), Status: "completed", Role: "assistant",
			Content: []outputText{newOutputText(jsonString(text))}})
	}
	for _, tc := range ch.Message.ToolCalls {
		output = append(output, r.callItem(tc, len(output), "completed"))
	}
	o := r.object("completed", output, c.Usage)
	o.finished(ch.FinishReason)
	return mustJSON(o), nil
}

// itemID is the id of the response's output item n: msg_, fc_, ctc_ or
// rs_, the response's id and n.
func (r *Responses) itemID(prefix string, n int) string {
	return prefix + "_" + r.ID + "_" + strconv.Itoa(n)
}

// ErrorBody is e as OpenAI sends it.
func (r *Responses) ErrorBody(e *openai.Error) []byte { return e.Body() }

// Stream begins translating a streamed answer.
func (r *Responses) Stream() openai.EventTranslator {
	return &responsesStream{r: r, open: -1, summarize: r.Request.Summarized()}
}
