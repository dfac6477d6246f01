package app

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Codex CLI goes through the Responses API with the recipe in
// docs/CLIENTS.md, through a whole tool loop: its first request offers namespaced and
// custom tools and web search, asks for reasoning summaries and sends a
// prompt_cache_key; the backend's call of exec_command reaches Codex as
// a function_call it runs, and the command's output comes back as a
// function_call_output. Codex streams every request.
func TestCodexToolLoop(t *testing.T) {
	g := startAgentGateway(t, "vllm")
	out := runCodex(t, g)
	g.checkToolLoop(t, out)
	t.Logf("the backend was asked:\n%s", g.backend.log())
	g.backend.mu.Lock()
	defer g.backend.mu.Unlock()
	for _, c := range g.backend.calls {
		if !c.Stream {
			t.Errorf("a call not streamed: %+v", c)
		}
		for _, tool := range c.Tools {
			if tool == "web_search" || strings.Contains(tool, ".") {
				t.Errorf("offered %q: %v", tool, c.Tools)
			}
		}
	}
}

// Codex CLI on a model its catalog runs in code mode (gpt-6.1-sol): its
// tools come in an additional_tools input item, its shell and patch tools
// nested in functions.exec, a custom tool of a namespace taking
// JavaScript; reasoning summaries are on. The backend's reasoning reaches
// Codex as the summary it prints; its call of functions__exec reaches
// Codex as the custom tool call it runs, which applies a patch and runs a
// command; and the call's output comes back as the tool's result.
func TestCodexCodeModeToolLoop(t *testing.T) {
	bin := agentBin(t, "codex")
	script, url := startChatScript(t)
	g := startScriptedGateway(t, url, io.Discard)
	const js = `const r = await tools.apply_patch("*** Begin Patch\n*** Add File: hello.txt\n+hello from llmgw\n*** End Patch\n");
text(JSON.stringify(r));
const o = await tools.exec_command({cmd: "cat hello.txt"});
text(JSON.stringify(o));`
	const reasoning, answer = "I should create the file with a patch.", "Created hello.txt."
	script.set(scriptAnswer{reasoning: reasoning, calls: []scriptCall{{"call_1", "functions__exec", customArgs(js)}},
		then: &scriptAnswer{text: answer}})
	codexHome, dir := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(codexHome, "config.toml"), fmt.Sprintf(`model = "gpt-6.1-sol"
model_provider = "llmgw"
model_reasoning_effort = "high"
model_reasoning_summary = "auto"

[model_providers.llmgw]
name = "llmgw"
base_url = %q
wire_api = "responses"
env_key = "LLMGW_API_KEY"
`, g.URL()))
	out := runAgent(t, dir, []string{"CODEX_HOME=" + codexHome, "LLMGW_API_KEY=unused"},
		bin, "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "Create hello.txt")
	t.Logf("the agent's output:\n%s", out)
	if data, err := os.ReadFile(filepath.Join(dir, "hello.txt")); err != nil || string(data) != "hello from llmgw\n" {
		t.Errorf("hello.txt: %q, %v", data, err)
	}
	if !strings.Contains(out, reasoning) || !strings.Contains(out, answer) {
		t.Errorf("the reasoning summary %q or the answer %q is not in what Codex wrote", reasoning, answer)
	}
	script.mu.Lock()
	defer script.mu.Unlock()
	if len(script.bodies) != 2 {
		t.Fatalf("the backend was asked %d times", len(script.bodies))
	}
	first, second := decodeSent(t, script.bodies[0]), decodeSent(t, script.bodies[1])
	offered := false
	for _, tl := range first.Tools {
		offered = offered || tl.Function.Name == "functions__exec"
	}
	last := second.Messages[len(second.Messages)-1]
	if !offered || last.Role != "tool" || last.ToolCallID != "call_1" || !strings.Contains(string(last.Content), "hello from llmgw") {
		t.Errorf("offered functions__exec: %v; the second request ends with %+v", offered, last)
	}
}
