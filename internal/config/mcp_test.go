package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A server's references are read when the file is: an unset variable or
// an unread file is a problem naming its field, never its value.
func TestMCPResolve(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	os.WriteFile(file, []byte("  file-secret\n"), 0o600)
	env := map[string]string{"AUTH": "Bearer env-secret", "TOK": "t", "PATH": "/bin", "HOME": "/home/x"}
	m := MCP{AllowStdio: true, Servers: []MCPServer{
		{Name: "a", URL: "http://a/mcp", HeadersEnv: map[string]string{"Authorization": "AUTH"}, HeadersFile: map[string]string{"X-Token": file}},
		{Name: "b", Command: []string{"srv"}, EnvFrom: map[string]string{"GITHUB_TOKEN": "TOK"}},
	}}
	got, err := m.Resolve(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"Authorization": "Bearer env-secret", "X-Token": "file-secret"}, got[0].Headers); diff != "" {
		t.Error(diff)
	}
	if diff := cmp.Diff([]string{"PATH=/bin", "HOME=/home/x", "GITHUB_TOKEN=t"}, got[1].Env); diff != "" {
		t.Error(diff)
	}

	m.Servers[0].HeadersEnv["Authorization"] = "UNSET"
	m.Servers[0].HeadersFile["X-Token"] = filepath.Join(t.TempDir(), "missing")
	_, err = m.Resolve(func(k string) string { return env[k] })
	if err == nil || !strings.Contains(err.Error(), "mcp.servers[0].headers_env.Authorization: environment variable UNSET is not set") ||
		!strings.Contains(err.Error(), "mcp.servers[0].headers_file.X-Token: reading") {
		t.Errorf("error %v", err)
	}
	if strings.Contains(err.Error(), "secret") {
		t.Errorf("error shows a credential: %v", err)
	}
}
