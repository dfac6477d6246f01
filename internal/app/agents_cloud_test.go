package app

// The agents through llmgw in front of a cloud: a pool of kind bedrock,
// one of kind vertex and one of kind vertex of Anthropic's models, each
// at a local server speaking the cloud's own wire format
// (internal/cloudtest: Converse and ConverseStream signed with SigV4;
// generateContent, and rawPredict with Anthropic's Messages API, with
// Vertex's bearer token) that scripts the same loop as the chat backend,
// asking for the shell tool with a Converse toolUse, a Gemini
// functionCall or a Messages tool_use and quoting its output.

import (
	"fmt"
	"net/http/httptest"
	"testing"

	"gitea.mynodes.xyz/ilker/llmgw/internal/cloudtest"
)

// cloudKinds are the cloud pools the agents are run through.
var cloudKinds = []string{"bedrock", "vertex", "vertex-anthropic"}

// startCloudAgentGateway starts a cloud's scripted server and a gateway
// whose pool, of that kind, calls it with the cloud's credentials.
func startCloudAgentGateway(t *testing.T, kind string) *agentGateway {
	t.Helper()
	backend := &scriptedChat{}
	return newAgentGateway(t, backend, cloudPool(t, kind, backend.script(agentModel)), "")
}

// cloudPool starts a cloud's server answering with script and returns,
// in YAML, a pool named agents of that kind calling it with the cloud's
// credentials.
func cloudPool(t *testing.T, kind string, script cloudtest.Script) string {
	t.Helper()
	switch kind {
	case "bedrock":
		cloudtest.AWSEnv(t)
		s := httptest.NewServer(&cloudtest.Bedrock{T: t, Region: "eu-west-3", Script: script})
		t.Cleanup(s.Close)
		return fmt.Sprintf(`{name: agents, kind: bedrock, region: eu-west-3, endpoints: [{url: %q}]}`, s.URL)
	case "vertex", "vertex-anthropic":
		s := httptest.NewServer(&cloudtest.Google{T: t, Vertex: true, Script: script})
		t.Cleanup(s.Close)
		publisher := "google"
		if kind == "vertex-anthropic" {
			publisher = "anthropic"
		}
		return fmt.Sprintf(`{name: agents, kind: vertex, publisher: %s, project: proj-1, location: us-central1, credentials_file: %q, endpoints: [{url: %q}]}`,
			publisher, cloudtest.ServiceAccountFile(t, s.URL+"/token"), s.URL+"/v1")
	}
	t.Fatalf("no cloud server for kind %q", kind)
	return ""
}

// Claude Code, through the Messages API, with each cloud's pool.
func TestClaudeCodeCloudToolLoop(t *testing.T) {
	for _, kind := range cloudKinds {
		t.Run(kind, func(t *testing.T) {
			agentBin(t, "claude")
			g := startCloudAgentGateway(t, kind)
			g.checkToolLoop(t, runClaudeCode(t, g))
			t.Logf("the %s server was asked:\n%s", kind, g.backend.log())
		})
	}
}

// Codex CLI, through the Responses API, with each cloud's pool.
func TestCodexCloudToolLoop(t *testing.T) {
	for _, kind := range cloudKinds {
		t.Run(kind, func(t *testing.T) {
			agentBin(t, "codex")
			g := startCloudAgentGateway(t, kind)
			g.checkToolLoop(t, runCodex(t, g))
			t.Logf("the %s server was asked:\n%s", kind, g.backend.log())
		})
	}
}
