package app

// The coding agents users point at llmgw, run as they ship: installed from
// npm at the versions pinned in testdata/agents (npm ci --prefix
// internal/app/testdata/agents; .ci/run does it), headless, against the
// gateway in front of a scripted chat backend, through a whole tool loop:
// the backend asks for the agent's shell tool, the agent runs the command
// and sends its output back, and the final answer quotes it. Without the
// agents installed the tests skip, unless LLMGW_TEST_AGENTS is set, as
// .ci/run sets it, when they fail.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/cloudtest"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/keys"
)

// agentCommand is what the backend asks every agent to run, and
// agentOutput what it prints: the output appears nowhere in the command, so
// an answer that quotes it shows the command ran.
const (
	agentCommand = `printf 'llmgw-agent-%s\n' "$((6*7))"`
	agentOutput  = "llmgw-agent-42"
	agentPrompt  = "Run this shell command and tell me exactly what it printed: " + agentCommand
	agentAnswer  = "The command printed " + agentOutput + "."
	agentModel   = "agent-model"
	// agentTask is how the backend knows the task in a user's message,
	// however the agent quotes the prompt.
	agentTask = "llmgw-agent-%s"
)

// agentTimeout bounds one agent's whole run: a handful of model calls to a
// backend that answers at once, and one short command.
const agentTimeout = 3 * time.Minute

// agentBin is the path of an agent's command installed under
// testdata/agents, or skips the test when it is not installed (fails, with
// LLMGW_TEST_AGENTS set).
func agentBin(t *testing.T, name string) string {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("testdata", "agents", "node_modules", ".bin", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		msg := fmt.Sprintf("%s is not installed: npm install --prefix internal/app/testdata/agents installs the agents", name)
		if os.Getenv("LLMGW_TEST_AGENTS") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return path
}

// scriptedChat is a chat completions backend that drives an agent through
// one tool loop, whatever the agent: offered a shell tool with the task
// in the conversation, it asks for agentCommand; given the command's
// output as a tool result, it answers quoting it; asked anything else (an
// agent's titles, summaries, checks), it answers a short text. It answers
// streamed or not, as asked.
type scriptedChat struct {
	mu    sync.Mutex
	calls []scriptedCall // every chat request, in order
	// cutStreams, when set, breaks every streamed answer after its first
	// chunk, as a backend that dies mid-answer does; whole answers are
	// given as ever.
	cutStreams bool
	// loop is the tool loop the backend drives; nil is shellLoop.
	loop *toolLoop
}

// toolLoop is one tool loop the scripted backend drives: given task in a
// user's message, it asks for the tool pick names, from the tools offered
// and the conversation so far; given output in a tool's result, it
// answers answer.
type toolLoop struct {
	task, output, answer string
	pick                 func(offered []string, msgs []cloudtest.Message) (tool string, args any) // "" for none
}

// shellLoop asks for the agent's shell tool to run agentCommand.
var shellLoop = &toolLoop{task: agentTask, output: agentOutput, answer: agentAnswer,
	pick: func(offered []string, _ []cloudtest.Message) (string, any) {
		for _, tool := range offered {
			if f := shellTools[tool]; f != nil {
				return tool, f(agentCommand)
			}
		}
		return "", nil
	}}

// driving is the loop the backend drives.
func (s *scriptedChat) driving() *toolLoop {
	if s.loop == nil {
		return shellLoop
	}
	return s.loop
}

// scriptedCall is what one request asked and how it was answered.
type scriptedCall struct {
	Model    string
	Stream   bool
	Tools    []string // the functions offered, by name
	Answered string   // "tool_call", "final", "text", or "cut" for a broken stream
}

// shellTools are the agents' shell tools, by name, and the arguments each
// takes for a command.
var shellTools = map[string]func(cmd string) any{
	"Bash":         func(cmd string) any { return map[string]string{"command": cmd, "description": "Print the check value"} }, // Claude Code
	"bash":         func(cmd string) any { return map[string]string{"command": cmd, "description": "Print the check value"} }, // opencode
	"exec_command": func(cmd string) any { return map[string]string{"cmd": cmd} },                                             // Codex CLI
	"shell":        func(cmd string) any { return map[string][]string{"command": {"bash", "-lc", cmd}} },                      // Codex CLI, older
}

// chatMessage is as much of a chat request's message as the script reads.
type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// text is a message's text: its string, or its text parts joined.
func (m chatMessage) text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Type, Text string
	}
	json.Unmarshal(m.Content, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

func (s *scriptedChat) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" {
		return // health checks and scrapes
	}
	var req struct {
		Model    string        `json:"model"`
		Stream   bool          `json:"stream"`
		Messages []chatMessage `json:"messages"`
		Tools    []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	call := scriptedCall{Model: req.Model, Stream: req.Stream}
	s.mu.Lock()
	cut := s.cutStreams && req.Stream
	if cut {
		call.Answered = "cut"
		s.calls = append(s.calls, call)
	}
	s.mu.Unlock()
	if cut {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"id":"chatcmpl-cut","object":"chat.completion.chunk","created":1,"model":"x","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`+"\n\n")
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // the connection is cut, with no end to the stream
	}
	tools := make([]string, 0, len(req.Tools))
	for _, t := range req.Tools {
		tools = append(tools, t.Function.Name)
	}
	msgs := make([]cloudtest.Message, 0, len(req.Messages))
	for _, m := range req.Messages {
		msgs = append(msgs, cloudtest.Message{Role: m.Role, Text: m.text()})
	}
	a, n := s.decide(call, tools, msgs)
	a.id = fmt.Sprintf("chatcmpl-%d", n)
	a.model = req.Model
	if req.Stream {
		a.stream(w)
	} else {
		a.whole(w)
	}
}

// decide is the script's answer to a call offering tools, with msgs
// its conversation: the loop's tool when its task is asked and the tool
// offered, the final answer once the tool's output is back, else a short
// text. It records the call, and returns the answer and the
// call's number.
func (s *scriptedChat) decide(call scriptedCall, tools []string, msgs []cloudtest.Message) (scriptedAnswer, int) {
	call.Tools = tools
	loop := s.driving()
	tool, toolArgs := loop.pick(tools, msgs)
	var ran, asked bool
	for _, m := range msgs {
		switch {
		case m.Role == "tool" && strings.Contains(m.Text, loop.output):
			ran = true
		case m.Role == "user" && strings.Contains(m.Text, loop.task):
			asked = true
		}
	}
	var a scriptedAnswer
	switch {
	case ran:
		call.Answered, a.text = "final", loop.answer
	case asked && tool != "":
		args, _ := json.Marshal(toolArgs)
		call.Answered, a.tool, a.args = "tool_call", tool, string(args)
	default:
		call.Answered, a.text = "text", "OK."
	}
	s.mu.Lock()
	s.calls = append(s.calls, call)
	n := len(s.calls)
	s.mu.Unlock()
	return a, n
}

// script is the same script for a cloud's test server, which writes its
// answers in the cloud's own wire format; model is the model its calls
// are logged under.
func (s *scriptedChat) script(model string) cloudtest.Script {
	return func(turn cloudtest.Turn) cloudtest.Reply {
		a, _ := s.decide(scriptedCall{Model: model, Stream: turn.Stream}, turn.Tools, turn.Messages)
		return cloudtest.Reply{Text: a.text, Tool: a.tool, Args: a.args}
	}
}

// log is what the backend was asked, one line a call.
func (s *scriptedChat) log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	for i, c := range s.calls {
		fmt.Fprintf(&b, "%d: model %s, stream %v, answered %s, tools %v\n", i, c.Model, c.Stream, c.Answered, c.Tools)
	}
	return b.String()
}

// answered is how many calls were answered as kind.
func (s *scriptedChat) answered(kind string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		if c.Answered == kind {
			n++
		}
	}
	return n
}

// scriptedAnswer is one chat answer: text, or one call of tool, its id
// made from the answer's, as an agent takes two calls of one id for one.
type scriptedAnswer struct {
	id, model  string
	text       string
	tool, args string
}

const scriptedUsage = `{"prompt_tokens":100,"completion_tokens":10,"total_tokens":110}`

func (a *scriptedAnswer) whole(w http.ResponseWriter) {
	msg := map[string]any{"role": "assistant", "content": a.text}
	finish := "stop"
	if a.tool != "" {
		msg["content"] = nil
		msg["tool_calls"] = []any{map[string]any{"id": "call_" + a.id, "type": "function",
			"function": map[string]string{"name": a.tool, "arguments": a.args}}}
		finish = "tool_calls"
	}
	body, _ := json.Marshal(map[string]any{"id": a.id, "object": "chat.completion", "created": 1, "model": a.model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}, "usage": json.RawMessage(scriptedUsage)})
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
}

// stream writes the answer as chat chunks: the role, the text a word at a
// time or the tool call with its arguments in pieces, the finish, and the
// usage.
func (a *scriptedAnswer) stream(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(delta any, finish any) {
		b, _ := json.Marshal(map[string]any{"id": a.id, "object": "chat.completion.chunk", "created": 1, "model": a.model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
		fmt.Fprintf(w, "data: %s\n\n", b)
		w.(http.Flusher).Flush()
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil)
	finish := "stop"
	if a.tool != "" {
		chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": "call_" + a.id, "type": "function",
			"function": map[string]string{"name": a.tool, "arguments": ""}}}}, nil)
		for i := 0; i < len(a.args); i += 16 {
			piece := a.args[i:min(i+16, len(a.args))]
			chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]string{"arguments": piece}}}}, nil)
		}
		finish = "tool_calls"
	} else {
		for _, word := range strings.SplitAfter(a.text, " ") {
			chunk(map[string]any{"content": word}, nil)
		}
	}
	chunk(map[string]any{}, finish)
	fmt.Fprintf(w, "data: {\"id\":%q,\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":%q,\"choices\":[],\"usage\":%s}\n\ndata: [DONE]\n\n", a.id, a.model, scriptedUsage)
}

// agentGateway is a gateway with keys in front of a scripted chat backend
// serving agentModel, and a key for the agent.
type agentGateway struct {
	*Gateway
	backend *scriptedChat
	key     string
}

// startAgentGateway starts the scripted backend and a gateway in front of
// it whose pool is of the given kind; aliases are the other names the
// agent asks for.
func startAgentGateway(t *testing.T, kind string, aliases ...string) *agentGateway {
	t.Helper()
	return startAgentGatewayWith(t, kind, nil, "", aliases...)
}

// startAgentGatewayWith is startAgentGateway with the backend driving loop
// (nil for shellLoop) and extra added to the gateway's configuration.
func startAgentGatewayWith(t *testing.T, kind string, loop *toolLoop, extra string, aliases ...string) *agentGateway {
	t.Helper()
	backend := &scriptedChat{loop: loop}
	s := httptest.NewServer(backend)
	t.Cleanup(s.Close)
	return newAgentGateway(t, backend, fmt.Sprintf(`{name: agents, kind: %s, endpoints: [{url: %q}]}`, kind, s.URL+"/v1"), extra, aliases...)
}

// newAgentGateway starts a gateway whose one pool, written in YAML, is
// named agents and serves agentModel and aliases, with extra added to its
// configuration, and makes the agent's key; backend is what the pool's
// endpoints answer with.
func newAgentGateway(t *testing.T, backend *scriptedChat, pool, extra string, aliases ...string) *agentGateway {
	t.Helper()
	names, _ := json.Marshal(aliases)
	g := startYAML(t, fmt.Sprintf(`
router: {auth: keys}
store: {url: %q}
pools:
  - %s
models:
  - {name: %s, aliases: %s, pool: agents}
%s`, "sqlite:"+filepath.Join(t.TempDir(), "gw.db"), pool, agentModel, names, extra))
	key, _, err := keys.Create(t.Context(), g.store, keys.Spec{Tenant: "acme/agents"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return &agentGateway{Gateway: g, backend: backend, key: key}
}

// runAgent runs an agent's command in dir with env added to a bare
// environment (PATH, and HOME and the XDG directories in a temporary
// folder of its own), and returns what it wrote; it fails the test when
// the agent fails or runs past agentTimeout.
func runAgent(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), agentTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"XDG_DATA_HOME=" + filepath.Join(home, ".local", "share"),
		"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
		"XDG_STATE_HOME=" + filepath.Join(home, ".local", "state"),
		"TERM=dumb",
		"NO_COLOR=1",
	}, env...)
	cmd.Stdin = strings.NewReader("")
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("%s ran past %s:\n%s", filepath.Base(name), agentTimeout, out)
	}
	if err != nil {
		t.Fatalf("%s: %v\n%s", filepath.Base(name), err, out)
	}
	return string(out)
}

// checkToolLoop checks that the agent went through the loop: the backend
// asked for the tool, was sent its output, and the agent's final words
// quote it.
func (g *agentGateway) checkToolLoop(t *testing.T, output string) {
	t.Helper()
	if g.backend.answered("tool_call") == 0 || g.backend.answered("final") == 0 {
		t.Errorf("the agent did not go through the tool loop; the backend was asked:\n%s", g.backend.log())
	}
	if answer := g.backend.driving().answer; !strings.Contains(output, answer) {
		t.Errorf("the agent's final answer %q, quoting the tool's output, is not in what it wrote:\n%s\nthe backend was asked:\n%s", answer, output, g.backend.log())
	}
	t.Logf("the agent's output:\n%s", output)
}

// writeFile writes a file the agent reads, failing the test on error.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// opencode (https://opencode.ai) goes through chat completions, with the
// recipe in docs/CLIENTS.md: a provider of the AI SDK's OpenAI-compatible
// kind whose base URL is llmgw's.
func TestOpencodeToolLoop(t *testing.T) {
	bin := agentBin(t, "opencode")
	g := startAgentGateway(t, "vllm")
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "opencode.json"), fmt.Sprintf(`{
  "$schema": "https://opencode.ai/config.json",
  "provider": {
    "llmgw": {
      "npm": "@ai-sdk/openai-compatible",
      "name": "llmgw",
      "options": {"baseURL": %q, "apiKey": "{env:LLMGW_API_KEY}"},
      "models": {%q: {"name": %q}}
    }
  },
  "model": "llmgw/%s",
  "permission": {"bash": "allow", "edit": "allow"}
}
`, g.URL(), agentModel, agentModel, agentModel))
	out := runAgent(t, dir, []string{"LLMGW_API_KEY=" + g.key}, bin, "run", agentPrompt)
	g.checkToolLoop(t, out)
}

// runClaudeCode runs Claude Code on agentPrompt through g with the
// recipe in docs/CLIENTS.md: ANTHROPIC_BASE_URL at llmgw, a key of
// llmgw's, a catalog model; streamed, as it asks. It returns what Claude
// Code wrote.
func runClaudeCode(t *testing.T, g *agentGateway, extraEnv ...string) string {
	t.Helper()
	return runClaudeCodeOn(t, g, extraEnv, "-p", agentPrompt, "--model", agentModel, "--allowedTools", "Bash")
}

// runClaudeCodeOn runs Claude Code through g as runClaudeCode does, with
// extraEnv and args of its own.
func runClaudeCodeOn(t *testing.T, g *agentGateway, extraEnv []string, args ...string) string {
	t.Helper()
	bin := agentBin(t, "claude")
	env := append([]string{
		"ANTHROPIC_BASE_URL=" + strings.TrimSuffix(g.URL(), "/v1"),
		"ANTHROPIC_API_KEY=" + g.key,
		// Side tasks (titles, summaries) go to the small model.
		"ANTHROPIC_DEFAULT_HAIKU_MODEL=" + agentModel,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1",
		"IS_SANDBOX=1", // tests may run as root, where Claude Code wants a sandbox
	}, extraEnv...)
	return runAgent(t, t.TempDir(), env, bin, args...)
}

// runCodex runs Codex CLI on agentPrompt through g with the recipe in
// docs/CLIENTS.md: a model provider in config.toml whose wire_api is
// responses.
// It returns what Codex wrote.
func runCodex(t *testing.T, g *agentGateway) string {
	t.Helper()
	return runCodexOn(t, g, "", nil, agentPrompt)
}

// runCodexOn runs Codex CLI on prompt through g as runCodex does, with
// config added to its config.toml and extraEnv to its environment.
func runCodexOn(t *testing.T, g *agentGateway, config string, extraEnv []string, prompt string) string {
	t.Helper()
	bin := agentBin(t, "codex")
	codexHome := t.TempDir()
	writeFile(t, filepath.Join(codexHome, "config.toml"), fmt.Sprintf(`model = %q
model_provider = "llmgw"

[model_providers.llmgw]
name = "llmgw"
base_url = %q
wire_api = "responses"
env_key = "LLMGW_API_KEY"
%s`, agentModel, g.URL(), config))
	return runAgent(t, t.TempDir(), append([]string{"CODEX_HOME=" + codexHome, "LLMGW_API_KEY=" + g.key}, extraEnv...),
		bin, "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", prompt)
}

// Claude Code goes through the Messages API with the recipe in
// docs/CLIENTS.md: streamed, as it asks; and not streamed, as it asks
// again after a stream that broke, when the backend breaks every stream
// mid-answer.
func TestClaudeCodeToolLoop(t *testing.T) {
	for _, cut := range []bool{false, true} {
		name := map[bool]string{false: "streamed", true: "not streamed"}[cut]
		t.Run(name, func(t *testing.T) {
			g := startAgentGateway(t, "vllm")
			g.backend.mu.Lock()
			g.backend.cutStreams = cut
			g.backend.mu.Unlock()
			g.checkToolLoop(t, runClaudeCode(t, g))
			if cut && g.backend.answered("cut") == 0 {
				t.Errorf("no stream was asked for, and none broken:\n%s", g.backend.log())
			}
			g.backend.mu.Lock()
			defer g.backend.mu.Unlock()
			for _, c := range g.backend.calls {
				if c.Stream == cut && c.Answered != "cut" {
					t.Errorf("a call %s streamed %v: %+v", c.Answered, c.Stream, c)
				}
			}
		})
	}
}
