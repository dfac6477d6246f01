package app

import (
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gitea.mynodes.xyz/ilker/llmgw/internal/cloudtest"
)

// TestGeminiKeyFile: a gemini pool's key is read from api_key_file at
// start and on each reload; a reload whose file is gone is refused and
// the key in service kept; the key is never logged.
func TestGeminiKeyFile(t *testing.T) {
	up := &cloudtest.Google{T: t}
	s := httptest.NewServer(up)
	defer s.Close()
	dir := t.TempDir()
	keyFile, path := filepath.Join(dir, "gemini-key"), filepath.Join(dir, "llmgw.yaml")
	const wrongKey = "gemini-wrong-key"
	writeKey := func(key string) {
		t.Helper()
		if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeKey(wrongKey)
	yaml := fmt.Sprintf(`server: {listen: "127.0.0.1:0", admin_listen: "127.0.0.1:0"}
router: {auth: none}
store: {url: "memory:"}
pools:
  - {name: gemini, kind: gemini, api_key_file: %q, endpoints: [{url: %q}]}
models:
  - {name: m, pool: gemini, upstream_model: gemini-2.5-pro}
`, keyFile, s.URL+"/v1")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	g, logs := startFile(t, path, nil)
	ask := func() (int, string) {
		return post(t, g.URL()+"/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, nil)
	}
	if code, body := ask(); code != 502 || !strings.Contains(body, "refused the gateway's credentials") {
		t.Errorf("with the file's wrong key: %d %s; want 502", code, body)
	}

	writeKey(cloudtest.GeminiKey)
	if err := g.reload(); err != nil {
		t.Fatal(err)
	}
	if code, body := ask(); code != 200 || !strings.Contains(body, "Hi from Gemini.") {
		t.Errorf("after a reload with the right key in the file: %d %s", code, body)
	}

	os.Remove(keyFile)
	if err := g.reload(); err == nil || !strings.Contains(err.Error(), `pool "gemini": api_key_file`) {
		t.Errorf("reload with the key file gone: %v; want it refused naming api_key_file", err)
	}
	if code, body := ask(); code != 200 {
		t.Errorf("after a refused reload the key in service is gone: %d %s", code, body)
	}
	if l := logs.String(); strings.Contains(l, cloudtest.GeminiKey) || strings.Contains(l, wrongKey) {
		t.Errorf("a key is in the log:\n%s", l)
	}
}
