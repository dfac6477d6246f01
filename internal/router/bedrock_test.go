package router

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/schemas"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/eventstream"
	"github.com/aws/smithy-go/transport/http/protocol/restjson1"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

// The test's AWS credentials, found by the default chain in the
// environment.
const (
	testAccessKey    = "AKIDLLMGWTEST"
	testSecretKey    = "llmgw/test/secret"
	testSessionToken = "llmgw-session-token"
)

// awsTestEnv points AWS's default chain at the test's credentials alone:
// no shared files, no instance metadata.
func awsTestEnv(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", testAccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", testSecretKey)
	t.Setenv("AWS_SESSION_TOKEN", testSessionToken)
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_PROFILE", "")
}

// bedrockWire is a Bedrock runtime endpoint: it verifies every request's
// SigV4 signature by signing it again with the SDK's own signer, reads
// the Converse request, and answers Converse with JSON and
// ConverseStream with event-stream messages the SDK's own protocol
// encodes. Each request's body goes to bodies.
type bedrockWire struct {
	t      *testing.T
	region string
	bodies chan []byte
	paths  chan string
	status int    // when not zero, every call is refused with it
	errMsg string // and this message
	// throttleMidStream ends a stream after its first text with a
	// throttlingException message.
	throttleMidStream bool
}

// converseRequest is what the test reads of a Converse request: unknown
// members are an error.
type converseRequest struct {
	Messages []struct {
		Role    string            `json:"role"`
		Content []json.RawMessage `json:"content"`
	} `json:"messages"`
	System          []map[string]string `json:"system"`
	InferenceConfig struct {
		MaxTokens     *int     `json:"maxTokens"`
		Temperature   *float64 `json:"temperature"`
		TopP          *float64 `json:"topP"`
		StopSequences []string `json:"stopSequences"`
	} `json:"inferenceConfig"`
	ToolConfig   json.RawMessage `json:"toolConfig"`
	OutputConfig json.RawMessage `json:"outputConfig"`
}

func (b *bedrockWire) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	b.bodies <- body
	b.paths <- r.URL.EscapedPath()
	if err := b.verify(r, body); err != "" {
		w.Header().Set("X-Amzn-ErrorType", "InvalidSignatureException")
		w.WriteHeader(403)
		io.WriteString(w, `{"message":"`+err+`"}`)
		return
	}
	if b.status != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(b.status)
		io.WriteString(w, `{"message":"`+b.errMsg+`"}`)
		return
	}
	var req converseRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || req.InferenceConfig.MaxTokens == nil || len(req.Messages) == 0 {
		w.WriteHeader(400)
		io.WriteString(w, `{"message":"1 validation error detected"}`)
		return
	}
	if strings.HasSuffix(r.URL.Path, "/converse-stream") {
		b.stream(w, len(req.ToolConfig) > 0)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"output":{"message":{"role":"assistant","content":[{"text":"Hi from Bedrock."}]}},"stopReason":"end_turn",`+
		`"usage":{"inputTokens":11,"outputTokens":4,"totalTokens":25,"cacheReadInputTokens":7,"cacheWriteInputTokens":3},"metrics":{"latencyMs":120}}`)
}

// verify is why r's signature is wrong: empty when signing it again with
// the test's credentials gives the same Authorization.
func (b *bedrockWire) verify(r *http.Request, body []byte) string {
	auth := r.Header.Get("Authorization")
	_, signed, ok := strings.Cut(auth, "SignedHeaders=")
	if !ok {
		return "no signature"
	}
	signed, _, _ = strings.Cut(signed, ",")
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return "no X-Amz-Date"
	}
	again, _ := http.NewRequest(r.Method, "http://"+r.Host+r.URL.EscapedPath(), bytes.NewReader(body))
	for _, h := range strings.Split(signed, ";") {
		if h != "host" && h != "x-amz-date" && h != "x-amz-security-token" {
			again.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
		}
	}
	sum := sha256.Sum256(body)
	creds := aws.Credentials{AccessKeyID: testAccessKey, SecretAccessKey: testSecretKey, SessionToken: testSessionToken}
	if err := v4.NewSigner().SignHTTP(r.Context(), creds, again, hex.EncodeToString(sum[:]), "bedrock", b.region, at); err != nil {
		return err.Error()
	}
	if again.Header.Get("Authorization") != auth || r.Header.Get("X-Amz-Security-Token") != testSessionToken {
		return "The request signature we calculated does not match the signature you provided."
	}
	return ""
}

// stream answers ConverseStream: text, or text and a tool use.
func (b *bedrockWire) stream(w http.ResponseWriter, tools bool) {
	w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
	proto := restjson1.New(nil)
	send := func(variant *smithy.Schema, v smithy.Serializable) {
		var buf bytes.Buffer
		if err := proto.SerializeEventMessage(schemas.ConverseStreamOutput, variant, v, &buf); err != nil {
			b.t.Error(err)
		}
		w.Write(buf.Bytes())
		w.(http.Flusher).Flush()
	}
	i32 := func(n int32) *int32 { return &n }
	send(schemas.ConverseStreamOutput_messageStart, &types.MessageStartEvent{Role: types.ConversationRoleAssistant})
	for _, piece := range []string{"Hello", " from", " Bedrock."} {
		send(schemas.ConverseStreamOutput_contentBlockDelta, &types.ContentBlockDeltaEvent{ContentBlockIndex: i32(0), Delta: &types.ContentBlockDeltaMemberText{Value: piece}})
		if b.throttleMidStream {
			var msg eventstream.Message
			msg.Headers.Set(eventstream.MessageTypeHeader, eventstream.StringValue(eventstream.ExceptionMessageType))
			msg.Headers.Set(eventstream.ExceptionTypeHeader, eventstream.StringValue("throttlingException"))
			msg.Headers.Set(eventstream.ContentTypeHeader, eventstream.StringValue("application/json"))
			msg.Payload = []byte(`{"message":"Too many tokens, please wait before trying again."}`)
			eventstream.NewEncoder().Encode(w, msg)
			return
		}
	}
	send(schemas.ConverseStreamOutput_contentBlockStop, &types.ContentBlockStopEvent{ContentBlockIndex: i32(0)})
	stop := types.StopReasonEndTurn
	if tools {
		send(schemas.ConverseStreamOutput_contentBlockStart, &types.ContentBlockStartEvent{ContentBlockIndex: i32(1),
			Start: &types.ContentBlockStartMemberToolUse{Value: types.ToolUseBlockStart{ToolUseId: aws.String("tooluse_1"), Name: aws.String("get_weather")}}})
		for _, piece := range []string{`{"city":`, `"Paris"}`} {
			send(schemas.ConverseStreamOutput_contentBlockDelta, &types.ContentBlockDeltaEvent{ContentBlockIndex: i32(1),
				Delta: &types.ContentBlockDeltaMemberToolUse{Value: types.ToolUseBlockDelta{Input: aws.String(piece)}}})
		}
		send(schemas.ConverseStreamOutput_contentBlockStop, &types.ContentBlockStopEvent{ContentBlockIndex: i32(1)})
		stop = types.StopReasonToolUse
	}
	send(schemas.ConverseStreamOutput_messageStop, &types.MessageStopEvent{StopReason: stop})
	send(schemas.ConverseStreamOutput_metadata, &types.ConverseStreamMetadataEvent{
		Usage:   &types.TokenUsage{InputTokens: i32(9), OutputTokens: i32(3), TotalTokens: i32(14), CacheReadInputTokens: i32(2)},
		Metrics: &types.ConverseStreamMetrics{LatencyMs: aws.Int64(80)}})
}

// TestBedrockStreamException: an exception mid-stream ends the client's
// stream with an error event and no [DONE], and counts as the stream's
// error.
func TestBedrockStreamException(t *testing.T) {
	up := &bedrockWire{t: t, throttleMidStream: true}
	g := newBedrockGateway(t, up)
	resp, body := g.post(t, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 200 || !strings.Contains(body, `"content":"Hello"`) || !strings.Contains(body, "Too many tokens") || strings.Contains(body, "[DONE]") {
		t.Errorf("%d %s", resp.StatusCode, body)
	}
}

func newBedrockGateway(t *testing.T, up *bedrockWire) *testGateway {
	awsTestEnv(t)
	up.region, up.bodies, up.paths = "eu-west-3", make(chan []byte, 10), make(chan string, 10)
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
	up := &bedrockWire{t: t}
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
	sent, path := <-up.bodies, <-up.paths
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
	s := client.Chat.Completions.NewStreaming(ctx, withTool)
	var acc openai.ChatCompletionAccumulator
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	m := acc.Choices[0]
	if m.Message.Content != "Hello from Bedrock." || m.FinishReason != "tool_calls" || len(m.Message.ToolCalls) != 1 ||
		m.Message.ToolCalls[0].Function.Arguments != `{"city":"Paris"}` || m.Message.ToolCalls[0].ID != "tooluse_1" {
		t.Errorf("accumulated %+v", m)
	}
	sent, path = <-up.bodies, <-up.paths
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
	<-up.bodies
	<-up.paths

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
		up := &bedrockWire{t: t, status: c.status, errMsg: c.msg}
		g := newBedrockGateway(t, up)
		resp, body := g.post(t, "/v1/chat/completions", c.body)
		if resp.StatusCode != c.want || !strings.Contains(body, c.wantIn) {
			t.Errorf("upstream %d %q: answered %d %s; want %d with %s", c.status, c.msg, resp.StatusCode, body, c.want, c.wantIn)
		}
		if called := len(up.bodies) > 0; called != c.wantUpstream {
			t.Errorf("upstream %d %q: called %v", c.status, c.msg, called)
		}
	}
}

// TestBedrockPoolBadSignature: a gateway whose credentials are not the
// ones the endpoint knows gets 403s, which reach the client as a 502.
func TestBedrockPoolBadSignature(t *testing.T) {
	up := &bedrockWire{t: t}
	g := newBedrockGateway(t, up)
	up.region = "us-east-1" // the endpoint checks for another region: every signature is wrong
	resp, body := g.post(t, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 502 || strings.Contains(body, testAccessKey) || strings.Contains(body, "signature") {
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
