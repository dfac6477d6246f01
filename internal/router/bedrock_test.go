package router

import (
	"bytes"
	"encoding/json"
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

// TestBedrockStreamException: an exception mid-stream ends the client's
// stream with an error event and no [DONE], and counts as the stream's
// error.
func TestBedrockStreamException(t *testing.T) {
	up := &cloudtest.Bedrock{T: t, ThrottleMidStream: true}
	g := newBedrockGateway(t, up)
	resp, body := g.post(t, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 200 || !strings.Contains(body, `"content":"Hello"`) || !strings.Contains(body, "Too many tokens") || strings.Contains(body, "[DONE]") {
		t.Errorf("%d %s", resp.StatusCode, body)
	}
}

func newBedrockGateway(t *testing.T, up *cloudtest.Bedrock) *testGateway {
	cloudtest.AWSEnv(t)
	up.Region, up.Bodies, up.Paths = "eu-west-3", make(chan []byte, 10), make(chan string, 10)
	return newTestGateway(t, func(c *config.Config) {
		c.Pools[0].Kind, c.Pools[0].Region = catalog.KindBedrock, "eu-west-3"
		c.Models[0].Upstream = "eu.anthropic.claude-sonnet-4-v1:0"
		c.Server.MaxBodyBytes = 1 << 20
	}, up)
}

// TestBedrockPoolWithOfficialClients serves the official OpenAI SDK's
// chat completions, whole and streamed with a tool call, its streamed
// Responses, and the official Anthropic SDK's Messages from a pool of
// kind bedrock, every call signed as the SDK's signer expects.
func TestBedrockPoolWithOfficialClients(t *testing.T) {
	up := &cloudtest.Bedrock{T: t}
	g := newBedrockGateway(t, up)
	client := openai.NewClient(option.WithBaseURL(g.url+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx := t.Context()
	ask := openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("Hello")},
		Temperature: openai.Float(0.5), Stop: openai.ChatCompletionNewParamsStopUnion{OfStringArray: []string{"END"}}, MaxTokens: openai.Int(50)}

	c, err := client.Chat.Completions.New(ctx, ask)
	if err != nil {
		t.Fatal(err)
	}
	if c.Choices[0].Message.Content != "Hi from Bedrock." || c.Choices[0].FinishReason != "stop" || c.Usage.PromptTokens != 21 ||
		c.Usage.CompletionTokens != 4 || c.Usage.PromptTokensDetails.CachedTokens != 7 || c.Model != "m" {
		t.Errorf("%s", c.RawJSON())
	}
	sent, path := <-up.Bodies, <-up.Paths
	want := `{"inferenceConfig":{"maxTokens":50,"stopSequences":["END"],"temperature":0.5},"messages":[{"content":[{"text":"Hello"}],"role":"user"}],"system":[{"text":"Be brief."}]}`
	if !jsonEqual(t, sent, want) {
		t.Errorf("the Converse request\n%s\nwant\n%s", sent, want)
	}
	if path != "/v1/model/eu.anthropic.claude-sonnet-4-v1%3A0/converse" {
		t.Errorf("called %s", path)
	}

	withTool := ask
	withTool.Tools = []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "get_weather",
		Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}})}
	m := streamedChoice(t, ctx, client, withTool)
	if m.Message.Content != "Hello from Bedrock." || m.FinishReason != "tool_calls" || len(m.Message.ToolCalls) != 1 ||
		m.Message.ToolCalls[0].Function.Arguments != `{"city":"Paris"}` || m.Message.ToolCalls[0].ID != "tooluse_1" {
		t.Errorf("accumulated %+v", m)
	}
	sent, path = <-up.Bodies, <-up.Paths
	if !strings.HasSuffix(path, "/converse-stream") || !strings.Contains(string(sent), `"toolSpec":{"inputSchema":{"json":{"properties":{"city":{"type":"string"}},"type":"object"}},"name":"get_weather"}`) {
		t.Errorf("the ConverseStream request to %s: %s", path, sent)
	}

	rs := client.Responses.NewStreaming(ctx, responsesParams("Hello"))
	var text string
	for rs.Next() {
		if ev := rs.Current(); ev.Type == "response.completed" {
			text = ev.Response.OutputText()
			if ev.Response.Usage.InputTokens != 11 || ev.Response.Usage.OutputTokens != 3 {
				t.Errorf("usage %s", ev.Response.Usage.RawJSON())
			}
		}
	}
	if rs.Err() != nil || text != "Hello from Bedrock." {
		t.Errorf("text %q, err %v", text, rs.Err())
	}
	<-up.Bodies
	<-up.Paths

	ac := anthropic.NewClient(anthropicoption.WithBaseURL(g.url), anthropicoption.WithAPIKey("unused"), anthropicoption.WithMaxRetries(0))
	stream := ac.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "m", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hello"))}})
	var msg anthropic.Message
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 1 || msg.Content[0].Text != "Hello from Bedrock." || msg.StopReason != "end_turn" || msg.Usage.OutputTokens != 3 {
		t.Errorf("the Anthropic client read %+v", msg)
	}
}

// TestBedrockPoolErrors maps Bedrock's errors: a refused signature or
// credentials is llmgw's 502, never the tenant's 401 or 403; throttling
// is a 429 the pool is at capacity for; a prompt past the context window
// is context_length_exceeded; what Converse cannot take is a 400 naming
// the field, before any call.
func TestBedrockPoolErrors(t *testing.T) {
	for _, c := range []struct {
		status       int
		msg, body    string
		want         int
		wantIn       string
		wantUpstream bool
	}{
		{403, "The security token included in the request is invalid.", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, 502, "refused the gateway's credentials", true},
		{429, "Too many requests, please wait before trying again.", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, 429, "capacity", true},
		{400, "Input is too long for requested model.", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, 400, `"code":"context_length_exceeded"`, true},
		{0, "", `{"model":"m","messages":[{"role":"user","content":"hi"}],"top_k":3}`, 400, `"param":"top_k"`, false},
		{0, "", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]}]}`, 400, `image_url.url`, false},
		{0, "", `{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_object"}}`, 400, `"param":"response_format.type"`, false},
	} {
		up := &cloudtest.Bedrock{T: t, Status: c.status, ErrMsg: c.msg}
		g := newBedrockGateway(t, up)
		resp, body := g.post(t, "/v1/chat/completions", c.body)
		if resp.StatusCode != c.want || !strings.Contains(body, c.wantIn) {
			t.Errorf("upstream %d %q: answered %d %s; want %d with %s", c.status, c.msg, resp.StatusCode, body, c.want, c.wantIn)
		}
		if called := len(up.Bodies) > 0; called != c.wantUpstream {
			t.Errorf("upstream %d %q: called %v", c.status, c.msg, called)
		}
	}
}

// TestBedrockPoolBadSignature: a gateway whose credentials are not the
// ones the endpoint knows gets 403s, which reach the client as a 502.
func TestBedrockPoolBadSignature(t *testing.T) {
	up := &cloudtest.Bedrock{T: t}
	g := newBedrockGateway(t, up)
	up.Region = "us-east-1" // the endpoint checks for another region: every signature is wrong
	resp, body := g.post(t, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 502 || strings.Contains(body, cloudtest.AccessKey) || strings.Contains(body, "signature") {
		t.Errorf("%d %s", resp.StatusCode, body)
	}
}

func jsonEqual(t *testing.T, got []byte, want string) bool {
	t.Helper()
	var a, b any
	if err := json.Unmarshal(got, &a); err != nil {
		t.Fatalf("%v: %s", err, got)
	}
	json.Unmarshal([]byte(want), &b)
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}
