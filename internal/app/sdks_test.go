package app

// The official npm SDKs through llmgw in front of a cloud: openai (chat
// completions whole, and streamed with a tool call; Responses) and
// @anthropic-ai/sdk (Messages whole and streamed), run by node on
// testdata/sdks/run.mjs against a gateway whose pool is of kind bedrock
// or vertex (Google's models, or Anthropic's), at internal/cloudtest's
// server for that cloud.

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/cloudtest"
)

const (
	sdkAnswer = "It is sunny in Paris."
	sdkTool   = "get_weather"
	sdkArgs   = `{"city":"Paris"}`
)

// sdkScript answers as the model: offered sdkTool, it calls it with
// sdkArgs; otherwise it answers sdkAnswer.
func sdkScript(turn cloudtest.Turn) cloudtest.Reply {
	for _, tool := range turn.Tools {
		if tool == sdkTool {
			return cloudtest.Reply{Tool: sdkTool, Args: sdkArgs}
		}
	}
	return cloudtest.Reply{Text: sdkAnswer}
}

// sdkUsage is the usage the SDKs read, in either API's names.
type sdkUsage struct {
	Prompt     int `json:"prompt_tokens"`
	Completion int `json:"completion_tokens"`
	Total      int `json:"total_tokens"`
	Input      int `json:"input_tokens"`
	Output     int `json:"output_tokens"`
}

// sdkResult is what run.mjs printed for one call.
type sdkResult struct {
	Error     string `json:"error"`
	Content   string `json:"content"`
	Finish    string `json:"finish"` // chat completions
	Status    string `json:"status"` // Responses
	Stop      string `json:"stop"`   // Messages
	ToolCalls []struct {
		ID, Name, Arguments string
	} `json:"tool_calls"`
	Usage  sdkUsage `json:"usage"`
	Events int      `json:"events"` // a stream's chunks or events read
}

// runSDKs runs testdata/sdks/run.mjs against g, or skips the test when
// the SDKs are not installed (fails, with LLMGW_TEST_SDKS set).
func runSDKs(t *testing.T, g *agentGateway) map[string]sdkResult {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", "sdks"))
	if err != nil {
		t.Fatal(err)
	}
	node, err := exec.LookPath("node")
	if _, statErr := os.Stat(filepath.Join(dir, "node_modules", "openai")); err != nil || statErr != nil {
		msg := "node and the SDKs are needed: npm install --prefix internal/app/testdata/sdks installs the SDKs"
		if os.Getenv("LLMGW_TEST_SDKS") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "run.mjs", g.URL(), g.key, agentModel)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("node run.mjs: %v\n%s%s", err, out, stderr)
	}
	var got map[string]sdkResult
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("run.mjs printed %s: %v", out, err)
	}
	t.Logf("the SDKs got: %s", out)
	return got
}

func TestNpmSDKsCloud(t *testing.T) {
	for _, kind := range cloudKinds {
		t.Run(kind, func(t *testing.T) {
			g := newAgentGateway(t, nil, cloudPool(t, kind, sdkScript), "")
			got := runSDKs(t, g)
			for _, name := range []string{"chatWhole", "chatStreamTool", "responsesWhole", "messagesWhole", "messagesStream"} {
				r, ok := got[name]
				if !ok || r.Error != "" {
					t.Errorf("%s: %+v", name, r)
				}
			}
			chatUsage := sdkUsage{Prompt: 100, Completion: 10, Total: 110}
			if r := got["chatWhole"]; r.Content != sdkAnswer || r.Finish != "stop" || r.Usage != chatUsage {
				t.Errorf("chat completion: %+v, want %q, finish stop, usage %+v", r, sdkAnswer, chatUsage)
			}
			r := got["chatStreamTool"]
			if r.Finish != "tool_calls" || r.Usage != chatUsage || len(r.ToolCalls) != 1 || r.Events < 3 {
				t.Errorf("streamed chat completion: %+v, want one tool call over several chunks, finish tool_calls, usage %+v", r, chatUsage)
			} else if c := r.ToolCalls[0]; c.Name != sdkTool || c.ID == "" || !sameJSON(c.Arguments, sdkArgs) {
				t.Errorf("streamed chat completion's tool call: %+v, want %s(%s) with an id", c, sdkTool, sdkArgs)
			}
			if r := got["responsesWhole"]; r.Content != sdkAnswer || r.Status != "completed" || r.Usage != (sdkUsage{Input: 100, Output: 10, Total: 110}) {
				t.Errorf("response: %+v, want %q, completed, 100 in and 10 out", r, sdkAnswer)
			}
			for _, name := range []string{"messagesWhole", "messagesStream"} {
				if r := got[name]; r.Content != sdkAnswer || r.Stop != "end_turn" || r.Usage.Input != 100 || r.Usage.Output != 10 {
					t.Errorf("%s: %+v, want %q, end_turn, 100 in and 10 out", name, r, sdkAnswer)
				}
			}
			// The text comes a word at a time: its five deltas among the stream's events.
			if r := got["messagesStream"]; r.Events < 5 {
				t.Errorf("the streamed message came in %d events, want its text's deltas one by one", r.Events)
			}
		})
	}
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}
