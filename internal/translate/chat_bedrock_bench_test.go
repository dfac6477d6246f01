package translate

import (
	"context"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"
)

// benchChat is a short chat request with a system prompt, two turns and a
// tool: what an agent's turn sends, as a pool's translation reads it.
var benchChat = []byte(`{"model":"m","max_tokens":256,"temperature":0.2,"messages":[{"role":"system","content":"You are a helpful assistant."},
{"role":"user","content":"What is the weather in Paris today, and should I take an umbrella?"},
{"role":"assistant","content":"Let me check.","tool_calls":[{"id":"t1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
{"role":"tool","tool_call_id":"t1","content":"light rain, 12C"}],
"tools":[{"type":"function","function":{"name":"get_weather","description":"The weather in a city.","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]}`)

// The request's translation for each hosted kind, side by side.
func BenchmarkChatToPool(b *testing.B) {
	ctx := context.Background()
	b.Run("anthropic", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ChatToAnthropicBody(ctx, benchChat, 256, 1<<20); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("bedrock", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ChatToBedrockBody(ctx, benchChat, 256, 1<<20); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A whole answer read back as chat for each hosted kind, side by side.
func BenchmarkPoolAnswer(b *testing.B) {
	anth := []byte(`{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"Light rain in Paris today: take an umbrella."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":120,"output_tokens":12,"cache_read_input_tokens":0,"cache_creation_input_tokens":0}}`)
	bedrock := []byte(`{"output":{"message":{"role":"assistant","content":[{"text":"Light rain in Paris today: take an umbrella."}]}},"stopReason":"end_turn","usage":{"inputTokens":120,"outputTokens":12,"totalTokens":132},"metrics":{"latencyMs":300}}`)
	b.Run("anthropic", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := (AnthropicUpstream{}).Answer(anth); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("bedrock", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := (BedrockUpstream{}).Answer(bedrock); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A call's SigV4 signature, with credentials already cached.
func BenchmarkBedrockSign(b *testing.B) {
	s := NewBedrockSigner("us-east-1", credentials.NewStaticCredentialsProvider("AKID", "secret", "token"), nil)
	req, _ := http.NewRequest(http.MethodPost, "https://bedrock-runtime.us-east-1.amazonaws.com/model/m/converse", nil)
	body := benchChat
	b.ReportAllocs()
	for b.Loop() {
		req.Header = http.Header{"Content-Type": {"application/json"}}
		if err := s.Sign(context.Background(), req, body); err != nil {
			b.Fatal(err)
		}
	}
}
