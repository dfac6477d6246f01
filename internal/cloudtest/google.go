package cloudtest

// A generateContent endpoint, the Gemini API's or Vertex AI's (with
// Anthropic's models' rawPredict beside it, anthropic.go), and the token
// endpoint Vertex's service account asks.

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

	"google.golang.org/genai"
)

// GeminiKey is the Gemini API key the server takes; GoogleToken the
// bearer token its token endpoint issues for Vertex.
const (
	GeminiKey   = "gemini-test-key"
	GoogleToken = "ya29.test-token"
)

// ThoughtSignature is the thought signature the server gives each
// function call it makes (fc_1), and requires back on it, as Gemini 3
// does: bytes whose standard base64 has + and /.
var ThoughtSignature = []byte("\xfb\xff\xbf thought \xfe\xef")

// issuedCall is the id of the function calls the server makes.
const issuedCall = "fc_1"

// Google is a generateContent endpoint, the Gemini API's or (Vertex set)
// Vertex AI's: it checks the API key header (Gemini) or the bearer token
// its own token endpoint, /token, issued (Vertex), reads the request into
// the genai SDK's types with unknown members an error, and answers with
// the SDK's GenerateContentResponse: JSON, or SSE for
// streamGenerateContent?alt=sse. Its function calls carry a thought
// signature, which it requires back with them, as Gemini 3 does. On
// Vertex, Anthropic's models are served too (serveAnthropic). Each request's body goes to Bodies and
// its path and query to Paths when they are not nil.
type Google struct {
	T       testing.TB
	Vertex  bool
	Bodies  chan []byte
	Paths   chan string
	Tokens  atomic.Int32 // tokens issued
	Status  int          // when not zero, every call is refused with it
	Message string
	// Script, when set, answers every call; without it, a call is
	// answered fixed text, and a stream offering tools a get_weather call.
	Script Script
}

// geminiRequest is what the server reads a request as: the genai SDK's
// types, and nothing else.
type geminiRequest struct {
	Contents          []*genai.Content        `json:"contents"`
	SystemInstruction *genai.Content          `json:"systemInstruction"`
	Tools             []*genai.Tool           `json:"tools"`
	ToolConfig        *genai.ToolConfig       `json:"toolConfig"`
	GenerationConfig  *genai.GenerationConfig `json:"generationConfig"`
}

func (g *Google) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/token" {
		r.ParseForm()
		if r.Form.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" || r.Form.Get("assertion") == "" {
			w.WriteHeader(400)
			return
		}
		g.Tokens.Add(1)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"access_token":"`+GoogleToken+`","token_type":"Bearer","expires_in":3600}`)
		return
	}
	body, _ := io.ReadAll(r.Body)
	if g.Bodies != nil {
		g.Bodies <- body
	}
	if g.Paths != nil {
		g.Paths <- r.URL.RequestURI()
	}
	w.Header().Set("Content-Type", "application/json")
	authorized := r.Header.Get("x-goog-api-key") == GeminiKey && r.Header.Get("Authorization") == ""
	if g.Vertex {
		authorized = r.Header.Get("Authorization") == "Bearer "+GoogleToken && r.Header.Get("x-goog-api-key") == ""
	}
	if !authorized {
		w.WriteHeader(403)
		io.WriteString(w, `{"error":{"code":403,"message":"Permission denied: caller lacks credentials.","status":"PERMISSION_DENIED"}}`)
		return
	}
	if g.Vertex && strings.Contains(r.URL.Path, "/publishers/anthropic/") {
		g.serveAnthropic(w, r, body)
		return
	}
	if g.Status != 0 {
		w.WriteHeader(g.Status)
		fmt.Fprintf(w, `{"error":{"code":%d,"message":%q,"status":"X"}}`, g.Status, g.Message)
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
	if err := req.signed(); err != nil {
		w.WriteHeader(400)
		fmt.Fprintf(w, `{"error":{"code":400,"message":%q,"status":"INVALID_ARGUMENT"}}`, err.Error())
		return
	}
	stream := strings.Contains(r.URL.Path, ":streamGenerateContent")
	if stream && r.URL.Query().Get("alt") != "sse" {
		g.T.Errorf("a stream asked for no SSE: %s", r.URL)
	}
	if g.Script != nil {
		g.answer(w, stream, g.Script(req.turn(stream)))
		return
	}
	usage := &genai.GenerateContentResponseUsageMetadata{PromptTokenCount: 12, CandidatesTokenCount: 5, ThoughtsTokenCount: 2, CachedContentTokenCount: 4, TotalTokenCount: 19}
	if !stream {
		json.NewEncoder(w).Encode(&genai.GenerateContentResponse{ModelVersion: "gemini-2.5-pro", UsageMetadata: usage, Candidates: []*genai.Candidate{{
			FinishReason: genai.FinishReasonStop, Content: &genai.Content{Role: genai.RoleModel, Parts: []*genai.Part{{Text: "Hi from Gemini."}}}}}})
		return
	}
	send := sseSender(w)
	send(modelText("Thinking.", true))
	for _, piece := range []string{"Hello", " from", " Gemini."} {
		send(modelText(piece, false))
	}
	last := &genai.GenerateContentResponse{UsageMetadata: usage, Candidates: []*genai.Candidate{{FinishReason: genai.FinishReasonStop, Content: &genai.Content{Role: genai.RoleModel}}}}
	if len(req.Tools) > 0 {
		last.Candidates[0].Content.Parts = []*genai.Part{{FunctionCall: &genai.FunctionCall{ID: issuedCall, Name: "get_weather", Args: map[string]any{"city": "Paris"}},
			ThoughtSignature: ThoughtSignature}}
	}
	send(last)
}

// sseSender writes each response to w as an SSE event, as
// streamGenerateContent?alt=sse does.
func sseSender(w http.ResponseWriter) func(*genai.GenerateContentResponse) {
	w.Header().Set("Content-Type", "text/event-stream")
	return func(resp *genai.GenerateContentResponse) {
		b, _ := json.Marshal(resp)
		fmt.Fprintf(w, "data: %s\r\n\r\n", b)
		w.(http.Flusher).Flush()
	}
}

// modelText is a response holding one text part of the model's.
func modelText(s string, thought bool) *genai.GenerateContentResponse {
	return &genai.GenerateContentResponse{Candidates: []*genai.Candidate{{Content: &genai.Content{Role: genai.RoleModel, Parts: []*genai.Part{{Text: s, Thought: thought}}}}}}
}

// answer writes reply: whole, or streamed with its text a word at a time
// and its function call in the last response.
func (g *Google) answer(w http.ResponseWriter, stream bool, reply Reply) {
	usage := &genai.GenerateContentResponseUsageMetadata{PromptTokenCount: 100, CandidatesTokenCount: 10, TotalTokenCount: 110}
	var parts []*genai.Part
	if reply.Tool != "" {
		var args map[string]any
		if err := json.Unmarshal([]byte(reply.Args), &args); err != nil {
			g.T.Errorf("a scripted call's arguments %s: %v", reply.Args, err)
		}
		parts = []*genai.Part{{FunctionCall: &genai.FunctionCall{ID: issuedCall, Name: reply.Tool, Args: args}, ThoughtSignature: ThoughtSignature}}
	}
	last := &genai.GenerateContentResponse{ModelVersion: "gemini-2.5-pro", UsageMetadata: usage, Candidates: []*genai.Candidate{{
		FinishReason: genai.FinishReasonStop, Content: &genai.Content{Role: genai.RoleModel, Parts: parts}}}}
	if !stream {
		if reply.Tool == "" {
			last.Candidates[0].Content.Parts = []*genai.Part{{Text: reply.Text}}
		}
		json.NewEncoder(w).Encode(last)
		return
	}
	send := sseSender(w)
	if reply.Tool == "" {
		for _, piece := range words(reply.Text) {
			send(modelText(piece, false))
		}
	}
	send(last)
}

// signed is an error when a function call the server made comes back
// without the thought signature it was given.
func (req *geminiRequest) signed() error {
	for i, c := range req.Contents {
		for j, p := range c.Parts {
			if p.FunctionCall != nil && p.FunctionCall.ID == issuedCall && !bytes.Equal(p.ThoughtSignature, ThoughtSignature) {
				return fmt.Errorf("Function call is missing a thought_signature in functionCall parts. contents[%d].parts[%d]", i, j)
			}
		}
	}
	return nil
}

// turn is what a Script reads of req: its functions' names, and each
// part's text, a function's response's as a message of role tool.
func (req *geminiRequest) turn(stream bool) Turn {
	t := Turn{Stream: stream}
	for _, tool := range req.Tools {
		for _, f := range tool.FunctionDeclarations {
			t.Tools = append(t.Tools, f.Name)
		}
	}
	for _, c := range req.Contents {
		role := c.Role
		if role == genai.RoleModel {
			role = "assistant"
		}
		for _, p := range c.Parts {
			switch {
			case p.FunctionResponse != nil:
				t.Messages = append(t.Messages, Message{Role: "tool", Text: fmt.Sprint(p.FunctionResponse.Response["output"])})
			case p.Text != "" && !p.Thought:
				t.Messages = append(t.Messages, Message{Role: role, Text: p.Text})
			}
		}
	}
	return t
}

// ServiceAccountFile writes a service account's key whose token endpoint
// is tokenURL, with a key made for the test, and returns its path.
func ServiceAccountFile(t testing.TB, tokenURL string) string {
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
