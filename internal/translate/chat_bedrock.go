package translate

// A chat completions request as a Bedrock Converse request, for a pool of
// kind bedrock: the request is first read as a Messages API request
// (ChatToAnthropic: system prompt, turns, tool results gathered into user
// turns), then written as the AWS SDK's own Converse types and serialized
// by the SDK's own protocol (restJson1), so that the body is the one the
// SDK would send. What Converse cannot take is refused with a 400 naming
// the field. Beside it, where such a call goes (BedrockUpstream.URL) and
// how it is signed (BedrockSigner); its answers are read back as chat in
// chat_bedrock_answer.go.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
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

// converseOp is the Converse operation's schema, which the SDK's protocol
// serializes a request and reads an answer by.
var converseOp = smithy.NewOperationSchema(schemas.Converse, schemas.ConverseRequest, schemas.ConverseResponse)

// ChatToBedrockBody is the Converse body for the chat completions body
// chat, asking for at most maxTokens output tokens (the bound reserved;
// Converse takes at most 2^31-1). A body past limit bytes is refused with
// a 413. It stops with ctx's error when ctx ends.
func ChatToBedrockBody(ctx context.Context, chat []byte, maxTokens, limit int64) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var c ChatRequest
	if err := decode(chat, &c, ""); err != nil {
		return nil, err
	}
	in, err := ChatToConverse(ctx, &c, maxTokens)
	if err != nil {
		return nil, err
	}
	body, err := SerializeConverse(ctx, in)
	if err != nil {
		return nil, err
	}
	if int64(len(body)) > limit {
		return nil, openai.TooLarge(limit)
	}
	return body, nil
}

// SerializeConverse is in's body as the AWS SDK writes it.
func SerializeConverse(ctx context.Context, in *bedrockruntime.ConverseInput) ([]byte, error) {
	req := smithyhttp.NewStackRequest().(*smithyhttp.Request)
	req.URL = &url.URL{Scheme: "https", Host: "bedrock-runtime", Path: "/"}
	if err := restjson1.New(nil).SerializeRequest(ctx, converseOp, in, req); err != nil {
		return nil, openai.BadRequest("", "The request cannot be written as a Converse request: %v", err)
	}
	r := req.GetStream()
	if r == nil {
		return []byte("{}"), nil
	}
	return io.ReadAll(r)
}

// ChatToConverse is the Converse request that asks what c asks, for at
// most maxTokens output tokens. It stops with ctx's error when ctx ends.
func ChatToConverse(ctx context.Context, c *ChatRequest, maxTokens int64) (*bedrockruntime.ConverseInput, error) {
	if c.TopK != nil {
		return nil, unsupported("top_k", "top_k cannot be sent to a model served by Bedrock's Converse API")
	}
	r, err := ChatToAnthropic(ctx, c)
	if err != nil {
		return nil, err
	}
	in := &bedrockruntime.ConverseInput{ModelId: &c.Model, InferenceConfig: &types.InferenceConfiguration{StopSequences: r.StopSequences}}
	if in.ModelId == nil || *in.ModelId == "" {
		in.ModelId = new("model")
	}
	in.InferenceConfig.MaxTokens = new(int32(min(max(maxTokens, 1), 1<<31-1)))
	if r.Temperature != nil {
		in.InferenceConfig.Temperature = new(float32(*r.Temperature))
	}
	if r.TopP != nil {
		in.InferenceConfig.TopP = new(float32(*r.TopP))
	}
	if in.System, err = converseSystem(r.System); err != nil {
		return nil, err
	}
	for i, m := range r.Messages {
		msg, err := converseMessage(m, at("messages", i))
		if err != nil {
			return nil, err
		}
		in.Messages = append(in.Messages, msg)
	}
	if in.ToolConfig, err = converseTools(r.Tools, r.ToolChoice); err != nil {
		return nil, err
	}
	if in.OutputConfig, err = converseOutput(c.ResponseFmt); err != nil {
		return nil, err
	}
	return in, nil
}

// converseSystem is a Messages API system prompt (a string or text
// blocks) as Converse's.
func converseSystem(raw json.RawMessage) ([]types.SystemContentBlock, error) {
	if isNull(raw) {
		return nil, nil
	}
	if isString(raw) {
		return []types.SystemContentBlock{&types.SystemContentBlockMemberText{Value: contentText(raw)}}, nil
	}
	var blocks []AnthropicBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, err
	}
	var out []types.SystemContentBlock
	for _, b := range blocks {
		if b.Type != "text" {
			return nil, unsupported("messages", "system messages of %q content cannot be sent to a model served by Bedrock's Converse API", b.Type)
		}
		out = append(out, &types.SystemContentBlockMemberText{Value: b.Text})
	}
	return out, nil
}

// converseMessage is one Messages API turn as a Converse message.
func converseMessage(m AnthropicMessage, path string) (types.Message, error) {
	msg := types.Message{Role: types.ConversationRole(m.Role)}
	if isString(m.Content) {
		msg.Content = []types.ContentBlock{&types.ContentBlockMemberText{Value: contentText(m.Content)}}
		return msg, nil
	}
	var blocks []AnthropicBlock
	if err := json.Unmarshal(m.Content, &blocks); err != nil {
		return msg, err
	}
	for _, b := range blocks {
		cb, err := converseBlock(b, path)
		if err != nil {
			return msg, err
		}
		msg.Content = append(msg.Content, cb)
	}
	return msg, nil
}

// converseBlock is one Messages API content block as Converse's.
func converseBlock(b AnthropicBlock, path string) (types.ContentBlock, error) {
	switch b.Type {
	case "text":
		return &types.ContentBlockMemberText{Value: b.Text}, nil
	case "image":
		return converseImage(b.Source, path)
	case "tool_use":
		input, err := jsonDocument(b.Input)
		if err != nil {
			return nil, openai.BadRequest(path+".tool_calls", "%s.tool_calls: arguments must be a JSON object", path)
		}
		return &types.ContentBlockMemberToolUse{Value: types.ToolUseBlock{ToolUseId: new(b.ID), Name: new(b.Name), Input: input}}, nil
	case "tool_result":
		return &types.ContentBlockMemberToolResult{Value: types.ToolResultBlock{ToolUseId: new(b.ToolUseID),
			Content: []types.ToolResultContentBlock{&types.ToolResultContentBlockMemberText{Value: contentText(b.Content)}}}}, nil
	}
	return nil, unsupported(path+".content", "content of type %q cannot be sent to a model served by Bedrock's Converse API", b.Type)
}

// converseImage is an image as Converse takes it: its bytes, in one of
// the formats it names. An image by URL is refused: Converse reads only
// bytes sent with the request, or S3.
func converseImage(src *AnthropicSource, path string) (types.ContentBlock, error) {
	param := path + ".content.image_url.url"
	if src == nil || src.Type != "base64" {
		return nil, unsupported(param, "images must be sent as data: URLs (base64) to a model served by Bedrock's Converse API")
	}
	format, ok := strings.CutPrefix(src.MediaType, "image/")
	switch types.ImageFormat(format) {
	case types.ImageFormatPng, types.ImageFormatJpeg, types.ImageFormatGif, types.ImageFormatWebp:
	default:
		ok = false
	}
	if !ok {
		return nil, unsupported(param, "images must be PNG, JPEG, GIF or WebP for a model served by Bedrock's Converse API, got %q", src.MediaType)
	}
	data, err := base64.StdEncoding.DecodeString(src.Data)
	if err != nil {
		return nil, openai.BadRequest(param, "%s: the image's base64 data does not decode", param)
	}
	return &types.ContentBlockMemberImage{Value: types.ImageBlock{Format: types.ImageFormat(format), Source: &types.ImageSourceMemberBytes{Value: data}}}, nil
}

// converseTools is a Messages API request's tools and tool choice as
// Converse's tool configuration: nil without tools. Converse has no
// choice of none, and no switch for parallel calls, which is dropped.
func converseTools(tools []AnthropicTool, choice *AnthropicToolChoice) (*types.ToolConfiguration, error) {
	if len(tools) == 0 {
		return nil, nil
	}
	tc := &types.ToolConfiguration{}
	for i, t := range tools {
		schema := t.InputSchema
		if isNull(schema) {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		doc, err := jsonDocument(schema)
		if err != nil {
			return nil, openai.BadRequest(at("tools", i)+".function.parameters", "%s.function.parameters: must be a JSON Schema object", at("tools", i))
		}
		spec := types.ToolSpecification{Name: new(t.Name), InputSchema: &types.ToolInputSchemaMemberJson{Value: doc}}
		if t.Description != "" {
			spec.Description = new(t.Description)
		}
		tc.Tools = append(tc.Tools, &types.ToolMemberToolSpec{Value: spec})
	}
	if choice != nil {
		switch choice.Type {
		case "auto":
			tc.ToolChoice = &types.ToolChoiceMemberAuto{}
		case "any":
			tc.ToolChoice = &types.ToolChoiceMemberAny{}
		case "tool":
			tc.ToolChoice = &types.ToolChoiceMemberTool{Value: types.SpecificToolChoice{Name: new(choice.Name)}}
		case "none":
			return nil, unsupported("tool_choice", "tool_choice none cannot be sent to a model served by Bedrock's Converse API; leave the tools out instead")
		}
	}
	return tc, nil
}

// converseOutput is chat's response_format as Converse's output
// configuration: a JSON schema as its jsonSchema text format; text as
// none. Converse has no JSON mode without a schema.
func converseOutput(raw json.RawMessage) (*types.OutputConfig, error) {
	if isNull(raw) {
		return nil, nil
	}
	var f struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Schema      json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, openai.BadRequest("response_format", "response_format: must be an object with a type")
	}
	switch f.Type {
	case "text":
		return nil, nil
	case "json_schema":
		if f.JSONSchema == nil || isNull(f.JSONSchema.Schema) {
			return nil, openai.BadRequest("response_format.json_schema.schema", "response_format.json_schema.schema: must be a JSON Schema object")
		}
		def := types.JsonSchemaDefinition{Schema: new(string(compact(f.JSONSchema.Schema)))}
		if f.JSONSchema.Name != "" {
			def.Name = new(f.JSONSchema.Name)
		}
		if f.JSONSchema.Description != "" {
			def.Description = new(f.JSONSchema.Description)
		}
		return &types.OutputConfig{TextFormat: &types.OutputFormat{Type: types.OutputFormatTypeJsonSchema,
			Structure: &types.OutputFormatStructureMemberJsonSchema{Value: def}}}, nil
	}
	return nil, unsupported("response_format.type", "response_format of type %q cannot be sent to a model served by Bedrock's Converse API; give a json_schema", f.Type)
}

// jsonDocument is a JSON object as a document the SDK serializes.
func jsonDocument(raw json.RawMessage) (document.Interface, error) {
	var v map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil || v == nil {
		return nil, fmt.Errorf("not a JSON object")
	}
	return document.NewLazyDocument(v), nil
}
