package router

import (
	"errors"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"gitea.mynodes.xyz/ilker/llmgw/internal/cloudtest"
)

// signedCall is the id the test server's function call (fc_1) reaches a
// chat client with: its thought signature, cloudtest.ThoughtSignature, in
// unpadded URL-safe base64 after __sig_.
const signedCall = "fc_1__sig_-_-_IHRob3VnaHQg_u8"

// TestGeminiThoughtSignatureGoesBack: the thought signature a Gemini or
// Vertex function call comes with reaches a chat client in the tool
// call's id, and goes back with the call on the next turn, as the model
// requires; a call sent back without it is refused by the model.
func TestGeminiThoughtSignatureGoesBack(t *testing.T) {
	for _, vertex := range []bool{false, true} {
		t.Run(map[bool]string{false: "gemini", true: "vertex"}[vertex], func(t *testing.T) {
			up := &cloudtest.Google{T: t, Vertex: vertex}
			g := newGoogleGateway(t, up)
			client := openai.NewClient(option.WithBaseURL(g.url+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
			ctx := t.Context()
			ask := openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Paris?")},
				Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "get_weather",
					Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}})}}
			m := streamedChoice(t, ctx, client, ask)
			<-up.Bodies
			<-up.Paths
			if len(m.Message.ToolCalls) != 1 || m.Message.ToolCalls[0].ID != signedCall {
				t.Fatalf("the tool calls %+v, want one of id %s", m.Message.ToolCalls, signedCall)
			}

			next := ask
			next.Messages = append(next.Messages[:1:1], m.Message.ToParam(), openai.ToolMessage("sunny", signedCall))
			c, err := client.Chat.Completions.New(ctx, next)
			if err != nil {
				t.Fatal(err)
			}
			sent := string(<-up.Bodies)
			<-up.Paths
			if c.Choices[0].Message.Content != "Hi from Gemini." ||
				!strings.Contains(sent, `"functionCall":{"id":"fc_1","args":{"city":"Paris"},"name":"get_weather"},"thoughtSignature":"+/+/IHRob3VnaHQg/u8="`) ||
				!strings.Contains(sent, `"functionResponse":{"id":"fc_1","name":"get_weather"`) {
				t.Errorf("answered %s to a request of\n%s", c.RawJSON(), sent)
			}

			// The call without its signature: the model refuses the turn.
			unsigned := next
			unsigned.Messages = []openai.ChatCompletionMessageParamUnion{next.Messages[0],
				openai.AssistantMessage(""), openai.ToolMessage("sunny", "fc_1")}
			unsigned.Messages[1].OfAssistant.ToolCalls = []openai.ChatCompletionMessageToolCallUnionParam{{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
				ID: "fc_1", Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "get_weather", Arguments: `{"city":"Paris"}`}}}}
			_, err = client.Chat.Completions.New(ctx, unsigned)
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Message, "thought_signature") {
				t.Errorf("a call sent back without its signature: %v, want the model's 400", err)
			}
		})
	}
}
