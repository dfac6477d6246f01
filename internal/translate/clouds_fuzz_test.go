package translate

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/aws/smithy-go/transport/http/protocol/restjson1"
	"google.golang.org/genai"
)

// FuzzBedrockTranslation translates chat requests to Converse and
// Converse answers to chat, for panics and fields lost: a request's every
// user and system text is in the Converse body the SDK's protocol wrote,
// and an answer's every text block, as the SDK's protocol reads it, is in
// the chat answer, with its tool uses and stop reason.
func FuzzBedrockTranslation(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]}`),
		[]byte(`{"output":{"message":{"role":"assistant","content":[{"text":"a"},{"toolUse":{"toolUseId":"t","name":"f","input":{"x":1}}}]}},"stopReason":"tool_use","usage":{"inputTokens":1,"outputTokens":2,"totalTokens":3}}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"\u00e9"},{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,AAAA"}}]},{"role":"tool","tool_call_id":"x","content":"r"}]}`),
		[]byte(`{"output":{"message":{"role":"assistant","content":[{"text":"\u2028"},{"reasoningContent":{"reasoningText":{"text":"r"}}}]}},"stopReason":"max_tokens"}`))
	f.Fuzz(func(t *testing.T, chat, answer []byte) {
		if body, err := ChatToBedrockBody(context.Background(), chat, 16, 1<<20); err == nil {
			checkConverseKeeps(t, chat, body)
		}
		out, err := BedrockUpstream{}.Answer(answer)
		if err != nil {
			return
		}
		var sdk bedrockruntime.ConverseOutput
		resp := &smithyhttp.Response{Response: &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(answer))}}
		if err := restjson1.New(nil).DeserializeResponse(context.Background(), converseOp, bedrockruntime.TypeRegistry, resp, &sdk); err != nil {
			t.Fatalf("Answer read what the SDK does not: %v", err)
		}
		var c struct {
			Choices []struct {
				FinishReason string `json:"finish_reason"`
				Message      struct {
					Content   *string           `json:"content"`
					ToolCalls []json.RawMessage `json:"tool_calls"`
				} `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(out, &c); err != nil || len(c.Choices) != 1 {
			t.Fatalf("the chat answer %s: %v", out, err)
		}
		var text strings.Builder
		tools := 0
		for _, b := range sdk.Output.(*types.ConverseOutputMemberMessage).Value.Content {
			switch b := b.(type) {
			case *types.ContentBlockMemberText:
				text.WriteString(b.Value)
			case *types.ContentBlockMemberToolUse:
				tools++
			}
		}
		got := ""
		if c.Choices[0].Message.Content != nil {
			got = *c.Choices[0].Message.Content
		}
		if got != text.String() || len(c.Choices[0].Message.ToolCalls) != tools || c.Choices[0].FinishReason != bedrockFinish(sdk.StopReason) {
			t.Fatalf("the answer %s read as %s", answer, out)
		}
	})
}

// checkConverseKeeps fails t when a user or system message's text of
// chat is not a text of the Converse body.
func checkConverseKeeps(t *testing.T, chat, body []byte) {
	t.Helper()
	var req ChatRequest
	if json.Unmarshal(chat, &req) != nil {
		return
	}
	var texts []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && k == "text" {
					texts = append(texts, s)
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	var converse any
	if err := json.Unmarshal(body, &converse); err != nil {
		t.Fatalf("the Converse body %s: %v", body, err)
	}
	walk(converse)
	for _, m := range req.Messages {
		if (m.Role != "user" && m.Role != "system") || !isString(m.Content) {
			continue
		}
		want := contentText(m.Content)
		found := false
		for _, s := range texts {
			found = found || s == want
		}
		if !found {
			t.Fatalf("%s's text %q is not in the Converse body %s", m.Role, want, body)
		}
	}
}

// FuzzGeminiTranslation translates chat requests to generateContent and
// its answers to chat, for panics and fields lost: a request's every user
// and system text is in the body, which the genai SDK's types read with
// no member unknown, and an answer's every text part, as the SDK's
// GenerateContentResponse reads it, is in the chat answer, with its
// function calls.
func FuzzGeminiTranslation(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"response_format":{"type":"json_object"}}`),
		[]byte(`{"candidates":[{"content":{"role":"model","parts":[{"text":"a"},{"functionCall":{"name":"f","args":{"x":1}}}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":1}}`))
	f.Add([]byte(`{"messages":[{"role":"assistant","tool_calls":[{"id":"x","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"x","content":"r"},{"role":"user","content":"\u00e9"}]}`),
		[]byte(`{"candidates":[{"content":{"parts":[{"text":"t","thought":true},{"text":"\u2028"}]},"finishReason":"MAX_TOKENS"}]}`))
	f.Fuzz(func(t *testing.T, chat, answer []byte) {
		if body, err := ChatToGeminiBody(context.Background(), chat, 16, 1<<20); err == nil {
			dec := json.NewDecoder(bytes.NewReader(body))
			dec.DisallowUnknownFields()
			var r GeminiRequest
			if err := dec.Decode(&r); err != nil {
				t.Fatalf("the body %s does not read as the SDK's types: %v", body, err)
			}
			checkConverseKeeps(t, chat, body)
		}
		out, err := GeminiUpstream{}.Answer(answer)
		if err != nil {
			return
		}
		var sdk genai.GenerateContentResponse
		if err := json.Unmarshal(answer, &sdk); err != nil {
			t.Fatalf("Answer read what the SDK does not: %v", err)
		}
		var c struct {
			Choices []struct {
				Message struct {
					Content   *string           `json:"content"`
					ToolCalls []json.RawMessage `json:"tool_calls"`
				} `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(out, &c); err != nil || len(c.Choices) != 1 {
			t.Fatalf("the chat answer %s: %v", out, err)
		}
		var text strings.Builder
		calls := 0
		if len(sdk.Candidates) > 0 && sdk.Candidates[0] != nil && sdk.Candidates[0].Content != nil {
			for _, p := range sdk.Candidates[0].Content.Parts {
				switch {
				case p == nil:
				case p.FunctionCall != nil:
					calls++
				case !p.Thought:
					text.WriteString(p.Text)
				}
			}
		}
		got := ""
		if c.Choices[0].Message.Content != nil {
			got = *c.Choices[0].Message.Content
		}
		if got != text.String() || len(c.Choices[0].Message.ToolCalls) != calls {
			t.Fatalf("the answer %s read as %s", answer, out)
		}
	})
}
