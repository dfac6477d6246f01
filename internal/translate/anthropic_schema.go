package translate

// Anthropic's Messages API on the wire, as far as llmgw reads and writes
// it: a request with its turns, blocks and tools; a whole answer and its
// usage; the part of a streamed event an upstream's stream is read by; an
// error body.

import "encoding/json"

// AnthropicRequest is a Messages API request, as far as it maps onto chat
// completions. Fields it does not name (context_management, cache_control,
// container, mcp_servers, service_tier, ...) are read past and not sent
// on; to a pool of kind anthropic the client's own body goes, with all of
// them.
type AnthropicRequest struct {
	Model         string               `json:"model"`
	MaxTokens     *int64               `json:"max_tokens,omitempty"`
	System        json.RawMessage      `json:"system,omitempty"` // a string or text blocks
	Messages      []AnthropicMessage   `json:"messages"`
	StopSequences []string             `json:"stop_sequences,omitempty"`
	Temperature   *float64             `json:"temperature,omitempty"`
	TopP          *float64             `json:"top_p,omitempty"`
	TopK          *int64               `json:"top_k,omitempty"`
	Stream        bool                 `json:"stream,omitempty"`
	Tools         []AnthropicTool      `json:"tools,omitempty"`
	ToolChoice    *AnthropicToolChoice `json:"tool_choice,omitempty"`
	Metadata      *AnthropicMetadata   `json:"metadata,omitempty"`
	// Thinking and OutputConfig say how the model is to reason; see
	// Reasoning. Neither is sent in a chat request.
	Thinking     *AnthropicThinking     `json:"thinking,omitempty"`
	OutputConfig *AnthropicOutputConfig `json:"output_config,omitempty"`
}

// AnthropicThinking is a request's extended thinking: Type enabled (with
// BudgetTokens), adaptive or disabled; Display summarized or omitted.
type AnthropicThinking struct {
	Type         string `json:"type"`
	BudgetTokens *int64 `json:"budget_tokens,omitempty"`
	Display      string `json:"display,omitempty"`
}

// AnthropicOutputConfig is a request's output_config, as far as it maps:
// Effort is low, medium, high, xhigh or max. Its other fields (format,
// ...) are read past.
type AnthropicOutputConfig struct {
	Effort string `json:"effort,omitempty"`
}

// AnthropicMetadata is a request's metadata; user_id is the end user.
type AnthropicMetadata struct {
	UserID string `json:"user_id,omitempty"`
}

// AnthropicMessage is one turn: Content is a string or an array of blocks.
type AnthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// AnthropicBlock is one content block of a message or an answer.
type AnthropicBlock struct {
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
	// Thinking and Signature are a thinking block's: the model's reasoning
	// and, from Anthropic, the signature that vouches for it.
	Thinking  *string `json:"thinking,omitempty"`
	Signature *string `json:"signature,omitempty"`
	// Source is an image's: base64 data or a URL.
	Source *AnthropicSource `json:"source,omitempty"`
	// ID, Name and Input are a tool_use block's.
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// ToolUseID, Content and IsError are a tool_result block's; Content is
	// a string or blocks.
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
	// Data is a redacted_thinking block's: the reasoning, encrypted.
	Data string `json:"data,omitempty"`
	// ToolName is a tool_reference block's, in a tool result: a tool the
	// result makes available.
	ToolName string `json:"tool_name,omitempty"`
	// Tool is a tool_addition or tool_removal block's, in a system
	// message: the tool the conversation gains or loses from there on.
	Tool *AnthropicToolRef `json:"tool,omitempty"`
}

// AnthropicToolRef is the tool a tool_addition or tool_removal names:
// Type tool_reference names it (a tool of the request's), tool_definition
// defines it.
type AnthropicToolRef struct {
	Type       string         `json:"type"`
	Name       string         `json:"name,omitempty"`
	Definition *AnthropicTool `json:"definition,omitempty"`
}

// AnthropicSource is where an image block's bytes are.
type AnthropicSource struct {
	Type      string `json:"type"` // base64 or url
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

// AnthropicTool is a tool the model may use. Type is empty or "custom"
// for a client tool; Anthropic's server tools have other types.
type AnthropicTool struct {
	Type        string          `json:"type,omitempty"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
}

// AnthropicToolChoice is auto, any, tool (with Name) or none.
type AnthropicToolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name,omitempty"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use,omitempty"`
}

// AnthropicAnswer is a whole Messages API answer.
type AnthropicAnswer struct {
	ID           string           `json:"id"`
	Type         string           `json:"type"`
	Role         string           `json:"role"`
	Model        string           `json:"model"`
	Content      []AnthropicBlock `json:"content"`
	StopReason   *string          `json:"stop_reason"`
	StopSequence *string          `json:"stop_sequence"`
	Usage        AnthropicUsage   `json:"usage"`
}

// AnthropicUsage is an answer's token accounting. InputTokens leaves out
// the prompt tokens read from the cache, which CacheReadInputTokens counts.
type AnthropicUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
}

// streamEvent is the part of a Messages API stream event the decoder reads.
type streamEvent struct {
	Type    string `json:"type"`
	Message *struct {
		ID    string         `json:"id"`
		Model string         `json:"model"`
		Usage AnthropicUsage `json:"usage"`
	} `json:"message"`
	ContentBlock *AnthropicBlock `json:"content_block"`
	Delta        *struct {
		Type         string  `json:"type"`
		Text         string  `json:"text"`
		PartialJSON  string  `json:"partial_json"`
		Thinking     string  `json:"thinking"`
		Signature    string  `json:"signature"`
		StopReason   *string `json:"stop_reason"`
		StopSequence *string `json:"stop_sequence"`
	} `json:"delta"`
	Usage *struct {
		InputTokens              *int64 `json:"input_tokens"`
		OutputTokens             int64  `json:"output_tokens"`
		CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
		CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	} `json:"usage"`
	Error *anthropicErrorFields `json:"error"`
}

// anthropicError is an error body as the Messages API sends it.
type anthropicError struct {
	Type  string               `json:"type"`
	Error anthropicErrorFields `json:"error"`
}

// anthropicErrorFields are an error body's error: its type and message.
type anthropicErrorFields struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}
