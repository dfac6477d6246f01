package translate

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/vertex"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
)

// sdkCall is what one of anthropic-sdk-go's clients sent: its path as
// written and its body.
type sdkCall struct {
	path string
	body []byte
}

// sdkCalls is a server that records each call, answering every one with
// an error the client gives up on.
func sdkCalls(t *testing.T) (*httptest.Server, chan sdkCall) {
	calls := make(chan sdkCall, 4)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		calls <- sdkCall{r.URL.EscapedPath(), b}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(400)
		io.WriteString(w, `{"type":"error","error":{"type":"invalid_request_error","message":"recorded"}}`)
	}))
	t.Cleanup(s.Close)
	return s, calls
}

// TestVertexAnthropicIsTheSDKs: a Messages API body as ToVertexAnthropic
// makes it, sent to VertexAnthropicURL, is what anthropic-sdk-go's own
// Vertex client sends for the same request, whole and streamed: the
// body without its model and with Vertex's version, to the model's
// rawPredict or streamRawPredict.
func TestVertexAnthropicIsTheSDKs(t *testing.T) {
	s, calls := sdkCalls(t)
	ctx := context.Background()
	creds := &google.Credentials{TokenSource: oauth2.StaticTokenSource(&oauth2.Token{AccessToken: "t"})}
	firstParty := anthropic.NewClient(option.WithBaseURL(s.URL+"/"), option.WithAPIKey("k"), option.WithMaxRetries(0))
	onVertex := anthropic.NewClient(vertex.WithCredentials(ctx, "us-east5", "proj-1", creds), option.WithBaseURL(s.URL+"/"),
		option.WithMaxRetries(0), option.WithHeader("anthropic-version", VertexAnthropicVersion))
	params := anthropic.MessageNewParams{Model: "claude-sonnet-4-5@20250929", MaxTokens: 64, System: []anthropic.TextBlockParam{{Text: "Be brief."}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hello"))}}
	base := "/v1/projects/proj-1/locations/us-east5/publishers/anthropic"
	for _, stream := range []bool{false, true} {
		send := func(c anthropic.Client) sdkCall {
			if stream {
				st := c.Messages.NewStreaming(ctx, params)
				for st.Next() {
				}
			} else {
				c.Messages.New(ctx, params)
			}
			return <-calls
		}
		own, sdk := send(firstParty), send(onVertex)
		body, err := ToVertexAnthropic(own.body)
		if err != nil {
			t.Fatal(err)
		}
		var got, want map[string]any
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(sdk.body, &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("stream %v: the body\n%s\nwant the SDK's\n%s", stream, body, sdk.body)
		}
		if u := VertexAnthropicURL(s.URL+base, "claude-sonnet-4-5@20250929", stream); u != s.URL+sdk.path {
			t.Errorf("stream %v: the URL %s, want the SDK's %s", stream, strings.TrimPrefix(u, s.URL), sdk.path)
		}
	}
}
