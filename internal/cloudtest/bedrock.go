package cloudtest

// A Bedrock runtime endpoint: Converse and ConverseStream.

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

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/schemas"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/eventstream"
	"github.com/aws/smithy-go/transport/http/protocol/restjson1"
)

// The test's AWS credentials, found by the default chain in the
// environment (AWSEnv).
const (
	AccessKey    = "AKIDLLMGWTEST"
	SecretKey    = "llmgw/test/secret"
	SessionToken = "llmgw-session-token"
)

// AWSEnv points AWS's default chain at the test's credentials alone: no
// shared files, no instance metadata.
func AWSEnv(t testing.TB) {
	t.Setenv("AWS_ACCESS_KEY_ID", AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", SecretKey)
	t.Setenv("AWS_SESSION_TOKEN", SessionToken)
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_PROFILE", "")
}

// Bedrock is a Bedrock runtime endpoint: it verifies every request's
// SigV4 signature for Region by signing it again with the SDK's own
// signer, reads the Converse request, and answers Converse with JSON and
// ConverseStream with event-stream messages the SDK's own protocol
// encodes. Each request's body goes to Bodies and its path to Paths when
// they are not nil.
type Bedrock struct {
	T      testing.TB
	Region string
	Bodies chan []byte
	Paths  chan string
	Status int    // when not zero, every call is refused with it
	ErrMsg string // and this message
	// ThrottleMidStream ends a stream after its first text with a
	// throttlingException message.
	ThrottleMidStream bool
	// Script, when set, answers every call; without it, a call is
	// answered fixed text, and a stream offering tools a get_weather call.
	Script Script
}

// converseRequest is what the server reads of a Converse request: unknown
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

func (b *Bedrock) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if b.Bodies != nil {
		b.Bodies <- body
	}
	if b.Paths != nil {
		b.Paths <- r.URL.EscapedPath()
	}
	if err := b.verify(r, body); err != "" {
		w.Header().Set("X-Amzn-ErrorType", "InvalidSignatureException")
		w.WriteHeader(403)
		io.WriteString(w, `{"message":"`+err+`"}`)
		return
	}
	if b.Status != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(b.Status)
		io.WriteString(w, `{"message":"`+b.ErrMsg+`"}`)
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
	stream := strings.HasSuffix(r.URL.Path, "/converse-stream")
	if b.Script != nil {
		reply := b.Script(req.turn(stream))
		if stream {
			b.streamReply(w, reply)
		} else {
			wholeConverse(w, reply)
		}
		return
	}
	if stream {
		b.stream(w, len(req.ToolConfig) > 0)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"output":{"message":{"role":"assistant","content":[{"text":"Hi from Bedrock."}]}},"stopReason":"end_turn",`+
		`"usage":{"inputTokens":11,"outputTokens":4,"totalTokens":25,"cacheReadInputTokens":7,"cacheWriteInputTokens":3},"metrics":{"latencyMs":120}}`)
}

// verify is why r's signature is wrong: empty when signing it again with
// the test's credentials gives the same Authorization.
func (b *Bedrock) verify(r *http.Request, body []byte) string {
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
	creds := aws.Credentials{AccessKeyID: AccessKey, SecretAccessKey: SecretKey, SessionToken: SessionToken}
	if err := v4.NewSigner().SignHTTP(r.Context(), creds, again, hex.EncodeToString(sum[:]), "bedrock", b.Region, at); err != nil {
		return err.Error()
	}
	if again.Header.Get("Authorization") != auth || r.Header.Get("X-Amz-Security-Token") != SessionToken {
		return "The request signature we calculated does not match the signature you provided."
	}
	return ""
}

// turn is what a Script reads of req: its tools' names, and each
// message's text, a tool result's as a message of role tool.
func (req *converseRequest) turn(stream bool) Turn {
	t := Turn{Stream: stream}
	var tc struct {
		Tools []struct {
			ToolSpec struct {
				Name string `json:"name"`
			} `json:"toolSpec"`
		} `json:"tools"`
	}
	json.Unmarshal(req.ToolConfig, &tc)
	for _, tool := range tc.Tools {
		t.Tools = append(t.Tools, tool.ToolSpec.Name)
	}
	for _, m := range req.Messages {
		for _, raw := range m.Content {
			var block struct {
				Text       string `json:"text"`
				ToolResult *struct {
					Content []struct {
						Text string `json:"text"`
					} `json:"content"`
				} `json:"toolResult"`
			}
			json.Unmarshal(raw, &block)
			switch {
			case block.ToolResult != nil:
				var text strings.Builder
				for _, c := range block.ToolResult.Content {
					text.WriteString(c.Text)
				}
				t.Messages = append(t.Messages, Message{Role: "tool", Text: text.String()})
			case block.Text != "":
				t.Messages = append(t.Messages, Message{Role: m.Role, Text: block.Text})
			}
		}
	}
	return t
}

// wholeConverse answers Converse with reply.
func wholeConverse(w http.ResponseWriter, reply Reply) {
	content, stop := []any{map[string]string{"text": reply.Text}}, "end_turn"
	if reply.Tool != "" {
		content = []any{map[string]any{"toolUse": map[string]any{"toolUseId": "tooluse_1", "name": reply.Tool, "input": json.RawMessage(reply.Args)}}}
		stop = "tool_use"
	}
	body, _ := json.Marshal(map[string]any{"output": map[string]any{"message": map[string]any{"role": "assistant", "content": content}},
		"stopReason": stop, "usage": map[string]int{"inputTokens": 100, "outputTokens": 10, "totalTokens": 110}, "metrics": map[string]int{"latencyMs": 50}})
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
}

// sender writes ConverseStream's events to w as the SDK's protocol
// encodes them.
func (b *Bedrock) sender(w http.ResponseWriter) func(*smithy.Schema, smithy.Serializable) {
	w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
	proto := restjson1.New(nil)
	return func(variant *smithy.Schema, v smithy.Serializable) {
		var buf bytes.Buffer
		if err := proto.SerializeEventMessage(schemas.ConverseStreamOutput, variant, v, &buf); err != nil {
			b.T.Error(err)
		}
		w.Write(buf.Bytes())
		w.(http.Flusher).Flush()
	}
}

func i32(n int32) *int32 { return &n }

// streamReply answers ConverseStream with reply: its text a word at a
// time, or its tool use with the input in two pieces.
func (b *Bedrock) streamReply(w http.ResponseWriter, reply Reply) {
	send := b.sender(w)
	send(schemas.ConverseStreamOutput_messageStart, &types.MessageStartEvent{Role: types.ConversationRoleAssistant})
	stop := types.StopReasonEndTurn
	if reply.Tool == "" {
		for _, piece := range words(reply.Text) {
			send(schemas.ConverseStreamOutput_contentBlockDelta, &types.ContentBlockDeltaEvent{ContentBlockIndex: i32(0), Delta: &types.ContentBlockDeltaMemberText{Value: piece}})
		}
	} else {
		send(schemas.ConverseStreamOutput_contentBlockStart, &types.ContentBlockStartEvent{ContentBlockIndex: i32(0),
			Start: &types.ContentBlockStartMemberToolUse{Value: types.ToolUseBlockStart{ToolUseId: aws.String("tooluse_1"), Name: aws.String(reply.Tool)}}})
		half := len(reply.Args) / 2
		for _, piece := range []string{reply.Args[:half], reply.Args[half:]} {
			send(schemas.ConverseStreamOutput_contentBlockDelta, &types.ContentBlockDeltaEvent{ContentBlockIndex: i32(0),
				Delta: &types.ContentBlockDeltaMemberToolUse{Value: types.ToolUseBlockDelta{Input: aws.String(piece)}}})
		}
		stop = types.StopReasonToolUse
	}
	send(schemas.ConverseStreamOutput_contentBlockStop, &types.ContentBlockStopEvent{ContentBlockIndex: i32(0)})
	send(schemas.ConverseStreamOutput_messageStop, &types.MessageStopEvent{StopReason: stop})
	send(schemas.ConverseStreamOutput_metadata, &types.ConverseStreamMetadataEvent{
		Usage:   &types.TokenUsage{InputTokens: i32(100), OutputTokens: i32(10), TotalTokens: i32(110)},
		Metrics: &types.ConverseStreamMetrics{LatencyMs: aws.Int64(50)}})
}

// stream answers ConverseStream: text, or text and a tool use.
func (b *Bedrock) stream(w http.ResponseWriter, tools bool) {
	send := b.sender(w)
	send(schemas.ConverseStreamOutput_messageStart, &types.MessageStartEvent{Role: types.ConversationRoleAssistant})
	for _, piece := range []string{"Hello", " from", " Bedrock."} {
		send(schemas.ConverseStreamOutput_contentBlockDelta, &types.ContentBlockDeltaEvent{ContentBlockIndex: i32(0), Delta: &types.ContentBlockDeltaMemberText{Value: piece}})
		if b.ThrottleMidStream {
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
