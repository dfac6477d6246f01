package router

import (
	"encoding/json"
	"net/http"
	"reflect"
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

// claudeOnVertex is the upstream model the tests' vertex pool of
// Anthropic's models is asked for.
const claudeOnVertex = "claude-sonnet-4-5@20250929"

// newVertexAnthropicGateway is a gateway whose pool is a vertex pool of
// publisher anthropic at up, its token from a service account's key
// that up's token endpoint issues for; h, when not nil, stands in front
// of up.
func newVertexAnthropicGateway(t *testing.T, up *cloudtest.Google, h http.Handler) *testGateway {
	up.Bodies, up.Paths = make(chan []byte, 10), make(chan string, 10)
	if h == nil {
		h = up
	}
	return newTestGateway(t, func(c *config.Config) {
		c.Models[0].Upstream = claudeOnVertex
		c.Server.MaxBodyBytes = 1 << 20
		base := strings.TrimSuffix(c.Pools[0].Endpoints[0].URL, "/v1")
		p := &c.Pools[0]
		p.Kind, p.Project, p.Location, p.Publisher = catalog.KindVertex, "proj-1", "us-central1", catalog.PublisherAnthropic
		p.CredentialsFile = cloudtest.ServiceAccountFile(t, base+"/token")
	}, h)
}

// TestAnthropicOnVertexWithOfficialClients serves the official OpenAI
// SDK's chat completions, whole and streamed, its streamed Responses and
// the official Anthropic SDK's Messages, whole and streamed, from a
// vertex pool of Anthropic's models: each call a Messages API body
// without its model and with Vertex's anthropic_version, sent to
// rawPredict or streamRawPredict with a bearer token fetched once, its
// answer in the client's own shape with the cache's tokens counted.
func TestAnthropicOnVertexWithOfficialClients(t *testing.T) {
	up := &cloudtest.Google{T: t, Vertex: true}
	g := newVertexAnthropicGateway(t, up, nil)
	ctx := t.Context()
	prefix := "/v1/projects/proj-1/locations/us-central1/publishers/anthropic/models/" + claudeOnVertex
	sent := func(wantPath string) map[string]any {
		t.Helper()
		body, path := <-up.Bodies, <-up.Paths
		if path != wantPath {
			t.Errorf("called %s, want %s", path, wantPath)
		}
		var b map[string]any
		if err := json.Unmarshal(body, &b); err != nil {
			t.Fatal(err)
		}
		if _, ok := b["model"]; ok || b["anthropic_version"] != cloudtest.VertexAnthropicVersion {
			t.Errorf("sent %s: want no model and anthropic_version %s", body, cloudtest.VertexAnthropicVersion)
		}
		return b
	}

	client := openai.NewClient(option.WithBaseURL(g.url+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ask := openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("Hello")},
		MaxTokens: openai.Int(40)}
	c, err := client.Chat.Completions.New(ctx, ask)
	if err != nil {
		t.Fatal(err)
	}
	if c.Choices[0].Message.Content != "Hi from Claude." || c.Choices[0].FinishReason != "stop" || c.Usage.PromptTokens != 18 ||
		c.Usage.CompletionTokens != 5 || c.Usage.PromptTokensDetails.CachedTokens != 4 || c.Model != "m" {
		t.Errorf("%s", c.RawJSON())
	}
	if b := sent(prefix + ":rawPredict"); b["system"] != "Be brief." || b["max_tokens"] != 40.0 {
		t.Errorf("the rawPredict body: %v", b)
	}

	m := streamedChoice(t, ctx, client, ask)
	if m.Message.Content != "Hi from Claude." || m.FinishReason != "stop" {
		t.Errorf("accumulated %+v", m)
	}
	if b := sent(prefix + ":streamRawPredict"); b["stream"] != true {
		t.Errorf("the streamRawPredict body: %v", b)
	}

	rs := client.Responses.NewStreaming(ctx, responsesParams("Hello"))
	var text string
	for rs.Next() {
		if ev := rs.Current(); ev.Type == "response.completed" {
			text = ev.Response.OutputText()
		}
	}
	if rs.Err() != nil || text != "Hi from Claude." {
		t.Errorf("text %q, err %v", text, rs.Err())
	}
	sent(prefix + ":streamRawPredict")

	ac := anthropic.NewClient(anthropicoption.WithBaseURL(g.url), anthropicoption.WithAPIKey("unused"), anthropicoption.WithMaxRetries(0))
	params := anthropic.MessageNewParams{Model: "m", MaxTokens: 64, StopSequences: []string{"END"},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hello"))}}
	msg, err := ac.Messages.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	// The answer is read as chat, which counts tokens written to the
	// cache (2) among the input's: 12 + 2, as from an anthropic pool.
	if u := msg.Usage; len(msg.Content) != 1 || msg.Content[0].Text != "Hi from Claude." || msg.StopReason != "end_turn" ||
		u.InputTokens != 14 || u.CacheReadInputTokens != 4 || u.OutputTokens != 5 {
		t.Errorf("the Anthropic client read %+v", msg)
	}
	// A Messages client's own body goes, its fields kept.
	if b := sent(prefix + ":rawPredict"); !reflect.DeepEqual(b["stop_sequences"], []any{"END"}) || b["max_tokens"] != 64.0 {
		t.Errorf("the Messages client's body: %v", b)
	}

	stream := ac.Messages.NewStreaming(ctx, params)
	var acc anthropic.Message
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil || len(acc.Content) != 1 || acc.Content[0].Text != "Hi from Claude." ||
		acc.StopReason != "end_turn" || acc.Usage.OutputTokens != 5 || acc.Usage.CacheReadInputTokens != 4 {
		t.Errorf("the Anthropic client's stream: %+v, %v", acc, err)
	}
	sent(prefix + ":streamRawPredict")
	if up.Tokens.Load() != 1 {
		t.Errorf("%d tokens fetched for five calls, want 1", up.Tokens.Load())
	}
}

// TestAnthropicOnVertexErrors: a call Vertex refuses for the pool's
// credentials is llmgw's 502, naming no token; a 429 is the pool's
// capacity; a 400 about the request reaches the client with its message.
func TestAnthropicOnVertexErrors(t *testing.T) {
	for _, c := range []struct {
		name    string
		status  int
		message string
		noToken bool
		want    int
		wantIn  string
	}{
		{"credentials refused", 0, "", true, 502, "refused the gateway's credentials"},
		{"limited", 429, "Quota exceeded for aiplatform.googleapis.com/online_prediction_requests_per_base_model.", false, 429, "capacity"},
		{"bad request", 400, "messages.0: roles must alternate", false, 400, "roles must alternate"},
	} {
		t.Run(c.name, func(t *testing.T) {
			up := &cloudtest.Google{T: t, Vertex: true, Status: c.status, Message: c.message}
			var h http.Handler
			if c.noToken {
				// Vertex refusing the token: it never reaches the server.
				h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					r.Header.Set("Authorization", "Bearer ya29.revoked")
					up.ServeHTTP(w, r)
				})
			}
			g := newVertexAnthropicGateway(t, up, h)
			resp, body := g.post(t, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
			if resp.StatusCode != c.want || !strings.Contains(body, c.wantIn) || strings.Contains(body, "ya29.") {
				t.Errorf("answered %d %s", resp.StatusCode, body)
			}
		})
	}
}
