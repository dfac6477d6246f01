package mcpgw

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/observe"
)

// fakeServer is an MCP server made with the go-sdk, served over
// Streamable HTTP on a real listener: its echo tool counts the calls that
// reach it, and its stall tool waits for release, its call's end, or the
// end of the test: the SDK's server waits for its handlers when a session
// closes, and a cancellation that overtakes its call on another
// connection is lost, so a stalled call would hold the server's Close.
type fakeServer struct {
	url     string
	uri     string // its one resource's
	calls   atomic.Int64
	release chan struct{}
	headers chan http.Header // each call's request headers, when not nil
}

// fakeServers numbers the fake servers, each resource's URI its own.
var fakeServers atomic.Int64

func newFakeServer(t testing.TB) *fakeServer {
	t.Helper()
	f := &fakeServer{release: make(chan struct{})}
	ended := t.Context()
	s := mcp.NewServer(&mcp.Implementation{Name: "fake", Version: "1"}, nil)
	type args struct {
		Text string `json:"text,omitempty"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "echoes text"}, func(ctx context.Context, req *mcp.CallToolRequest, a args) (*mcp.CallToolResult, any, error) {
		f.calls.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + a.Text}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "stall", Description: strings.Repeat("long ", 2000)}, func(ctx context.Context, req *mcp.CallToolRequest, a args) (*mcp.CallToolResult, any, error) {
		f.calls.Add(1)
		select {
		case <-f.release:
		case <-ctx.Done():
		case <-ended.Done():
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
	})
	s.AddPrompt(&mcp.Prompt{Name: "greet"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hello"}}}}, nil
	})
	f.uri = fmt.Sprintf("note://fake/%d", fakeServers.Add(1))
	s.AddResource(&mcp.Resource{URI: f.uri, Name: "note", MIMEType: "text/plain"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		f.calls.Add(1)
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "a note"}}}, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.headers != nil && r.Method == http.MethodPost {
			select {
			case f.headers <- r.Header.Clone():
			default:
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	f.url = hs.URL
	return f
}

// keyed serves g as the router does: the key found by its secret in
// keys, 401 without one.
func serveGateway(t testing.TB, g *Gateway, keys map[string]*tenant.Key) string {
	t.Helper()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := keys[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
		if k == nil {
			http.Error(w, "no key", http.StatusUnauthorized)
			return
		}
		g.ServeHTTP(w, r, k)
	}))
	t.Cleanup(hs.Close)
	return hs.URL
}

// bearer sends secret with every request.
type bearer struct{ secret string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.secret)
	return http.DefaultTransport.RoundTrip(r)
}

func connect(t *testing.T, url, secret string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, opts)
	s, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{secret}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func toolNames(t *testing.T, s *mcp.ClientSession) []string {
	t.Helper()
	res, err := s.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

// waitTools waits until the gateway lists want.
func waitTools(t *testing.T, s *mcp.ClientSession, want []string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := toolNames(t, s)
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("tools = %q, want %q", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func text(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) == 0 {
		t.Fatalf("no content in %+v", res)
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content %T", res.Content[0])
	}
	return tc.Text
}

func newGateway(t *testing.T) *Gateway {
	g := New(Options{MaxBodyBytes: 1 << 20})
	t.Cleanup(g.Close)
	return g
}

var everyKey = map[string]*tenant.Key{"sk-a": {ID: "a", Tenant: "acme"}}

func TestAggregatesServersAndNotifiesChanges(t *testing.T) {
	a, b := newFakeServer(t), newFakeServer(t)
	g := newGateway(t)
	g.Set([]Server{{Name: "alpha", URL: a.url}, {Name: "beta", URL: b.url}})
	changed := make(chan struct{}, 10)
	s := connect(t, serveGateway(t, g, everyKey), "sk-a", &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	waitTools(t, s, []string{"alpha__echo", "alpha__stall", "beta__echo", "beta__stall"})

	res, err := s.CallTool(t.Context(), &mcp.CallToolParams{Name: "beta__echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, res); got != "echo: hi" {
		t.Errorf("result %q", got)
	}
	if a.calls.Load() != 0 || b.calls.Load() != 1 {
		t.Errorf("calls reaching alpha %d, beta %d; want 0, 1", a.calls.Load(), b.calls.Load())
	}
	pr, err := s.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: "alpha__greet"})
	if err != nil || len(pr.Messages) != 1 {
		t.Fatalf("prompt %+v, %v", pr, err)
	}
	for range len(changed) {
		<-changed
	}
	g.Set([]Server{{Name: "alpha", URL: a.url}})
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no tools/list_changed after a server went")
	}
	waitTools(t, s, []string{"alpha__echo", "alpha__stall"})
	if _, err := s.CallTool(t.Context(), &mcp.CallToolParams{Name: "beta__echo", Arguments: map[string]any{}}); err == nil || !strings.Contains(err.Error(), "unknown tool") {
		t.Errorf("a gone server's tool: %v, want unknown tool", err)
	}
}

func TestDescriptionsBounded(t *testing.T) {
	a := newFakeServer(t)
	g := newGateway(t)
	g.Set([]Server{{Name: "alpha", URL: a.url}})
	s := connect(t, serveGateway(t, g, everyKey), "sk-a", nil)
	waitTools(t, s, []string{"alpha__echo", "alpha__stall"})
	res, _ := s.ListTools(t.Context(), nil)
	for _, tl := range res.Tools {
		if len(tl.Description) > maxDescription {
			t.Errorf("%s: description of %d bytes, past %d", tl.Name, len(tl.Description), maxDescription)
		}
	}
}

func TestToolGlobs(t *testing.T) {
	a, b := newFakeServer(t), newFakeServer(t)
	g := newGateway(t)
	g.Set([]Server{{Name: "alpha", URL: a.url}, {Name: "beta", URL: b.url}})
	keys := map[string]*tenant.Key{
		"sk-all":   {ID: "all"},
		"sk-alpha": {ID: "alpha", Tools: []string{"alpha__*"}},
	}
	url := serveGateway(t, g, keys)
	waitTools(t, connect(t, url, "sk-all", nil), []string{"alpha__echo", "alpha__stall", "beta__echo", "beta__stall"})

	s := connect(t, url, "sk-alpha", nil)
	if got, want := toolNames(t, s), []string{"alpha__echo", "alpha__stall"}; !slices.Equal(got, want) {
		t.Errorf("tools = %q, want %q", got, want)
	}
	_, err := s.CallTool(t.Context(), &mcp.CallToolParams{Name: "beta__echo", Arguments: map[string]any{"text": "x"}})
	if err == nil || !strings.Contains(err.Error(), `unknown tool "beta__echo"`) {
		t.Errorf("call outside the globs: %v, want unknown tool", err)
	}
	if n := b.calls.Load(); n != 0 {
		t.Errorf("%d calls reached the server", n)
	}
	if _, err := s.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: "beta__greet"}); err == nil {
		t.Error("a prompt outside the globs answered")
	}
}

// A session opened with one key answers no other: the SDK binds it to
// the key's id.
func TestSessionBoundToKey(t *testing.T) {
	a := newFakeServer(t)
	g := newGateway(t)
	g.Set([]Server{{Name: "alpha", URL: a.url}})
	keys := map[string]*tenant.Key{"sk-1": {ID: "one"}, "sk-2": {ID: "two"}}
	url := serveGateway(t, g, keys)
	s := connect(t, url, "sk-1", nil)
	waitTools(t, s, []string{"alpha__echo", "alpha__stall"})

	body := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"alpha__echo","arguments":{"text":"x"}}}`
	for _, tt := range []struct {
		secret string
		want   int
	}{{"sk-2", http.StatusForbidden}, {"sk-1", http.StatusOK}} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tt.secret)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", s.ID())
		req.Header.Set("Mcp-Protocol-Version", s.InitializeResult().ProtocolVersion)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("%s resuming the session: %d, want %d", tt.secret, resp.StatusCode, tt.want)
		}
	}
	if n := a.calls.Load(); n != 1 {
		t.Errorf("%d calls reached the server, want the owner's one", n)
	}
	if len(s.ID()) < 20 {
		t.Errorf("session id %q is short enough to guess", s.ID())
	}
}

// A server that stalls holds its own calls alone: another server's calls
// are answered while the stalled one waits.
func TestStalledServerHoldsNoOther(t *testing.T) {
	a, b := newFakeServer(t), newFakeServer(t)
	g := newGateway(t)
	g.Set([]Server{{Name: "slow", URL: a.url}, {Name: "fast", URL: b.url}})
	s := connect(t, serveGateway(t, g, everyKey), "sk-a", nil)
	waitTools(t, s, []string{"fast__echo", "fast__stall", "slow__echo", "slow__stall"})

	stalled := make(chan error, 1)
	go func() {
		_, err := s.CallTool(t.Context(), &mcp.CallToolParams{Name: "slow__stall", Arguments: map[string]any{}})
		stalled <- err
	}()
	for a.calls.Load() == 0 {
		select {
		case err := <-stalled:
			t.Fatalf("the stalled call ended at once: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	for i := range 5 {
		res, err := s.CallTool(t.Context(), &mcp.CallToolParams{Name: "fast__echo", Arguments: map[string]any{"text": "x"}})
		if err != nil || text(t, res) != "echo: x" {
			t.Fatalf("call %d while another server stalls: %v", i, err)
		}
	}
	select {
	case err := <-stalled:
		t.Fatalf("the stalled call ended before its release: %v", err)
	default:
	}
	close(a.release)
	if err := <-stalled; err != nil {
		t.Fatal(err)
	}
}

// A call past the server's timeout fails with llmgw's error, and calls
// timing out in a row eject the server: its tools leave the list until
// it is connected again.
func TestTimeoutAndEjection(t *testing.T) {
	a := newFakeServer(t)
	g := newGateway(t)
	g.Set([]Server{{Name: "slow", URL: a.url, Timeout: 100 * time.Millisecond}})
	s := connect(t, serveGateway(t, g, everyKey), "sk-a", nil)
	waitTools(t, s, []string{"slow__echo", "slow__stall"})
	for range ejectAfter {
		_, err := s.CallTool(t.Context(), &mcp.CallToolParams{Name: "slow__stall", Arguments: map[string]any{}})
		if err == nil || !strings.Contains(err.Error(), `mcp server "slow" timed out`) {
			t.Fatalf("stalled call: %v, want a timeout", err)
		}
	}
	// Ejected, then connected again after its backoff.
	waitTools(t, s, nil)
	waitTools(t, s, []string{"slow__echo", "slow__stall"})
	if _, err := s.CallTool(t.Context(), &mcp.CallToolParams{Name: "slow__echo", Arguments: map[string]any{"text": "x"}}); err != nil {
		t.Fatal(err)
	}
}

// The caller's identity reaches a server that asks for it, in the header
// it names, and its configured headers go with every request.
func TestHeaders(t *testing.T) {
	a := newFakeServer(t)
	a.headers = make(chan http.Header, 100)
	g := newGateway(t)
	g.Set([]Server{{Name: "alpha", URL: a.url, IdentityHeader: "X-Caller", Headers: http.Header{"Authorization": {"Bearer upstream-secret"}}}})
	s := connect(t, serveGateway(t, g, everyKey), "sk-a", nil)
	waitTools(t, s, []string{"alpha__echo", "alpha__stall"})
	for len(a.headers) > 0 {
		<-a.headers
	}
	if _, err := s.CallTool(t.Context(), &mcp.CallToolParams{Name: "alpha__echo", Arguments: map[string]any{"text": "x"}}); err != nil {
		t.Fatal(err)
	}
	var found bool
	for len(a.headers) > 0 {
		h := <-a.headers
		if h.Get("Authorization") != "Bearer upstream-secret" {
			t.Errorf("Authorization %q", h.Get("Authorization"))
		}
		if h.Get("X-Caller") == "a acme" {
			found = true
		}
	}
	if !found {
		t.Error("no call carried the caller's identity")
	}
}

// recording keeps every ToolCall it observes.
type recording struct {
	mu    sync.Mutex
	calls []observe.ToolCall
}

func (r *recording) ObserveTool(c *observe.ToolCall) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, *c)
}

// Every tool call ends as one ToolCall, however it ended.
func TestEveryCallObservedOnce(t *testing.T) {
	a := newFakeServer(t)
	g := newGateway(t)
	rec := &recording{}
	g.SetObservers(Observers{List: observe.ToolObservers{rec}})
	g.Set([]Server{{Name: "alpha", URL: a.url, Timeout: 100 * time.Millisecond}})
	keys := map[string]*tenant.Key{"sk-a": {ID: "a", Tenant: "acme", Tools: []string{"alpha__*"}}}
	s := connect(t, serveGateway(t, g, keys), "sk-a", nil)
	waitTools(t, s, []string{"alpha__echo", "alpha__stall"})

	for _, name := range []string{"alpha__echo", "alpha__stall", "beta__echo", "alpha__echo"} {
		s.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{"text": "four"}})
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var got []string
	ids := map[string]bool{}
	for _, c := range rec.calls {
		got = append(got, c.Tool+" "+string(c.Status))
		ids[c.ID] = true
		if c.KeyID != "a" || c.Tenant != "acme" || c.Duration <= 0 {
			t.Errorf("call %+v", c)
		}
		if c.Status == observe.ToolOK && (c.BytesIn == 0 || c.BytesOut == 0 || c.Server != "alpha" || !c.Listed) {
			t.Errorf("an answered call %+v", c)
		}
	}
	want := []string{"alpha__echo ok", "alpha__stall timeout", "beta__echo refused", "alpha__echo ok"}
	if !slices.Equal(got, want) {
		t.Errorf("observed %q, want %q", got, want)
	}
	if len(ids) != len(want) {
		t.Errorf("%d ids for %d calls", len(ids), len(want))
	}
}

// A body past the model APIs' limit is refused with 413 and never
// decoded.
func TestBodyLimit(t *testing.T) {
	g := New(Options{MaxBodyBytes: 1 << 10})
	t.Cleanup(g.Close)
	url := serveGateway(t, g, everyKey)
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"pad":"` + strings.Repeat("x", 4<<10) + `"}}`
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer sk-a")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a body past the limit: %d, want 413", resp.StatusCode)
	}
}

// Resources are listed under their servers' names and read from the
// server that lists them; one outside the key's globs is neither.
func TestResources(t *testing.T) {
	a, b := newFakeServer(t), newFakeServer(t)
	g := newGateway(t)
	g.Set([]Server{{Name: "alpha", URL: a.url}, {Name: "beta", URL: b.url}})
	keys := map[string]*tenant.Key{"sk-a": {ID: "a", Tools: []string{"alpha__*"}}}
	s := connect(t, serveGateway(t, g, keys), "sk-a", nil)
	waitTools(t, s, []string{"alpha__echo", "alpha__stall"})
	var res *mcp.ListResourcesResult
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var err error
		if res, err = s.ListResources(t.Context(), nil); err != nil {
			t.Fatal(err)
		}
		if len(res.Resources) > 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(res.Resources) != 1 || res.Resources[0].Name != "alpha__note" || res.Resources[0].URI != a.uri {
		t.Fatalf("resources %+v", res.Resources)
	}
	got, err := s.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: a.uri})
	if err != nil || len(got.Contents) != 1 || got.Contents[0].Text != "a note" {
		t.Fatalf("read %+v, %v", got, err)
	}
	if _, err := s.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: b.uri}); err == nil {
		t.Error("a resource outside the key's globs was read")
	}
	if n := b.calls.Load(); n != 0 {
		t.Errorf("%d reads reached the other server", n)
	}
}
