package app

// Real MCP servers from npm behind llmgw: the reference "everything"
// server over Streamable HTTP and the filesystem server started by the
// gateway over stdio, at the versions testdata/mcpservers pins.

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/keys"
)

// mcpServerBin is the path of an MCP server's command installed under
// testdata/mcpservers, or skips the test when it is not installed (fails,
// with LLMGW_TEST_MCP_SERVERS set, as .ci/run sets it).
func mcpServerBin(t *testing.T, name string) string {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("testdata", "mcpservers", "node_modules", ".bin", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		msg := fmt.Sprintf("%s is not installed: npm install --prefix internal/app/testdata/mcpservers installs it", name)
		if os.Getenv("LLMGW_TEST_MCP_SERVERS") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return path
}

// startEverything starts the everything server over Streamable HTTP on a
// free port and gives its URL once it listens.
func startEverything(t *testing.T) string {
	t.Helper()
	bin := mcpServerBin(t, "mcp-server-everything")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.CommandContext(t.Context(), bin, "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return "http://" + addr + "/mcp"
		}
		if time.Now().After(deadline) {
			t.Fatal("the everything server did not listen within 30s")
		}
	}
}

func TestMCPRealServers(t *testing.T) {
	everything := startEverything(t)
	fsBin := mcpServerBin(t, "mcp-server-filesystem")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hello from the filesystem server"), 0o644); err != nil {
		t.Fatal(err)
	}
	g := startKeyed(t, fmt.Sprintf("mcp:\n  allow_stdio: true\n  servers:\n    - {name: everything, url: %q}\n    - {name: fs, command: [%q, %q]}\n", everything, fsBin, dir))
	all, _ := g.newKey(t, keys.Spec{Tenant: "acme/search"})
	fsOnly, _ := g.newKey(t, keys.Spec{Tenant: "acme/search", Tools: []string{"fs__*"}})

	s := mcpConnect(t, g.Gateway, headerKey{"Authorization", "Bearer " + all}, nil)
	names := waitMCPToolsWith(t, s, "everything__echo", "fs__read_text_file")
	for _, n := range names {
		if !strings.HasPrefix(n, "everything__") && !strings.HasPrefix(n, "fs__") {
			t.Errorf("tool %q is not under a server's name", n)
		}
	}
	res, err := s.CallTool(t.Context(), &mcp.CallToolParams{Name: "everything__echo", Arguments: map[string]any{"message": "through llmgw"}})
	if err != nil {
		t.Fatal(err)
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Text != "Echo: through llmgw" {
		t.Errorf("echo: %+v", res.Content[0])
	}
	res, err = s.CallTool(t.Context(), &mcp.CallToolParams{Name: "fs__read_text_file", Arguments: map[string]any{"path": filepath.Join(dir, "hello.txt")}})
	if err != nil {
		t.Fatal(err)
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); !ok || !strings.Contains(tc.Text, "hello from the filesystem server") {
		t.Errorf("read_text_file: %+v", res.Content[0])
	}
	prompts, err := s.ListPrompts(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range prompts.Prompts {
		if !strings.HasPrefix(p.Name, "everything__") {
			t.Errorf("prompt %q is not under its server's name", p.Name)
		}
	}

	f := mcpConnect(t, g.Gateway, headerKey{"x-api-key", fsOnly}, nil)
	for _, n := range waitMCPToolsWith(t, f, "fs__read_text_file") {
		if !strings.HasPrefix(n, "fs__") {
			t.Errorf("a key of fs__* is shown %q", n)
		}
	}
	if _, err := f.CallTool(t.Context(), &mcp.CallToolParams{Name: "everything__echo", Arguments: map[string]any{"message": "x"}}); err == nil || !strings.Contains(err.Error(), "unknown tool") {
		t.Errorf("a call outside the key's globs: %v", err)
	}
}

// waitMCPToolsWith waits until s is shown every one of want, and gives
// every name it is shown.
func waitMCPToolsWith(t *testing.T, s *mcp.ClientSession, want ...string) []string {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		res, err := s.ListTools(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		have := map[string]bool{}
		for _, tl := range res.Tools {
			got = append(got, tl.Name)
			have[tl.Name] = true
		}
		missing := false
		for _, w := range want {
			missing = missing || !have[w]
		}
		if !missing {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("tools %q, want %q among them", got, want)
		}
	}
}
