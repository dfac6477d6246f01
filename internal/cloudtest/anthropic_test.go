package cloudtest

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/vertex"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
)

// vertexClient is anthropic-sdk-go's Vertex client, with token as its
// bearer token, calling the server at url in project proj-1, location
// us-central1, and opts.
func vertexClient(url, token string, opts ...option.RequestOption) anthropic.Client {
	creds := &google.Credentials{TokenSource: oauth2.StaticTokenSource(&oauth2.Token{AccessToken: token})}
	opts = append([]option.RequestOption{vertex.WithCredentials(context.Background(), "us-central1", "proj-1", creds),
		option.WithBaseURL(url + "/"), option.WithMaxRetries(0)}, opts...)
	return anthropic.NewClient(opts...)
}

// The server speaks what the SDK's Vertex client sends and reads: the
// SDK's path, body and bearer token are taken, and its answers, whole and
// streamed, read back by the SDK with their text, stop reason and usage.
func TestAnthropicOnVertexSpeaksTheSDKs(t *testing.T) {
	paths := make(chan string, 4)
	s := httptest.NewServer(&Google{T: t, Vertex: true, Paths: paths})
	defer s.Close()
	// Vertex serves one version, which the client is told as Vertex's
	// documentation says; the SDK moves it from the header to the body.
	client := vertexClient(s.URL, GoogleToken, option.WithHeader("anthropic-version", VertexAnthropicVersion))
	params := anthropic.MessageNewParams{Model: "claude-sonnet-4-5@20250929", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hello"))}}

	msg, err := client.Messages.New(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	if got := <-paths; got != "/v1/projects/proj-1/locations/us-central1/publishers/anthropic/models/claude-sonnet-4-5@20250929:rawPredict" {
		t.Errorf("the SDK called %s", got)
	}
	u := msg.Usage
	if len(msg.Content) != 1 || msg.Content[0].Text != "Hi from Claude." || msg.StopReason != anthropic.StopReasonEndTurn ||
		u.InputTokens != 12 || u.OutputTokens != 5 || u.CacheReadInputTokens != 4 || u.CacheCreationInputTokens != 2 {
		t.Errorf("the SDK read %+v", msg)
	}

	stream := client.Messages.NewStreaming(t.Context(), params)
	var acc anthropic.Message
	events := 0
	for stream.Next() {
		events++
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if got := <-paths; !strings.HasSuffix(got, ":streamRawPredict") {
		t.Errorf("the SDK's stream called %s", got)
	}
	if len(acc.Content) != 1 || acc.Content[0].Text != "Hi from Claude." || acc.StopReason != anthropic.StopReasonEndTurn ||
		acc.Usage.OutputTokens != 5 || acc.Usage.CacheReadInputTokens != 4 || events != 8 {
		t.Errorf("the SDK read the stream (%d events) as %+v", events, acc)
	}
}

// A call Vertex would refuse is refused: another token, another version
// in the body (the SDK's own, untold).
func TestAnthropicOnVertexRefuses(t *testing.T) {
	s := httptest.NewServer(&Google{T: t, Vertex: true})
	defer s.Close()
	params := anthropic.MessageNewParams{Model: "claude-sonnet-4-5@20250929", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hello"))}}
	for name, c := range map[string]struct {
		client anthropic.Client
		status int
	}{
		"another token":   {vertexClient(s.URL, "ya29.other", option.WithHeader("anthropic-version", VertexAnthropicVersion)), 403},
		"another version": {vertexClient(s.URL, GoogleToken), 400},
	} {
		_, err := c.client.Messages.New(t.Context(), params)
		var apiErr *anthropic.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != c.status {
			t.Errorf("%s: %v, want a %d", name, err, c.status)
		}
	}
}
