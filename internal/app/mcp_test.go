package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/keys"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
)

// mcpUpstream is an MCP server made with the go-sdk, over Streamable
// HTTP on a real listener; calls counts the tool calls that reach it.
type mcpUpstream struct {
	url   string
	calls atomic.Int64
}

func startMCPUpstream(t *testing.T) *mcpUpstream {
	t.Helper()
	u := &mcpUpstream{}
	s := mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "1"}, nil)
	type args struct {
		Text string `json:"text,omitempty"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, a args) (*mcp.CallToolResult, any, error) {
		u.calls.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + a.Text}}}, nil, nil
	})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(hs.Close)
	u.url = hs.URL
	return u
}

// headerKey sends a key in one header with every request.
type headerKey struct{ name, value string }

func (h headerKey) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.name, h.value)
	return http.DefaultTransport.RoundTrip(r)
}

// mcpURL is the gateway's /mcp.
func mcpURL(g *Gateway) string { return strings.TrimSuffix(g.URL(), "/v1") + "/mcp" }

func mcpConnect(t *testing.T, g *Gateway, auth headerKey, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, opts)
	s, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: mcpURL(g), HTTPClient: &http.Client{Transport: auth}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// waitMCPTools waits until s is shown want.
func waitMCPTools(t *testing.T, s *mcp.ClientSession, want ...string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		res, err := s.ListTools(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, tl := range res.Tools {
			got = append(got, tl.Name)
		}
		slices.Sort(got)
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("tools %q, want %q", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The go-sdk's client through llmgw's /mcp on its API listener, over real
// sockets: authenticated by the same keys as the model APIs, Bearer or
// x-api-key, the configured server's tools under its name.
func TestMCPThroughTheGateway(t *testing.T) {
	up := startMCPUpstream(t)
	g := startKeyed(t, fmt.Sprintf("mcp:\n  servers: [{name: up, url: %q}]\n", up.url))
	key, _ := g.newKey(t, keys.Spec{Tenant: "acme/search"})

	resp, err := http.Post(mcpURL(g.Gateway), "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without a key: %d, want 401", resp.StatusCode)
	}

	for _, auth := range []headerKey{{"Authorization", "Bearer " + key}, {"x-api-key", key}} {
		s := mcpConnect(t, g.Gateway, auth, nil)
		waitMCPTools(t, s, "up__echo")
		res, err := s.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__echo", Arguments: map[string]any{"text": "hi"}})
		if err != nil {
			t.Fatalf("%s: %v", auth.name, err)
		}
		if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Text != "echo: hi" {
			t.Errorf("%s: result %+v", auth.name, res.Content[0])
		}
	}
	if n := up.calls.Load(); n != 2 {
		t.Errorf("%d calls reached the server, want 2", n)
	}
}

// A key's tool globs, set through the admin API beside its model globs,
// decide what it is shown and may call: a tool outside them is refused
// with MCP's own error for an unknown tool, and its call never reaches the
// server.
func TestMCPToolGlobs(t *testing.T) {
	up, other := startMCPUpstream(t), startMCPUpstream(t)
	g := startKeyed(t, fmt.Sprintf("admin: {token: %s}\nmcp:\n  servers: [{name: up, url: %q}, {name: other, url: %q}]\n", adminTestToken, up.url, other.url))

	req, _ := http.NewRequest(http.MethodPost, g.AdminURL()+"/admin/keys", strings.NewReader(`{"tenant":"acme/search","tools":["up__*"]}`))
	req.Header.Set("Authorization", "Bearer "+adminTestToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var created struct {
		Key   string   `json:"key"`
		Tools []string `json:"tools"`
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		t.Fatalf("creating the key: %d %s", resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, &created); err != nil || created.Key == "" || !slices.Equal(created.Tools, []string{"up__*"}) {
		t.Fatalf("created %s: %v", b, err)
	}
	all, _ := g.newKey(t, keys.Spec{Tenant: "acme/search"})
	waitMCPTools(t, mcpConnect(t, g.Gateway, headerKey{"x-api-key", all}, nil), "other__echo", "up__echo")

	s := mcpConnect(t, g.Gateway, headerKey{"x-api-key", created.Key}, nil)
	waitMCPTools(t, s, "up__echo")
	_, err = s.CallTool(t.Context(), &mcp.CallToolParams{Name: "other__echo", Arguments: map[string]any{"text": "x"}})
	if err == nil || !strings.Contains(err.Error(), `unknown tool "other__echo"`) {
		t.Errorf("a call outside the key's globs: %v", err)
	}
	if n := other.calls.Load(); n != 0 {
		t.Errorf("%d calls reached the server", n)
	}
}

// A key's tool calls a minute hold across two gateways on one Redis: its
// calls, alternating between them, are refused past the limit with MCP's
// error, and a refused call reaches no server.
func TestMCPToolLimitsAcrossGateways(t *testing.T) {
	redisURL := testRedisURL(t)
	up := startMCPUpstream(t)
	storeURL := "sqlite:" + filepath.Join(t.TempDir(), "gw.db")
	extra := fmt.Sprintf("limits: {redis: %q}\nmcp:\n  servers: [{name: up, url: %q}]\n", redisURL, up.url)
	var gws []*keyedGateway
	for range 2 {
		cfg := strings.Replace(keyedConfig("http://127.0.0.1:9/v1", storeURL, extra), "store: {url: ", fmt.Sprintf("store: {spool_dir: %q, url: ", t.TempDir()), 1)
		gws = append(gws, &keyedGateway{Gateway: startYAML(t, cfg)})
	}
	key, _ := gws[0].newKey(t, keys.Spec{Tenant: "mcp/" + randomName(t), ToolRPM: 3})
	var sessions []*mcp.ClientSession
	for _, g := range gws {
		s := mcpConnect(t, g.Gateway, headerKey{"Authorization", "Bearer " + key}, nil)
		waitMCPTools(t, s, "up__echo")
		sessions = append(sessions, s)
	}
	for i := range 4 {
		_, err := sessions[i%2].CallTool(t.Context(), &mcp.CallToolParams{Name: "up__echo", Arguments: map[string]any{"text": "x"}})
		switch {
		case i < 3 && err != nil:
			t.Fatalf("call %d of 3 a minute: %v", i+1, err)
		case i == 3 && (err == nil || !strings.Contains(err.Error(), "rate limit exceeded")):
			t.Fatalf("call 4 of 3 a minute: %v, want refused", err)
		}
	}
	if n := up.calls.Load(); n != 3 {
		t.Errorf("%d calls reached the server, want 3", n)
	}
}

// Every tool call is one ledger record, whatever came of it, with its
// key, tenant, server, tool, status, duration and bytes; `llmgw usage`
// sums them by tool, and the metrics count them by server and tool.
func TestMCPEveryCallInTheLedgerOnce(t *testing.T) {
	up := startMCPUpstream(t)
	g := startKeyed(t, fmt.Sprintf("mcp:\n  servers: [{name: up, url: %q}]\n", up.url))
	key, id := g.newKey(t, keys.Spec{Tenant: "acme/tools", Tools: []string{"up__*"}})
	s := mcpConnect(t, g.Gateway, headerKey{"Authorization", "Bearer " + key}, nil)
	waitMCPTools(t, s, "up__echo")
	const answered, refused = 5, 2
	for range answered {
		if _, err := s.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__echo", Arguments: map[string]any{"text": "ledger"}}); err != nil {
			t.Fatal(err)
		}
	}
	for range refused {
		s.CallTool(t.Context(), &mcp.CallToolParams{Name: "elsewhere__tool", Arguments: map[string]any{}})
	}
	var recs []usage.Record
	waitUntil(t, "the ledger to hold every call", func() bool {
		var err error
		recs, err = g.store.Records(t.Context(), usage.RecordQuery{KeyID: id})
		return err == nil && len(recs) >= answered+refused
	})
	time.Sleep(200 * time.Millisecond) // time for a duplicate to land, were there one
	recs, _ = g.store.Records(t.Context(), usage.RecordQuery{KeyID: id})
	seen := map[string]bool{}
	byStatus := map[int]int{}
	for _, r := range recs {
		if seen[r.ID] {
			t.Errorf("record %s twice", r.ID)
		}
		seen[r.ID] = true
		byStatus[r.Status]++
		if r.Kind != usage.KindTool || r.Tenant != "acme/tools" || r.Duration <= 0 || r.BytesIn == 0 {
			t.Errorf("record %+v", r)
		}
		if r.Status == http.StatusOK && (r.Model != "up__echo" || r.Pool != "up" || r.BytesOut == 0) {
			t.Errorf("an answered call's record %+v", r)
		}
	}
	if len(recs) != answered+refused || byStatus[http.StatusOK] != answered || byStatus[http.StatusNotFound] != refused {
		t.Errorf("%d records by status %v, want %d answered and %d refused", len(recs), byStatus, answered, refused)
	}
	rows, err := g.store.Usage(t.Context(), usage.Query{KeyID: id, By: usage.ByModel})
	if err != nil {
		t.Fatal(err)
	}
	var echo int64
	for _, r := range rows {
		if r.Group == "up__echo" {
			echo = r.Requests
		}
	}
	if echo != answered {
		t.Errorf("usage by model %+v: up__echo %d, want %d", rows, echo, answered)
	}
	if n := counter(t, g.Gateway, "llmgw_mcp_tool_calls_total", "tool", "up__echo"); n != answered {
		t.Errorf("llmgw_mcp_tool_calls_total for up__echo: %v, want %d", n, answered)
	}
	if n := counter(t, g.Gateway, "llmgw_mcp_tool_calls_total", "status", "refused"); n != refused {
		t.Errorf("refused calls counted %v, want %d", n, refused)
	}
}

// A reload puts a change of mcp.servers in service: a server added is
// connected and every session is told its tool list changed; a file that
// does not validate changes nothing.
func TestMCPReload(t *testing.T) {
	a, b := startMCPUpstream(t), startMCPUpstream(t)
	path := filepath.Join(t.TempDir(), "llmgw.yaml")
	write := func(servers string) {
		t.Helper()
		yaml := fmt.Sprintf(reloadConfig, "http://127.0.0.1:9/v1", "  - {name: m, pool: sim}\n") + "mcp:\n  servers: " + servers + "\n"
		if err := os.WriteFile(path+".tmp", []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	write(fmt.Sprintf("[{name: a, url: %q}]", a.url))
	g, _ := startFile(t, path, nil)
	changed := make(chan struct{}, 10)
	s := mcpConnect(t, g, headerKey{"X-Unused", "-"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	waitMCPTools(t, s, "a__echo")

	write(fmt.Sprintf("[{name: a, url: %q}, {name: b, command: [x]}]", a.url))
	if err := g.reload(); err == nil || !strings.Contains(err.Error(), "mcp.servers[1].command: needs mcp.allow_stdio: true") {
		t.Errorf("reload of a command without allow_stdio: %v", err)
	}
	for len(changed) > 0 {
		<-changed
	}
	write(fmt.Sprintf("[{name: a, url: %q}, {name: b, url: %q}]", a.url, b.url))
	if err := g.reload(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no tools/list_changed after a reload added a server")
	}
	waitMCPTools(t, s, "a__echo", "b__echo")
}
