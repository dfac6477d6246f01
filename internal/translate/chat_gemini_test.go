package translate

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genai"
)

// genaiBody is the body and path the genai SDK's own client sends to the
// Gemini API for contents and config.
func genaiBody(t *testing.T, model string, contents []*genai.Content, config *genai.GenerateContentConfig) ([]byte, string, http.Header) {
	t.Helper()
	type sent struct {
		body   []byte
		path   string
		header http.Header
	}
	got := make(chan sent, 1)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- sent{b, r.URL.Path, r.Header}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"candidates":[{"content":{"role":"model","parts":[{"text":"x"}]},"finishReason":"STOP"}]}`)
	}))
	defer s.Close()
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{APIKey: "k", Backend: genai.BackendGeminiAPI, HTTPOptions: genai.HTTPOptions{BaseURL: s.URL}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Models.GenerateContent(context.Background(), model, contents, config); err != nil {
		t.Fatal(err)
	}
	g := <-got
	return g.body, g.path, g.header
}

// TestChatToGeminiIsTheSDKsRequest: a chat request with a system prompt,
// an image, a tool call and its result, tools, a forced tool, a response
// schema, sampling, stop sequences and max tokens is, to the path, the
// body the genai SDK's own client sends for the same request.
func TestChatToGeminiIsTheSDKsRequest(t *testing.T) {
	chat := `{"model":"gemini-2.5-pro","temperature":0.25,"top_p":0.5,"stop":["END"],
	"tool_choice":{"type":"function","function":{"name":"get_weather"}},"response_format":{"type":"json_schema","json_schema":{"name":"w","schema":{"type":"object"}}},
	"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather.","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],
	"messages":[{"role":"system","content":"Be brief."},
	{"role":"user","content":[{"type":"text","text":"What is this?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]},
	{"role":"assistant","content":null,"tool_calls":[{"id":"t1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
	{"role":"tool","tool_call_id":"t1","content":"sunny"}]}`
	body, err := ChatToGeminiBody(context.Background(), []byte(chat), 99, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	object := map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}
	contents := []*genai.Content{
		{Role: genai.RoleUser, Parts: []*genai.Part{{Text: "What is this?"}, {InlineData: &genai.Blob{MIMEType: "image/png", Data: []byte("\x89PNG\r\n\x1a\n")}}}},
		{Role: genai.RoleModel, Parts: []*genai.Part{{FunctionCall: &genai.FunctionCall{ID: "t1", Name: "get_weather", Args: map[string]any{"city": "Paris"}}}}},
		{Role: genai.RoleUser, Parts: []*genai.Part{{FunctionResponse: &genai.FunctionResponse{ID: "t1", Name: "get_weather", Response: map[string]any{"output": "sunny"}}}}},
	}
	config := &genai.GenerateContentConfig{
		SystemInstruction: &genai.Content{Parts: []*genai.Part{{Text: "Be brief."}}},
		Temperature:       genai.Ptr[float32](0.25), TopP: genai.Ptr[float32](0.5), StopSequences: []string{"END"}, MaxOutputTokens: 99,
		ResponseMIMEType: "application/json", ResponseJsonSchema: map[string]any{"type": "object"},
		Tools: []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{{Name: "get_weather", Description: "Weather.", ParametersJsonSchema: object}}}},
		ToolConfig: &genai.ToolConfig{FunctionCallingConfig: &genai.FunctionCallingConfig{Mode: genai.FunctionCallingConfigModeAny,
			AllowedFunctionNames: []string{"get_weather"}}},
	}
	sdk, path, header := genaiBody(t, "gemini-2.5-pro", contents, config)
	if diff := cmp.Diff(jsonOf(t, sdk), jsonOf(t, body)); diff != "" {
		t.Errorf("the generateContent body (-SDK's +llmgw's):\n%s", diff)
	}
	if want := (GeminiUpstream{}).URL("/v1", "gemini-2.5-pro", false); path != want || header.Get("x-goog-api-key") != "k" {
		t.Errorf("the SDK called %s with %v; llmgw calls %s", path, header, want)
	}
}

// TestGeminiAnswerAsChat reads a whole answer with thoughts, text and a
// function call, a blocked prompt, and an error about the context window.
func TestGeminiAnswerAsChat(t *testing.T) {
	answer := `{"candidates":[{"content":{"role":"model","parts":[{"text":"hmm","thought":true},{"text":"Let me look."},
	{"functionCall":{"name":"get_weather","args":{"city":"Paris"}}}]},"finishReason":"STOP"}],
	"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":6,"thoughtsTokenCount":3,"cachedContentTokenCount":5,"totalTokenCount":18},"modelVersion":"gemini-2.5-pro","responseId":"r1"}`
	chat, err := GeminiUpstream{}.Answer([]byte(answer))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"r1","object":"chat.completion","created":0,"model":"gemini-2.5-pro","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant",
	"content":"Let me look.","reasoning_content":"hmm","tool_calls":[{"id":"call_0","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]}}],
	"usage":{"prompt_tokens":9,"completion_tokens":9,"total_tokens":18,"prompt_tokens_details":{"cached_tokens":5}}}`
	if diff := cmp.Diff(jsonOf(t, []byte(want)), jsonOf(t, chat)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	blocked, err := GeminiUpstream{}.Answer([]byte(`{"promptFeedback":{"blockReason":"SAFETY"}}`))
	if err != nil || !strings.Contains(string(blocked), `"finish_reason":"content_filter"`) {
		t.Errorf("a blocked prompt: %s, %v", blocked, err)
	}
	e := GeminiUpstream{}.Error(400, []byte(`{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}`))
	if !strings.Contains(string(e), `"code":"context_length_exceeded"`) {
		t.Errorf("%s", e)
	}
}
