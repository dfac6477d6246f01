package translate

// A chat completions request as a generateContent request, for a pool of
// kind gemini (the Gemini API) or vertex (Vertex AI): the request is first
// read as a Messages API request (ChatToAnthropic), then written as the
// genai SDK's own types (Content, Part, Tool, GenerationConfig), whose JSON
// is the wire's. What generateContent cannot take is refused with a 400
// naming the field. Beside it, where such a call goes (GeminiUpstream.URL);
// its answers are read back as chat in chat_gemini_answer.go.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"

	"google.golang.org/genai"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// GeminiRequest is a generateContent request body, of the genai SDK's
// types.
type GeminiRequest struct {
	Contents          []*genai.Content        `json:"contents"`
	SystemInstruction *genai.Content          `json:"systemInstruction,omitempty"`
	Tools             []*genai.Tool           `json:"tools,omitempty"`
	ToolConfig        *genai.ToolConfig       `json:"toolConfig,omitempty"`
	GenerationConfig  *genai.GenerationConfig `json:"generationConfig,omitempty"`
}

// ChatToGeminiBody is the generateContent body for the chat completions
// body chat, asking for at most maxTokens output tokens (the bound
// reserved). A body past limit bytes is refused with a 413. It stops with
// ctx's error when ctx ends.
func ChatToGeminiBody(ctx context.Context, chat []byte, maxTokens, limit int64) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var c ChatRequest
	if err := decode(chat, &c, ""); err != nil {
		return nil, err
	}
	r, err := ChatToGemini(ctx, &c, maxTokens)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(r)
	if err != nil {
		return nil, openai.BadRequest("", "The request cannot be written as a generateContent request: %v", err)
	}
	if int64(len(body)) > limit {
		return nil, openai.TooLarge(limit)
	}
	return body, nil
}

// ChatToGemini is the generateContent request that asks what c asks, for
// at most maxTokens output tokens. It stops with ctx's error when ctx
// ends.
func ChatToGemini(ctx context.Context, c *ChatRequest, maxTokens int64) (*GeminiRequest, error) {
	r, err := ChatToAnthropic(ctx, c)
	if err != nil {
		return nil, err
	}
	gc := &genai.GenerationConfig{MaxOutputTokens: int32(min(max(maxTokens, 1), 1<<31-1)), StopSequences: r.StopSequences}
	if r.Temperature != nil {
		gc.Temperature = new(float32(*r.Temperature))
	}
	if r.TopP != nil {
		gc.TopP = new(float32(*r.TopP))
	}
	if r.TopK != nil {
		gc.TopK = new(float32(*r.TopK))
	}
	if err := geminiFormat(c.ResponseFmt, gc); err != nil {
		return nil, err
	}
	out := &GeminiRequest{Contents: []*genai.Content{}, GenerationConfig: gc}
	if out.SystemInstruction, err = geminiSystem(r.System); err != nil {
		return nil, err
	}
	names := map[string]string{} // key: a tool call's id; value: its function's name, which a result must give
	for i, m := range r.Messages {
		content, err := geminiContent(m, at("messages", i), names)
		if err != nil {
			return nil, err
		}
		out.Contents = append(out.Contents, content)
	}
	if out.Tools, out.ToolConfig, err = geminiTools(r.Tools, r.ToolChoice); err != nil {
		return nil, err
	}
	return out, nil
}

// geminiSystem is a Messages API system prompt as a system instruction.
func geminiSystem(raw json.RawMessage) (*genai.Content, error) {
	if isNull(raw) {
		return nil, nil
	}
	if isString(raw) {
		return &genai.Content{Role: genai.RoleUser, Parts: []*genai.Part{{Text: contentText(raw)}}}, nil
	}
	var blocks []AnthropicBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, err
	}
	c := &genai.Content{Role: genai.RoleUser}
	for _, b := range blocks {
		if b.Type != "text" {
			return nil, unsupported("messages", "system messages of %q content cannot be sent to a Gemini model", b.Type)
		}
		c.Parts = append(c.Parts, &genai.Part{Text: b.Text})
	}
	return c, nil
}

// geminiContent is one Messages API turn as a Content: the assistant's is
// the model's.
func geminiContent(m AnthropicMessage, path string, names map[string]string) (*genai.Content, error) {
	c := &genai.Content{Role: genai.RoleUser}
	if m.Role == "assistant" {
		c.Role = genai.RoleModel
	}
	if isString(m.Content) {
		c.Parts = []*genai.Part{{Text: contentText(m.Content)}}
		return c, nil
	}
	var blocks []AnthropicBlock
	if err := json.Unmarshal(m.Content, &blocks); err != nil {
		return nil, err
	}
	for _, b := range blocks {
		p, err := geminiPart(b, path, names)
		if err != nil {
			return nil, err
		}
		c.Parts = append(c.Parts, p)
	}
	return c, nil
}

// geminiPart is one Messages API block as a Part.
func geminiPart(b AnthropicBlock, path string, names map[string]string) (*genai.Part, error) {
	switch b.Type {
	case "text":
		return &genai.Part{Text: b.Text}, nil
	case "image":
		return geminiImage(b.Source, path)
	case "tool_use":
		args, err := jsonObject(b.Input)
		if err != nil {
			return nil, openai.BadRequest(path+".tool_calls", "%s.tool_calls: arguments must be a JSON object", path)
		}
		names[b.ID] = b.Name
		id, sig := splitCallID(b.ID)
		return &genai.Part{FunctionCall: &genai.FunctionCall{ID: id, Name: b.Name, Args: args}, ThoughtSignature: sig}, nil
	case "tool_result":
		name, ok := names[b.ToolUseID]
		if !ok {
			return nil, openai.BadRequest(path+".tool_call_id", "%s.tool_call_id: %q names no tool call before it, and a Gemini model needs the function's name", path, b.ToolUseID)
		}
		id, _ := splitCallID(b.ToolUseID)
		return &genai.Part{FunctionResponse: &genai.FunctionResponse{ID: id, Name: name,
			Response: map[string]any{"output": contentText(b.Content)}}}, nil
	}
	return nil, unsupported(path+".content", "content of type %q cannot be sent to a Gemini model", b.Type)
}

// geminiImage is an image as inline data: its bytes and MIME type. An
// image by URL is refused: generateContent reads only bytes sent with the
// request, or files it stores.
func geminiImage(src *AnthropicSource, path string) (*genai.Part, error) {
	param := path + ".content.image_url.url"
	if src == nil || src.Type != "base64" || !strings.HasPrefix(src.MediaType, "image/") {
		return nil, unsupported(param, "images must be sent as data: URLs (base64) to a Gemini model")
	}
	data, err := base64.StdEncoding.DecodeString(src.Data)
	if err != nil {
		return nil, openai.BadRequest(param, "%s: the image's base64 data does not decode", param)
	}
	return &genai.Part{InlineData: &genai.Blob{MIMEType: src.MediaType, Data: data}}, nil
}

// geminiTools is a Messages API request's tools and choice as function
// declarations and a function calling config.
func geminiTools(tools []AnthropicTool, choice *AnthropicToolChoice) ([]*genai.Tool, *genai.ToolConfig, error) {
	if len(tools) == 0 {
		return nil, nil, nil
	}
	t := &genai.Tool{}
	for i, tool := range tools {
		fd := &genai.FunctionDeclaration{Name: tool.Name, Description: tool.Description}
		if !isNull(tool.InputSchema) {
			schema, err := jsonObject(tool.InputSchema)
			if err != nil {
				return nil, nil, openai.BadRequest(at("tools", i)+".function.parameters", "%s.function.parameters: must be a JSON Schema object", at("tools", i))
			}
			fd.ParametersJsonSchema = schema
		}
		t.FunctionDeclarations = append(t.FunctionDeclarations, fd)
	}
	if choice == nil {
		return []*genai.Tool{t}, nil, nil
	}
	fc := &genai.FunctionCallingConfig{}
	switch choice.Type {
	case "auto":
		fc.Mode = genai.FunctionCallingConfigModeAuto
	case "any":
		fc.Mode = genai.FunctionCallingConfigModeAny
	case "none":
		fc.Mode = genai.FunctionCallingConfigModeNone
	case "tool":
		fc.Mode, fc.AllowedFunctionNames = genai.FunctionCallingConfigModeAny, []string{choice.Name}
	}
	return []*genai.Tool{t}, &genai.ToolConfig{FunctionCallingConfig: fc}, nil
}

// geminiFormat sets in gc what chat's response_format asks: JSON, with
// its schema when it gives one.
func geminiFormat(raw json.RawMessage, gc *genai.GenerationConfig) error {
	if isNull(raw) {
		return nil
	}
	var f struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return openai.BadRequest("response_format", "response_format: must be an object with a type")
	}
	switch f.Type {
	case "text":
		return nil
	case "json_object":
		gc.ResponseMIMEType = "application/json"
		return nil
	case "json_schema":
		if f.JSONSchema == nil || isNull(f.JSONSchema.Schema) {
			return openai.BadRequest("response_format.json_schema.schema", "response_format.json_schema.schema: must be a JSON Schema object")
		}
		schema, err := jsonObject(f.JSONSchema.Schema)
		if err != nil {
			return openai.BadRequest("response_format.json_schema.schema", "response_format.json_schema.schema: must be a JSON Schema object")
		}
		gc.ResponseMIMEType, gc.ResponseJsonSchema = "application/json", schema
		return nil
	}
	return unsupported("response_format.type", "response_format of type %q cannot be sent to a Gemini model", f.Type)
}

// jsonObject is a JSON object, its numbers kept as written.
func jsonObject(raw json.RawMessage) (map[string]any, error) {
	var v map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil || v == nil {
		return nil, errNotObject
	}
	return v, nil
}

var errNotObject = openai.BadRequest("", "not a JSON object")

// GeminiUpstream reads a generateContent upstream, the Gemini API's or
// Vertex AI's, as chat completions. It is an openai.Provider, and holds no
// state: one serves every call.
type GeminiUpstream struct{}

var _ openai.Provider = GeminiUpstream{}

// URL is where a call for model goes at the endpoint at base: for the
// Gemini API base is its versioned root ({url}/v1), for Vertex AI the
// model's publisher's ({url}/v1/projects/P/locations/L/publishers/google).
// A stream asks for SSE.
func (GeminiUpstream) URL(base, model string, stream bool) string {
	if stream {
		return base + "/models/" + url.PathEscape(model) + ":streamGenerateContent?alt=sse"
	}
	return base + "/models/" + url.PathEscape(model) + ":generateContent"
}
