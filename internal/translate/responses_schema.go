package translate

// OpenAI's Responses API on the wire, as far as llmgw reads and writes
// it: a request with its tools, input items and their parts; a response
// object, its usage and the output items a chat answer makes.

import "encoding/json"

// ResponsesRequest is a Responses API request, as far as it maps onto chat
// completions. Fields it does not name (truncation, service_tier, ...)
// are read past and not sent on.
type ResponsesRequest struct {
	Model        string          `json:"model"`
	Input        json.RawMessage `json:"input"` // a string or items
	Instructions *string         `json:"instructions,omitempty"`
	// Tools are decoded by ParseResponses, each naming its place in an
	// error.
	Tools           []ResponsesTool `json:"-"`
	ToolChoice      json.RawMessage `json:"tool_choice,omitempty"`
	MaxOutputTokens *int64          `json:"max_output_tokens,omitempty"`
	Temperature     *float64        `json:"temperature,omitempty"`
	TopP            *float64        `json:"top_p,omitempty"`
	Parallel        *bool           `json:"parallel_tool_calls,omitempty"`
	Stream          bool            `json:"stream,omitempty"`
	User            string          `json:"user,omitempty"`
	Text            *struct {
		Format json.RawMessage `json:"format,omitempty"`
	} `json:"text,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
	// Reasoning is what a reasoning model is asked: how hard to think,
	// and whether its reasoning is answered, as a summary.
	Reasoning *ResponsesReasoning `json:"reasoning,omitempty"`
	// PromptCacheKey names the requests to be served from one cache: it
	// goes on as chat's prompt_cache_key, which routing places them by.
	PromptCacheKey *string `json:"prompt_cache_key,omitempty"`
	// Include asks for more in the answer; none of it is more than the
	// answer has (reasoning.encrypted_content: llmgw has no encrypted
	// reasoning to give), so it is read and left.
	Include []string `json:"include,omitempty"`
	// ClientMetadata is a client's notes on the request (Codex CLI's
	// turn), read and left.
	ClientMetadata json.RawMessage `json:"client_metadata,omitempty"`

	// What needs a store of responses, or of prompts, which llmgw does
	// not keep.
	Store              *bool           `json:"store,omitempty"`
	PreviousResponseID *string         `json:"previous_response_id,omitempty"`
	Conversation       json.RawMessage `json:"conversation,omitempty"`
	Background         *bool           `json:"background,omitempty"`
	Prompt             json.RawMessage `json:"prompt,omitempty"`

	// added are the tools of the input's additional_tools items, and
	// names what each chat function ToChat offered stands for, by its
	// name; both set by ToChat, names read by the answer's translation.
	added []ResponsesTool
	names toolNames
}

// ResponsesReasoning is a request's reasoning settings.
type ResponsesReasoning struct {
	// Effort is how hard the model thinks: none, minimal, low, medium,
	// high...; chat's reasoning_effort.
	Effort *string `json:"effort,omitempty"`
	// Summary asks for the model's reasoning as a summary: auto,
	// concise or detailed; null or none for none. GenerateSummary is its
	// older name.
	Summary         *string `json:"summary,omitempty"`
	GenerateSummary *string `json:"generate_summary,omitempty"`
}

// Summarized reports whether r asks for the model's reasoning, as
// reasoning items with a summary.
func (r *ResponsesRequest) Summarized() bool {
	if r == nil || r.Reasoning == nil {
		return false
	}
	for _, s := range []*string{r.Reasoning.Summary, r.Reasoning.GenerateSummary} {
		if s != nil && *s != "" && *s != "none" {
			return true
		}
	}
	return false
}

// ResponsesTool is a tool of a Responses request: a function, a custom
// tool (free-form text in, perhaps of a grammar), a namespace grouping
// functions and custom tools, or a hosted tool, which the gateway cannot
// run (hosted.go).
type ResponsesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
	// Tools are a namespace's functions and custom tools.
	Tools []ResponsesTool `json:"tools,omitempty"`
	// Format is a custom tool's input: {"type":"text"}, or a grammar
	// ({"type":"grammar","syntax":"lark","definition":"..."}).
	Format json.RawMessage `json:"format,omitempty"`

	raw  json.RawMessage // the tool as the client sent it, which the answer echoes
	path string          // where it is in the request: tools[3], input[0].tools[1]
}

// responsesItem is one input item: a message, a function or custom tool
// call the model made, a call's output, or tools added to the request's.
type responsesItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"` // a string or parts
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Namespace string          `json:"namespace"` // of a namespaced tool's call
	Arguments string          `json:"arguments"`
	Input     json.RawMessage `json:"input"`  // a custom tool call's: a string
	Output    json.RawMessage `json:"output"` // a string or parts
	Tools     json.RawMessage `json:"tools"`  // an additional_tools item's
}

// responsesPart is one part of an input message's content.
type responsesPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL string `json:"image_url"`
	Detail   string `json:"detail"`
	FileID   string `json:"file_id"`
}

// responseObject is a Responses API response.
type responseObject struct {
	ID                string            `json:"id"`
	Object            string            `json:"object"`
	CreatedAt         int64             `json:"created_at"`
	Status            string            `json:"status"`
	Error             *responseError    `json:"error"`
	IncompleteDetails *incomplete       `json:"incomplete_details"`
	Instructions      *string           `json:"instructions"`
	MaxOutputTokens   *int64            `json:"max_output_tokens"`
	Model             string            `json:"model"`
	Output            []any             `json:"output"`
	ParallelToolCalls bool              `json:"parallel_tool_calls"`
	Temperature       *float64          `json:"temperature"`
	TopP              *float64          `json:"top_p"`
	ToolChoice        json.RawMessage   `json:"tool_choice"`
	Tools             []json.RawMessage `json:"tools"` // the request's, as it sent them
	Store             bool              `json:"store"`
	Truncation        string            `json:"truncation"`
	Metadata          map[string]string `json:"metadata"`
	Usage             *responsesUsage   `json:"usage"`
}

type responseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type incomplete struct {
	Reason string `json:"reason"`
}

type responsesUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int64 `json:"total_tokens"`
}

// messageItem, functionItem, customItem and reasoningItem are the output
// items a chat answer makes.
type messageItem struct {
	Type    string       `json:"type"` // message
	ID      string       `json:"id"`
	Status  string       `json:"status"`
	Role    string       `json:"role"`
	Content []outputText `json:"content"`
}

type outputText struct {
	Type        string          `json:"type"` // output_text
	Text        json.RawMessage `json:"text"` // a JSON string
	Annotations []any           `json:"annotations"`
	Logprobs    []any           `json:"logprobs"`
}

type functionItem struct {
	Type      string `json:"type"` // function_call
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	Arguments string `json:"arguments"`
	Status    string `json:"status"`
}

type customItem struct {
	Type      string `json:"type"` // custom_tool_call
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	Input     string `json:"input"`
	Status    string `json:"status"`
}

type reasoningItem struct {
	Type    string        `json:"type"` // reasoning
	ID      string        `json:"id"`
	Summary []summaryText `json:"summary"`
}

type summaryText struct {
	Type string `json:"type"` // summary_text
	Text string `json:"text"`
}
