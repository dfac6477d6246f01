package translate

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/document"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/google/go-cmp/cmp"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// sdkBody is the body the AWS SDK's own client sends for in.
func sdkBody(t *testing.T, in *bedrockruntime.ConverseInput) []byte {
	t.Helper()
	got := make(chan []byte, 1)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- b
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"output":{"message":{"role":"assistant","content":[{"text":"x"}]}},"stopReason":"end_turn","usage":{"inputTokens":1,"outputTokens":1,"totalTokens":2},"metrics":{"latencyMs":1}}`)
	}))
	defer s.Close()
	c := bedrockruntime.New(bedrockruntime.Options{Region: "us-east-1", BaseEndpoint: aws.String(s.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", "")})
	if _, err := c.Converse(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	return <-got
}

func jsonOf(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return v
}

// TestChatToConverseIsTheSDKsRequest: a chat request with a system
// prompt, an image, a tool call and its result, tools, a forced tool, a
// response schema, sampling, stop sequences and max tokens is the body
// the SDK's own client sends for the Converse request that asks the same.
func TestChatToConverseIsTheSDKsRequest(t *testing.T) {
	chat := `{"model":"us.anthropic.claude-sonnet-4-v1:0","temperature":0.25,"top_p":0.5,"stop":["END"],"max_tokens":7,
	"tool_choice":"required","response_format":{"type":"json_schema","json_schema":{"name":"w","schema":{"type":"object"}}},
	"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather.","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],
	"messages":[{"role":"system","content":"Be brief."},
	{"role":"user","content":[{"type":"text","text":"What is this?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]},
	{"role":"assistant","content":null,"tool_calls":[{"id":"t1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
	{"role":"tool","tool_call_id":"t1","content":"sunny"}]}`
	body, err := ChatToBedrockBody(context.Background(), []byte(chat), 99, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	in := &bedrockruntime.ConverseInput{
		ModelId: aws.String("us.anthropic.claude-sonnet-4-v1:0"),
		System:  []types.SystemContentBlock{&types.SystemContentBlockMemberText{Value: "Be brief."}},
		InferenceConfig: &types.InferenceConfiguration{MaxTokens: aws.Int32(99), Temperature: aws.Float32(0.25), TopP: aws.Float32(0.5),
			StopSequences: []string{"END"}},
		Messages: []types.Message{
			{Role: types.ConversationRoleUser, Content: []types.ContentBlock{&types.ContentBlockMemberText{Value: "What is this?"},
				&types.ContentBlockMemberImage{Value: types.ImageBlock{Format: types.ImageFormatPng,
					Source: &types.ImageSourceMemberBytes{Value: []byte("\x89PNG\r\n\x1a\n")}}}}},
			{Role: types.ConversationRoleAssistant, Content: []types.ContentBlock{&types.ContentBlockMemberToolUse{Value: types.ToolUseBlock{
				ToolUseId: aws.String("t1"), Name: aws.String("get_weather"), Input: document.NewLazyDocument(map[string]any{"city": "Paris"})}}}},
			{Role: types.ConversationRoleUser, Content: []types.ContentBlock{&types.ContentBlockMemberToolResult{Value: types.ToolResultBlock{
				ToolUseId: aws.String("t1"), Content: []types.ToolResultContentBlock{&types.ToolResultContentBlockMemberText{Value: "sunny"}}}}}},
		},
		ToolConfig: &types.ToolConfiguration{ToolChoice: &types.ToolChoiceMemberAny{}, Tools: []types.Tool{&types.ToolMemberToolSpec{Value: types.ToolSpecification{
			Name: aws.String("get_weather"), Description: aws.String("Weather."),
			InputSchema: &types.ToolInputSchemaMemberJson{Value: document.NewLazyDocument(map[string]any{"type": "object",
				"properties": map[string]any{"city": map[string]any{"type": "string"}}})}}}}},
		OutputConfig: &types.OutputConfig{TextFormat: &types.OutputFormat{Type: types.OutputFormatTypeJsonSchema,
			Structure: &types.OutputFormatStructureMemberJsonSchema{Value: types.JsonSchemaDefinition{Name: aws.String("w"), Schema: aws.String(`{"type":"object"}`)}}}},
	}
	if diff := cmp.Diff(jsonOf(t, sdkBody(t, in)), jsonOf(t, body)); diff != "" {
		t.Errorf("the Converse body (-SDK's +llmgw's):\n%s", diff)
	}
}

// TestConverseRefuses names the field Converse cannot take.
func TestConverseRefuses(t *testing.T) {
	for chat, param := range map[string]string{
		`{"messages":[{"role":"user","content":"x"}],"top_k":2}`:                                                                  "top_k",
		`{"messages":[{"role":"user","content":"x"}],"tool_choice":"none","tools":[{"type":"function","function":{"name":"f"}}]}`: "tool_choice",
		`{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}}`:                                   "response_format.type",
		`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/a.png"}}]}]}`:                   "messages[0].content.image_url.url",
		`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/tiff;base64,AA=="}}]}]}`:       "messages[0].content.image_url.url",
	} {
		_, err := ChatToBedrockBody(context.Background(), []byte(chat), 10, 1<<20)
		if err == nil || !strings.Contains(string(errorBody(err)), `"param":"`+param+`"`) {
			t.Errorf("%s: %v, want a 400 naming %s", chat, err, param)
		}
	}
}

// TestConverseAnswerAsChat reads a whole answer with text, reasoning and
// a tool use, and an error body about the context window.
func TestConverseAnswerAsChat(t *testing.T) {
	answer := `{"output":{"message":{"role":"assistant","content":[{"reasoningContent":{"reasoningText":{"text":"hmm"}}},{"text":"Let me look."},
	{"toolUse":{"toolUseId":"t9","name":"get_weather","input":{"city":"Paris"}}}]}},"stopReason":"tool_use",
	"usage":{"inputTokens":5,"outputTokens":6,"totalTokens":11,"cacheWriteInputTokens":4},"metrics":{"latencyMs":3}}`
	chat, err := BedrockUpstream{}.Answer([]byte(answer))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"","object":"chat.completion","created":0,"model":"","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant",
	"content":"Let me look.","reasoning_content":"hmm","tool_calls":[{"id":"t9","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]}}],
	"usage":{"prompt_tokens":9,"completion_tokens":6,"total_tokens":15}}`
	if diff := cmp.Diff(jsonOf(t, []byte(want)), jsonOf(t, chat)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	e := BedrockUpstream{}.Error(400, []byte(`{"message":"Input is too long for requested model."}`))
	if !bytes.Contains(e, []byte(`"code":"context_length_exceeded"`)) {
		t.Errorf("%s", e)
	}
}

func errorBody(err error) []byte { return openai.AsError(err).Body() }
