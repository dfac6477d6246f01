package app

// The coding agents through llmgw's /mcp, with the recipes in docs/MCP.md
// (Claude Code, Codex CLI, opencode): each agent has llmgw as its model
// endpoint and its /mcp as an HTTP MCP server, and goes through a whole loop: the scripted backend asks for
// the MCP tool, the agent calls it through llmgw, and the final answer
// quotes what the tool returned.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"gitea.mynodes.xyz/ilker/llmgw/internal/cloudtest"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
)

// The MCP tool the agents are asked to call, served as probe__lookup, and
// what it returns: the marker is in no prompt, description or argument,
// so an answer that quotes it shows the call went through.
const (
	mcpAgentServer = "probe"
	mcpAgentTool   = "lookup"
	mcpAgentMarker = "llmgw-mcp-7c41e9"
	mcpAgentPrompt = "Use the probe lookup tool with the word gateway and tell me exactly what it returned."
	mcpAgentAnswer = "The tool returned " + mcpAgentMarker + "."
)

// mcpLoop has the backend ask for the MCP tool however the agent names
// it (mcp__llmgw__probe__lookup, or a namespace's name flattened): an
// offered tool ending in probe__lookup. Claude Code, searching tools,
// offers ToolSearch instead and names its MCP tools in a system message:
// the backend asks ToolSearch for the tool's schema, and given it, calls
// the tool by the name Claude Code gave it.
var mcpLoop = &toolLoop{task: "probe lookup tool", output: mcpAgentMarker, answer: mcpAgentAnswer,
	pick: func(offered []string, msgs []cloudtest.Message) (string, any) {
		const suffix, claudeName = mcpAgentServer + "__" + mcpAgentTool, "mcp__llmgw__" + mcpAgentServer + "__" + mcpAgentTool
		args := map[string]string{"word": "gateway"}
		for _, tool := range offered {
			if strings.HasSuffix(tool, suffix) {
				return tool, args
			}
		}
		if !slices.Contains(offered, "ToolSearch") {
			return "", nil
		}
		for _, m := range msgs {
			if m.Role == "tool" && strings.Contains(m.Text, claudeName) {
				return claudeName, args // its schema is loaded
			}
		}
		return "ToolSearch", map[string]string{"query": "select:" + claudeName}
	}}

// mcpAgentGateway is an agent gateway whose /mcp has the probe server
// behind it: a go-sdk MCP server on a real listener, its calls counted.
func mcpAgentGateway(t *testing.T) (*agentGateway, *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	s := mcp.NewServer(&mcp.Implementation{Name: "probe", Version: "1"}, nil)
	type args struct {
		Word string `json:"word"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: mcpAgentTool, Description: "Looks a word up."},
		func(_ context.Context, _ *mcp.CallToolRequest, a args) (*mcp.CallToolResult, any, error) {
			calls.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: mcpAgentMarker}}}, nil, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(hs.Close)
	g := startAgentGatewayWith(t, "vllm", mcpLoop, fmt.Sprintf("mcp:\n  servers: [{name: %s, url: %q}]\n", mcpAgentServer, hs.URL))
	return g, &calls
}

// checkMCPLoop checks the loop went through llmgw's /mcp: the agent's
// final answer quotes the tool's result, the tool was called once, and
// the ledger holds that call once.
func (g *agentGateway) checkMCPLoop(t *testing.T, output string, calls *atomic.Int64) {
	t.Helper()
	g.checkToolLoop(t, output)
	t.Logf("the backend was asked:\n%s", g.backend.log())
	if n := calls.Load(); n != 1 {
		t.Errorf("the MCP server was called %d times, want once", n)
	}
	toolRecords := func() []usage.Record {
		recs, _ := g.store.Records(t.Context(), usage.RecordQuery{})
		var tools []usage.Record
		for _, r := range recs {
			if r.Kind == usage.KindTool {
				tools = append(tools, r)
			}
		}
		return tools
	}
	waitUntil(t, "the ledger to hold the tool call", func() bool { return len(toolRecords()) > 0 })
	time.Sleep(200 * time.Millisecond) // time for a duplicate to land, were there one
	tools := toolRecords()
	want := mcpAgentServer + "__" + mcpAgentTool
	if len(tools) != 1 || tools[0].Model != want || tools[0].Pool != mcpAgentServer ||
		tools[0].Status != http.StatusOK || tools[0].Tenant != "acme/agents" {
		t.Errorf("the ledger's tool calls: %+v, want one answered call of %s", tools, want)
	}
}

// Claude Code with llmgw's /mcp in its --mcp-config, a server of type
// http with the key in an Authorization header taken from the
// environment, and llmgw as its model endpoint: searching tools, as it
// does by default, where the MCP tool is loaded by a ToolSearch call
// first; and with ENABLE_TOOL_SEARCH=false, where it is offered at once.
func TestClaudeCodeMCPLoop(t *testing.T) {
	for _, search := range []bool{true, false} {
		name := map[bool]string{true: "tool search", false: "no tool search"}[search]
		t.Run(name, func(t *testing.T) {
			g, calls := mcpAgentGateway(t)
			cfg := filepath.Join(t.TempDir(), "mcp.json")
			writeFile(t, cfg, fmt.Sprintf(`{"mcpServers": {"llmgw": {"type": "http", "url": %q,
  "headers": {"Authorization": "Bearer ${LLMGW_KEY}"}}}}
`, mcpURL(g.Gateway)))
			env := []string{"LLMGW_KEY=" + g.key}
			if !search {
				env = append(env, "ENABLE_TOOL_SEARCH=false")
			}
			out := runClaudeCodeOn(t, g, env, "-p", mcpAgentPrompt, "--model", agentModel,
				"--mcp-config", cfg, "--strict-mcp-config", "--allowedTools", "mcp__llmgw__"+mcpAgentServer+"__"+mcpAgentTool)
			g.checkMCPLoop(t, out, calls)
			if searched := strings.Contains(g.backend.log(), "ToolSearch"); searched != search {
				t.Errorf("ToolSearch offered %v, want %v:\n%s", searched, search, g.backend.log())
			}
		})
	}
}

// Codex CLI with llmgw's /mcp in config.toml's [mcp_servers.llmgw], a
// Streamable HTTP url and the key from the variable bearer_token_env_var
// names, and llmgw as its model provider.
func TestCodexMCPLoop(t *testing.T) {
	g, calls := mcpAgentGateway(t)
	out := runCodexOn(t, g, fmt.Sprintf(`
[mcp_servers.llmgw]
url = %q
bearer_token_env_var = "LLMGW_KEY"
`, mcpURL(g.Gateway)), []string{"LLMGW_KEY=" + g.key}, mcpAgentPrompt)
	g.checkMCPLoop(t, out, calls)
}

// opencode with llmgw's /mcp in opencode.json's mcp, a remote server
// with the key in an Authorization header taken from the environment,
// and llmgw as its provider.
func TestOpencodeMCPLoop(t *testing.T) {
	bin := agentBin(t, "opencode")
	g, calls := mcpAgentGateway(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "opencode.json"), fmt.Sprintf(`{
  "$schema": "https://opencode.ai/config.json",
  "provider": {
    "llmgw": {
      "npm": "@ai-sdk/openai-compatible",
      "name": "llmgw",
      "options": {"baseURL": %q, "apiKey": "{env:LLMGW_KEY}"},
      "models": {%q: {"name": %q}}
    }
  },
  "model": "llmgw/%s",
  "mcp": {"llmgw": {"type": "remote", "url": %q,
    "headers": {"Authorization": "Bearer {env:LLMGW_KEY}"}}}
}
`, g.URL(), agentModel, agentModel, agentModel, mcpURL(g.Gateway)))
	out := runAgent(t, dir, []string{"LLMGW_KEY=" + g.key}, bin, "run", mcpAgentPrompt)
	g.checkMCPLoop(t, out, calls)
}
