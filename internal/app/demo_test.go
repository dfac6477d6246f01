package app

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/tokenize"
)

// startDemoCommand runs `llmgw serve` with neither a file nor upstreams,
// the demo, on loopback ports until the test ends, and returns its API
// base URL.
func startDemoCommand(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- ServeCommand(ctx, []string{"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"}, w, io.Discard)
		w.Close()
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("llmgw serve: %v", err)
		}
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			// llmgw: OpenAI API on URL, metrics and admin on URL
			if f := strings.Fields(sc.Text()); len(f) == 10 && f[1] == "OpenAI" {
				found <- strings.TrimSuffix(f[4], ",")
			}
		}
	}()
	select {
	case u := <-found:
		return u
	case err := <-done:
		t.Fatalf("llmgw serve ended: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the demo did not start")
	}
	return ""
}

// TestDemoServesAnAgentsRequest sends the demo, as `llmgw serve` starts
// it, a coding agent's default request: Claude Code's, its prompt grown
// past 20,000 tokens, asking for up to 32,000 more. The demo streams an
// answer: its first text arrives.
func TestDemoServesAnAgentsRequest(t *testing.T) {
	base := strings.TrimSuffix(startDemoCommand(t), "/v1")
	path, header, captured := claudeCodeRequest(t)
	var body map[string]any
	if err := json.Unmarshal(captured, &body); err != nil {
		t.Fatal(err)
	}
	const line = "The gateway sends each request to the replica that will answer it first. "
	long := strings.Repeat(line, 20000/tokenize.Count(line)+1)
	turn := body["messages"].([]any)[0].(map[string]any)
	turn["content"] = append(turn["content"].([]any), map[string]any{"type": "text", "text": long})
	body["model"] = demoModel
	if body["max_tokens"] != 32000.0 || body["stream"] != true {
		t.Fatalf("the captured request asks for max_tokens %v, stream %v", body["max_tokens"], body["stream"])
	}
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+path, strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		answer, _ := io.ReadAll(resp.Body)
		t.Fatalf("%d %s", resp.StatusCode, answer)
	}
	// Read until the first text; the rest, up to 32,000 tokens, is left
	// unread, and the demo's backend stops when the gateway goes.
	sc := bufio.NewScanner(resp.Body)
	var kinds []string
	for sc.Scan() {
		kind, ok := strings.CutPrefix(sc.Text(), "event: ")
		if !ok {
			continue
		}
		kinds = append(kinds, kind)
		if kind == "content_block_delta" {
			break
		}
	}
	if want := []string{"message_start", "ping", "content_block_start", "content_block_delta"}; strings.Join(kinds, " ") != strings.Join(want, " ") {
		t.Errorf("events %v, want %v", kinds, want)
	}
}
