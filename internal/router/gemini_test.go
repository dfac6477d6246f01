package router

import (
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"gitea.mynodes.xyz/ilker/llmgw/internal/cloudtest"
	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

func newGoogleGateway(t *testing.T, up *cloudtest.Google) *testGateway {
	up.Bodies, up.Paths = make(chan []byte, 10), make(chan string, 10)
	return newTestGateway(t, func(c *config.Config) {
		c.Models[0].Upstream = "gemini-2.5-pro"
		c.Server.MaxBodyBytes = 1 << 20
		if !up.Vertex {
			c.Pools[0].Kind, c.Pools[0].APIKey = catalog.KindGemini, cloudtest.GeminiKey
			return
		}
		base := strings.TrimSuffix(c.Pools[0].Endpoints[0].URL, "/v1")
		c.Pools[0].Kind, c.Pools[0].Project, c.Pools[0].Location = catalog.KindVertex, "proj-1", "us-central1"
		c.Pools[0].CredentialsFile = cloudtest.ServiceAccountFile(t, base+"/token")
	}, up)
}

// TestGooglePoolsWithOfficialClients serves the official OpenAI SDK's
// chat completions, whole and streamed with a tool call, its streamed
// Responses and the official Anthropic SDK's Messages from a pool of kind
// gemini (its key as x-goog-api-key) and one of kind vertex (a bearer
// token from a service account's key, fetched once and cached).
func TestGooglePoolsWithOfficialClients(t *testing.T) {
	for _, vertex := range []bool{false, true} {
		t.Run(map[bool]string{false: "gemini", true: "vertex"}[vertex], func(t *testing.T) {
			up := &cloudtest.Google{T: t, Vertex: vertex}
			g := newGoogleGateway(t, up)
			client := openai.NewClient(option.WithBaseURL(g.url+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
			ctx := t.Context()
			ask := openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("Hello")},
				TopP: openai.Float(0.5), MaxTokens: openai.Int(40)}
			c, err := client.Chat.Completions.New(ctx, ask)
			if err != nil {
				t.Fatal(err)
			}
			if c.Choices[0].Message.Content != "Hi from Gemini." || c.Choices[0].FinishReason != "stop" || c.Usage.PromptTokens != 12 ||
				c.Usage.CompletionTokens != 7 || c.Usage.PromptTokensDetails.CachedTokens != 4 || c.Model != "m" {
				t.Errorf("%s", c.RawJSON())
			}
			sent, path := <-up.Bodies, <-up.Paths
			want := `{"contents":[{"parts":[{"text":"Hello"}],"role":"user"}],"systemInstruction":{"parts":[{"text":"Be brief."}],"role":"user"},"generationConfig":{"maxOutputTokens":40,"topP":0.5}}`
			if !jsonEqual(t, sent, want) {
				t.Errorf("the generateContent request\n%s\nwant\n%s", sent, want)
			}
			wantPath := "/v1/models/gemini-2.5-pro:generateContent"
			if vertex {
				wantPath = "/v1/projects/proj-1/locations/us-central1/publishers/google/models/gemini-2.5-pro:generateContent"
			}
			if path != wantPath {
				t.Errorf("called %s, want %s", path, wantPath)
			}

			withTool := ask
			withTool.Tools = []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "get_weather",
				Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}})}
			m := streamedChoice(t, ctx, client, withTool)
			if m.Message.Content != "Hello from Gemini." || m.FinishReason != "tool_calls" || len(m.Message.ToolCalls) != 1 ||
				m.Message.ToolCalls[0].Function.Arguments != `{"city":"Paris"}` || m.Message.ToolCalls[0].ID != signedCall {
				t.Errorf("accumulated %+v", m)
			}
			sent, path = <-up.Bodies, <-up.Paths
			if !strings.HasSuffix(path, ":streamGenerateContent?alt=sse") ||
				!strings.Contains(string(sent), `"functionDeclarations":[{"name":"get_weather","parametersJsonSchema":{"properties":{"city":{"type":"string"}},"type":"object"}}]`) {
				t.Errorf("the stream's request to %s: %s", path, sent)
			}

			rs := client.Responses.NewStreaming(ctx, responsesParams("Hello"))
			var text string
			for rs.Next() {
				if ev := rs.Current(); ev.Type == "response.completed" {
					text = ev.Response.OutputText()
				}
			}
			if rs.Err() != nil || text != "Hello from Gemini." {
				t.Errorf("text %q, err %v", text, rs.Err())
			}
			<-up.Bodies
			<-up.Paths

			ac := anthropic.NewClient(anthropicoption.WithBaseURL(g.url), anthropicoption.WithAPIKey("unused"), anthropicoption.WithMaxRetries(0))
			msg, err := ac.Messages.New(ctx, anthropic.MessageNewParams{Model: "m", MaxTokens: 64,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hello"))}})
			if err != nil {
				t.Fatal(err)
			}
			if len(msg.Content) != 1 || msg.Content[0].Text != "Hi from Gemini." || msg.StopReason != "end_turn" || msg.Usage.OutputTokens != 7 {
				t.Errorf("the Anthropic client read %+v", msg)
			}
			if vertex && up.Tokens.Load() != 1 {
				t.Errorf("%d tokens fetched for four calls, want 1", up.Tokens.Load())
			}
		})
	}
}

// TestGooglePoolErrors: refused credentials are llmgw's 502, a prompt
// past the context window context_length_exceeded, a 429 the pool's
// capacity.
func TestGooglePoolErrors(t *testing.T) {
	for _, c := range []struct {
		vertex  bool
		key     string
		status  int
		message string
		want    int
		wantIn  string
	}{
		{false, "wrong-key", 0, "", 502, "refused the gateway's credentials"},
		{false, cloudtest.GeminiKey, 400, "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).", 400, `"code":"context_length_exceeded"`},
		{true, "", 429, "Resource exhausted.", 429, "capacity"},
	} {
		up := &cloudtest.Google{T: t, Vertex: c.vertex, Status: c.status, Message: c.message}
		g := newGoogleGateway(t, up)
		if !c.vertex {
			g = newTestGateway(t, func(cfg *config.Config) {
				cfg.Pools[0].Kind, cfg.Pools[0].APIKey = catalog.KindGemini, c.key
				cfg.Models[0].Upstream = "gemini-2.5-pro"
			}, up)
		}
		resp, body := g.post(t, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
		if resp.StatusCode != c.want || !strings.Contains(body, c.wantIn) || strings.Contains(body, cloudtest.GoogleToken) || strings.Contains(body, cloudtest.GeminiKey) {
			t.Errorf("%+v: answered %d %s", c, resp.StatusCode, body)
		}
	}
}
