package app

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/router/extproc"
	"gitea.mynodes.xyz/ilker/llmgw/internal/sim"
)

// writeEndpoints writes an endpoints file in llm-d's file-discovery
// shape, written then renamed over, naming the given host:port.
func writeEndpoints(t *testing.T, path string, hosts ...string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("endpoints:\n")
	for i, h := range hosts {
		addr, port, _ := net.SplitHostPort(h)
		fmt.Fprintf(&b, "  - name: sim-%d\n    namespace: default\n    address: %q\n    port: %q\n    labels: {role: decode}\n", i, addr, port)
	}
	writeRenamed(t, path, b.String())
}

func writeRenamed(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// TestEPPDiscoveryFile: the EPP picks among the endpoints of a file in
// llm-d's file-discovery shape; a rewritten file moves the picks to its
// endpoints, and a bad one is refused with the last good one's kept.
func TestEPPDiscoveryFile(t *testing.T) {
	ctx := t.Context()
	replicas, err := sim.StartReplicas(ctx, sim.Config{Model: "chat", FixedTiming: true, TTFT: time.Millisecond, TPOT: time.Millisecond}, 2, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var hosts []string
	for _, r := range replicas {
		hosts = append(hosts, strings.TrimSuffix(strings.TrimPrefix(r.URL(), "http://"), "/v1"))
		t.Cleanup(r.Close)
	}
	dir := t.TempDir()
	endpoints, cfgPath := filepath.Join(dir, "endpoints.yaml"), filepath.Join(dir, "llmgw.yaml")
	writeEndpoints(t, endpoints, hosts[0])
	writeRenamed(t, cfgPath, fmt.Sprintf(`server: {listen: "127.0.0.1:0", admin_listen: "127.0.0.1:0"}
router: {auth: none}
store: {url: "memory:"}
epp: {listen: "127.0.0.1:0", discovery_file: %q, discovery_pool: sim}
pools:
  - name: sim
    kind: vllm
models:
  - {name: chat, pool: sim}
`, endpoints))
	g, logs := startFile(t, cfgPath, nil)
	c, err := extproc.Dial(g.EPPAddr(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	picked := func() string {
		t.Helper()
		a, err := c.Ask(ctx, extproc.Request{Path: "/v1/chat/completions", Body: []byte(`{"model":"chat","messages":[{"role":"user","content":"hi"}]}`)}, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		a.Done(200, a.Endpoints[0])
		return strings.Join(a.Endpoints, ",")
	}
	for range 3 {
		if got := picked(); got != hosts[0] {
			t.Fatalf("picked %q, want the file's only endpoint %s", got, hosts[0])
		}
	}

	// Rewritten: the picks move to the new endpoint. The watcher starts
	// in Run's goroutine, so the file is written again until one write
	// lands after the watch began.
	deadline := time.Now().Add(10 * time.Second)
	for next := time.Now(); picked() != hosts[1]; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the picks did not move to the rewritten file's endpoint:\n%s", logs.String())
		}
		if time.Now().After(next) {
			writeEndpoints(t, endpoints, hosts[1])
			next = time.Now().Add(500 * time.Millisecond)
		}
	}
	// The catalog is swapped before the line is written.
	waitFor(t, "the file's read logged", func() bool { return strings.Contains(logs.String(), "endpoints file read") })

	// A bad file (a hostname where llm-d's shape has an IPv4 address) is
	// refused, naming the entry; the last good one's endpoint serves on.
	writeRenamed(t, endpoints, "endpoints:\n  - {name: a, address: vllm.local, port: \"8000\"}\n")
	waitFor(t, "the bad file refused", func() bool { return strings.Contains(logs.String(), "endpoints file refused") })
	if !strings.Contains(logs.String(), "endpoints[0].address") {
		t.Errorf("the refusal does not name the entry:\n%s", logs.String())
	}
	for range 3 {
		if got := picked(); got != hosts[1] {
			t.Fatalf("picked %q after a bad file, want the last good one's %s", got, hosts[1])
		}
	}

	// A reload of the configuration keeps the file's endpoints.
	if err := g.reload(); err != nil {
		t.Fatal(err)
	}
	if got := picked(); got != hosts[1] {
		t.Fatalf("picked %q after a reload, want the file's %s", got, hosts[1])
	}
}
