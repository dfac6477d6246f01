package router

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"google.golang.org/genai"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

const (
	testGeminiKey   = "gemini-test-key"
	testGoogleToken = "ya29.test-token"
)

// googleWire is a generateContent endpoint, the Gemini API's or Vertex
// AI's: it checks the API key header (Gemini) or the bearer token its own
// token endpoint issued (Vertex), reads the request into the genai SDK's
// types with unknown members an error, and answers with the SDK's
// GenerateContentResponse: JSON, or SSE for streamGenerateContent?alt=sse.
type googleWire struct {
	t       *testing.T
	vertex  bool
	bodies  chan []byte
	paths   chan string
	tokens  atomic.Int32 // tokens issued
	status  int          // when not zero, every call is refused with it
	message string
}

// geminiRequest is what the test reads a request as: the genai SDK's
// types, and nothing else.
type geminiRequest struct {
	Contents          []*genai.Content        `json:"contents"`
	SystemInstruction *genai.Content          `json:"systemInstruction"`
	Tools             []*genai.Tool           `json:"tools"`
	ToolConfig        *genai.ToolConfig       `json:"toolConfig"`
	GenerationConfig  *genai.GenerationConfig `json:"generationConfig"`
}

func (g *googleWire) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/token" {
		r.ParseForm()
		if r.Form.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" || r.Form.Get("assertion") == "" {
			w.WriteHeader(400)
			return
		}
		g.tokens.Add(1)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"access_token":"`+testGoogleToken+`","token_type":"Bearer","expires_in":3600}`)
		return
	}
	body, _ := io.ReadAll(r.Body)
	g.bodies <- body
	g.paths <- r.URL.RequestURI()
	w.Header().Set("Content-Type", "application/json")
	authorized := r.Header.Get("x-goog-api-key") == testGeminiKey && r.Header.Get("Authorization") == ""
	if g.vertex {
		authorized = r.Header.Get("Authorization") == "Bearer "+testGoogleToken && r.Header.Get("x-goog-api-key") == ""
	}
	if !authorized {
		w.WriteHeader(403)
		io.WriteString(w, `{"error":{"code":403,"message":"Permission denied: caller lacks credentials.","status":"PERMISSION_DENIED"}}`)
		return
	}
	if g.status != 0 {
		w.WriteHeader(g.status)
		fmt.Fprintf(w, `{"error":{"code":%d,"message":%q,"status":"X"}}`, g.status, g.message)
		return
	}
	var req geminiRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || len(req.Contents) == 0 || req.GenerationConfig == nil || req.GenerationConfig.MaxOutputTokens == 0 {
		w.WriteHeader(400)
		fmt.Fprintf(w, `{"error":{"code":400,"message":%q,"status":"INVALID_ARGUMENT"}}`, fmt.Sprint("bad request: ", err))
		return
	}
	usage := &genai.GenerateContentResponseUsageMetadata{PromptTokenCount: 12, CandidatesTokenCount: 5, ThoughtsTokenCount: 2, CachedContentTokenCount: 4, TotalTokenCount: 19}
	if !strings.Contains(r.URL.Path, ":streamGenerateContent") {
		json.NewEncoder(w).Encode(&genai.GenerateContentResponse{ModelVersion: "gemini-2.5-pro", UsageMetadata: usage, Candidates: []*genai.Candidate{{
			FinishReason: genai.FinishReasonStop, Content: &genai.Content{Role: genai.RoleModel, Parts: []*genai.Part{{Text: "Hi from Gemini."}}}}}})
		return
	}
	if r.URL.Query().Get("alt") != "sse" {
		g.t.Errorf("a stream asked for no SSE: %s", r.URL)
	}
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(resp *genai.GenerateContentResponse) {
		b, _ := json.Marshal(resp)
		fmt.Fprintf(w, "data: %s\r\n\r\n", b)
		w.(http.Flusher).Flush()
	}
	text := func(s string, thought bool) *genai.GenerateContentResponse {
		return &genai.GenerateContentResponse{Candidates: []*genai.Candidate{{Content: &genai.Content{Role: genai.RoleModel, Parts: []*genai.Part{{Text: s, Thought: thought}}}}}}
	}
	send(text("Thinking.", true))
	for _, piece := range []string{"Hello", " from", " Gemini."} {
		send(text(piece, false))
	}
	last := &genai.GenerateContentResponse{UsageMetadata: usage, Candidates: []*genai.Candidate{{FinishReason: genai.FinishReasonStop, Content: &genai.Content{Role: genai.RoleModel}}}}
	if len(req.Tools) > 0 {
		last.Candidates[0].Content.Parts = []*genai.Part{{FunctionCall: &genai.FunctionCall{ID: "fc_1", Name: "get_weather", Args: map[string]any{"city": "Paris"}}}}
	}
	send(last)
}

// serviceAccountFile writes a service account's key whose token endpoint
// is tokenURL, with a key made for the test.
func serviceAccountFile(t *testing.T, tokenURL string) string {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	sa, _ := json.Marshal(map[string]string{"type": "service_account", "project_id": "proj-1", "private_key_id": "k1",
		"private_key": string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), "client_email": "llmgw@proj-1.iam.gserviceaccount.com",
		"client_id": "1", "token_uri": tokenURL})
	path := filepath.Join(t.TempDir(), "sa.json")
	if err := os.WriteFile(path, sa, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func newGoogleGateway(t *testing.T, up *googleWire) *testGateway {
	up.bodies, up.paths = make(chan []byte, 10), make(chan string, 10)
	return newTestGateway(t, func(c *config.Config) {
		c.Models[0].Upstream = "gemini-2.5-pro"
		c.Server.MaxBodyBytes = 1 << 20
		if !up.vertex {
			c.Pools[0].Kind, c.Pools[0].APIKey = catalog.KindGemini, testGeminiKey
			return
		}
		base := strings.TrimSuffix(c.Pools[0].Endpoints[0].URL, "/v1")
		c.Pools[0].Kind, c.Pools[0].Project, c.Pools[0].Location = catalog.KindVertex, "proj-1", "us-central1"
		c.Pools[0].CredentialsFile = serviceAccountFile(t, base+"/token")
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
			up := &googleWire{t: t, vertex: vertex}
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
			sent, path := <-up.bodies, <-up.paths
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
			s := client.Chat.Completions.NewStreaming(ctx, withTool)
			var acc openai.ChatCompletionAccumulator
			for s.Next() {
				acc.AddChunk(s.Current())
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
			m := acc.Choices[0]
			if m.Message.Content != "Hello from Gemini." || m.FinishReason != "tool_calls" || len(m.Message.ToolCalls) != 1 ||
				m.Message.ToolCalls[0].Function.Arguments != `{"city":"Paris"}` || m.Message.ToolCalls[0].ID != "fc_1" {
				t.Errorf("accumulated %+v", m)
			}
			sent, path = <-up.bodies, <-up.paths
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
			<-up.bodies
			<-up.paths

			ac := anthropic.NewClient(anthropicoption.WithBaseURL(g.url), anthropicoption.WithAPIKey("unused"), anthropicoption.WithMaxRetries(0))
			msg, err := ac.Messages.New(ctx, anthropic.MessageNewParams{Model: "m", MaxTokens: 64,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hello"))}})
			if err != nil {
				t.Fatal(err)
			}
			if len(msg.Content) != 1 || msg.Content[0].Text != "Hi from Gemini." || msg.StopReason != "end_turn" || msg.Usage.OutputTokens != 7 {
				t.Errorf("the Anthropic client read %+v", msg)
			}
			if vertex && up.tokens.Load() != 1 {
				t.Errorf("%d tokens fetched for four calls, want 1", up.tokens.Load())
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
		{false, testGeminiKey, 400, "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).", 400, `"code":"context_length_exceeded"`},
		{true, "", 429, "Resource exhausted.", 429, "capacity"},
	} {
		up := &googleWire{t: t, vertex: c.vertex, status: c.status, message: c.message}
		g := newGoogleGateway(t, up)
		if !c.vertex {
			g = newTestGateway(t, func(cfg *config.Config) {
				cfg.Pools[0].Kind, cfg.Pools[0].APIKey = catalog.KindGemini, c.key
				cfg.Models[0].Upstream = "gemini-2.5-pro"
			}, up)
		}
		resp, body := g.post(t, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
		if resp.StatusCode != c.want || !strings.Contains(body, c.wantIn) || strings.Contains(body, testGoogleToken) || strings.Contains(body, testGeminiKey) {
			t.Errorf("%+v: answered %d %s", c, resp.StatusCode, body)
		}
	}
}
