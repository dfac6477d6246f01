package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
)

// chatScript is an upstream speaking chat completions as vLLM does, with
// the answer a test sets: reasoning_content, text and tool calls, whole
// or streamed a word and half an argument at a time. Every body it saw
// is kept.
type chatScript struct {
	mu     sync.Mutex
	answer scriptAnswer
	bodies []map[string]json.RawMessage
}

// scriptAnswer is what a chatScript answers. With then set, a request
// whose conversation ends with a tool's result is answered by then.
type scriptAnswer struct {
	reasoning, text string
	calls           []scriptCall
	then            *scriptAnswer
}

type scriptCall struct{ id, name, args string }

func startChatScript(t *testing.T) (*chatScript, string) {
	t.Helper()
	s := &chatScript{}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv.URL + "/v1"
}

func (s *chatScript) set(a scriptAnswer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answer = a
}

// last is the latest body the script saw.
func (s *chatScript) last(t *testing.T) map[string]json.RawMessage {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.bodies) == 0 {
		t.Fatal("the upstream saw no request")
	}
	return s.bodies[len(s.bodies)-1]
}

func (s *chatScript) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]json.RawMessage
	if r.URL.Path != "/v1/chat/completions" || json.Unmarshal(raw, &body) != nil {
		http.Error(w, `{"error":{"message":"not a chat request"}}`, http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.bodies = append(s.bodies, body)
	a := s.answer
	s.mu.Unlock()
	var msgs []struct{ Role string }
	json.Unmarshal(body["messages"], &msgs)
	if n := len(msgs); a.then != nil && n > 0 && msgs[n-1].Role == "tool" {
		a = *a.then
	}
	finish := "stop"
	if len(a.calls) > 0 {
		finish = "tool_calls"
	}
	usage := `{"prompt_tokens":1200,"completion_tokens":40,"total_tokens":1240,"prompt_tokens_details":{"cached_tokens":1024}}`
	if string(body["stream"]) != "true" {
		msg := map[string]any{"role": "assistant", "content": nil}
		if a.reasoning != "" {
			msg["reasoning_content"] = a.reasoning
		}
		if a.text != "" {
			msg["content"] = a.text
		}
		var calls []map[string]any
		for _, c := range a.calls {
			calls = append(calls, map[string]any{"id": c.id, "type": "function", "function": map[string]string{"name": c.name, "arguments": c.args}})
		}
		msg["tool_calls"] = calls
		m, _ := json.Marshal(msg)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"x","choices":[{"index":0,"message":%s,"finish_reason":%q,"stop_reason":null}],"usage":%s}`, m, finish, usage)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(delta any, finish string) {
		d, _ := json.Marshal(delta)
		f := "null"
		if finish != "" {
			f = `"` + finish + `"`
		}
		fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"x\",\"choices\":[{\"index\":0,\"delta\":%s,\"logprobs\":null,\"finish_reason\":%s}]}\n\n", d, f)
		w.(http.Flusher).Flush()
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, "")
	for _, word := range strings.SplitAfter(a.reasoning, " ") {
		if word != "" {
			chunk(map[string]any{"reasoning_content": word}, "")
		}
	}
	for _, word := range strings.SplitAfter(a.text, " ") {
		if word != "" {
			chunk(map[string]any{"content": word}, "")
		}
	}
	for i, c := range a.calls {
		chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": c.id, "type": "function", "function": map[string]string{"name": c.name, "arguments": ""}}}}, "")
		half := len(c.args) / 2
		for _, piece := range []string{c.args[:half], c.args[half:]} {
			chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]string{"arguments": piece}}}}, "")
		}
	}
	chunk(map[string]any{}, finish)
	fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"x\",\"choices\":[],\"usage\":%s}\n\ndata: [DONE]\n\n", usage)
}

// lockedBuffer is a log's output, written by the gateway's goroutines
// and read by the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startScriptedGateway is a gateway without keys in front of upstream:
// models gpt-5-codex and gpt-6.1-sol drop the hosted tools a request
// names, model strict refuses them. Its debug log goes to log.
func startScriptedGateway(t *testing.T, upstream string, log io.Writer) *Gateway {
	t.Helper()
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
router: {auth: none}
store: {url: "memory:"}
pools:
  - {name: gpu, endpoints: [{url: %q}]}
models:
  - {name: gpt-5-codex, pool: gpu}
  - {name: gpt-6.1-sol, pool: gpu}
  - {name: strict, pool: gpu, hosted_tools: refuse}
`, upstream)))
	if err != nil {
		t.Fatal(err)
	}
	return startLogged(t, cfg, slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug})))
}

// capturedRequest is a request as a client sent it: its path, headers
// and body, as testdata/codex-first-request.txt holds Codex CLI's.
type capturedRequest struct {
	path   string
	header http.Header
	body   string
}

func readCapture(t *testing.T, file string) capturedRequest {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	head, body, ok := strings.Cut(string(data), "\n\n")
	if !ok {
		t.Fatalf("%s: no blank line after the headers", file)
	}
	lines := strings.Split(head, "\n")
	c := capturedRequest{path: lines[0], header: http.Header{}, body: strings.TrimSpace(body)}
	for _, l := range lines[1:] {
		k, v, _ := strings.Cut(l, ": ")
		switch strings.ToLower(k) {
		case "host", "content-length", "accept-encoding":
		default:
			c.header.Add(k, v)
		}
	}
	return c
}

// replay sends c to the gateway at base (http://host:port), its body
// edited by edit (nil: as captured).
func (c capturedRequest) replay(t *testing.T, base string, edit func(map[string]json.RawMessage)) *http.Response {
	t.Helper()
	body := []byte(c.body)
	if edit != nil {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatal(err)
		}
		edit(m)
		body, _ = json.Marshal(m)
	}
	req, err := http.NewRequest(http.MethodPost, base+c.path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = c.header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// streamedResponse reads a Responses stream as the SDK does: its events'
// types, its reasoning summary's deltas joined, and the completed
// response.
func streamedResponse(t *testing.T, resp *http.Response) (kinds []string, summary string, final responses.Response) {
	t.Helper()
	s := ssestream.NewStream[responses.ResponseStreamEventUnion](ssestream.NewDecoder(resp), nil)
	for s.Next() {
		ev := s.Current()
		kinds = append(kinds, ev.Type)
		switch ev.Type {
		case "response.reasoning_summary_text.delta":
			summary += ev.AsResponseReasoningSummaryTextDelta().Delta
		case "response.completed":
			final = ev.AsResponseCompleted().Response
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return kinds, summary, final
}

// wholeResponse reads a Responses answer that is not streamed.
func wholeResponse(t *testing.T, resp *http.Response) responses.Response {
	t.Helper()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	var r responses.Response
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	return r
}

// chatSent is what of a chat request a test reads.
type chatSent struct {
	Messages []struct {
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		ToolCalls []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
		ToolCallID string `json:"tool_call_id"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	ToolChoice      json.RawMessage `json:"tool_choice"`
	PromptCacheKey  string          `json:"prompt_cache_key"`
	ReasoningEffort *string         `json:"reasoning_effort"`
	Stream          bool            `json:"stream"`
}

func decodeSent(t *testing.T, body map[string]json.RawMessage) chatSent {
	t.Helper()
	raw, _ := json.Marshal(body)
	var c chatSent
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// Codex CLI 0.171.0's first request, as it sent it, is served streamed
// and whole: the developer messages are the system message, every
// function and namespaced tool is offered, web search is left out and
// said to be, the prompt cache key goes on, and the model's reasoning
// and its call to exec_command come back as Codex reads them.
func TestCodexFirstRequest(t *testing.T) {
	script, url := startChatScript(t)
	var log lockedBuffer
	g := startScriptedGateway(t, url, &log)
	base := strings.TrimSuffix(g.URL(), "/v1")
	capture := readCapture(t, "testdata/codex-first-request.txt")
	const reasoning = "The user wants me to run echo hello."
	script.set(scriptAnswer{reasoning: reasoning, calls: []scriptCall{{"call_1", "exec_command", `{"cmd":"echo hello"}`}}})

	wantOutput := func(t *testing.T, r responses.Response) {
		t.Helper()
		if len(r.Output) != 2 {
			t.Fatalf("output %s", r.RawJSON())
		}
		rs, fc := r.Output[0].AsReasoning(), r.Output[1].AsFunctionCall()
		if r.Output[0].Type != "reasoning" || len(rs.Summary) != 1 || rs.Summary[0].Text != reasoning || rs.EncryptedContent != "" {
			t.Errorf("reasoning %s", r.Output[0].RawJSON())
		}
		if r.Output[1].Type != "function_call" || fc.Name != "exec_command" || fc.Namespace != "" || fc.CallID != "call_1" || fc.Arguments != `{"cmd":"echo hello"}` {
			t.Errorf("call %s", r.Output[1].RawJSON())
		}
		if r.Status != "completed" || r.Usage.InputTokens != 1200 || r.Usage.InputTokensDetails.CachedTokens != 1024 {
			t.Errorf("response %s", r.RawJSON())
		}
	}
	wantSent := func(t *testing.T, stream bool) {
		t.Helper()
		c := decodeSent(t, script.last(t))
		var roles []string
		for _, m := range c.Messages {
			roles = append(roles, m.Role)
		}
		if diff := cmp.Diff([]string{"system", "user", "user"}, roles); diff != "" {
			t.Errorf("roles (-want +got):\n%s", diff)
		}
		var parts []struct{ Type, Text string }
		json.Unmarshal(c.Messages[0].Content, &parts)
		if len(parts) != 3 || !strings.HasPrefix(parts[0].Text, "You are a coding agent running in the Codex CLI") || !strings.HasPrefix(parts[1].Text, "<skills_instructions>") {
			t.Errorf("system message %.300s", c.Messages[0].Content)
		}
		var tools []string
		for _, tl := range c.Tools {
			tools = append(tools, tl.Function.Name)
		}
		want := []string{"exec_command", "write_stdin", "request_user_input", "view_image",
			"multi_agent_v1__close_agent", "multi_agent_v1__resume_agent", "multi_agent_v1__send_input", "multi_agent_v1__spawn_agent", "multi_agent_v1__wait_agent",
			"get_goal", "create_goal", "update_goal"}
		if diff := cmp.Diff(want, tools); diff != "" {
			t.Errorf("tools offered (-want +got):\n%s", diff)
		}
		if c.PromptCacheKey != "01a2469e-f4a6-7f42-a518-7751c01f09d4" || c.ReasoningEffort != nil || c.Stream != stream || string(c.ToolChoice) != `"auto"` {
			t.Errorf("sent prompt_cache_key %q, reasoning_effort %v, stream %v, tool_choice %s", c.PromptCacheKey, c.ReasoningEffort, c.Stream, c.ToolChoice)
		}
	}

	t.Run("streamed", func(t *testing.T) {
		resp := capture.replay(t, base, nil)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Llmgw-Dropped-Tools") != "web_search" {
			body, _ := io.ReadAll(resp.Body)
			t.Fatalf("status %d, dropped %q: %s", resp.StatusCode, resp.Header.Get("X-Llmgw-Dropped-Tools"), body)
		}
		kinds, summary, final := streamedResponse(t, resp)
		wantOutput(t, final)
		if summary != reasoning {
			t.Errorf("summary deltas %q", summary)
		}
		want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.reasoning_summary_part.added"}
		for range strings.Fields(reasoning) { // the script sends a word a chunk
			want = append(want, "response.reasoning_summary_text.delta")
		}
		want = append(want, "response.reasoning_summary_text.done", "response.reasoning_summary_part.done", "response.output_item.done",
			"response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.delta",
			"response.function_call_arguments.done", "response.output_item.done", "response.completed")
		if diff := cmp.Diff(want, kinds); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
		wantSent(t, true)
		if !strings.Contains(log.String(), `msg="hosted tools dropped"`) || !strings.Contains(log.String(), "tools=web_search") {
			t.Errorf("debug log:\n%s", log.String())
		}
	})

	t.Run("whole", func(t *testing.T) {
		resp := capture.replay(t, base, func(m map[string]json.RawMessage) { m["stream"] = json.RawMessage("false") })
		if got := resp.Header.Get("X-Llmgw-Dropped-Tools"); got != "web_search" {
			t.Errorf("X-Llmgw-Dropped-Tools %q", got)
		}
		wantOutput(t, wholeResponse(t, resp))
		wantSent(t, false)
	})

	// The next turn, as Codex sends it: the reasoning and the call it
	// was answered, and the call's output. A call to a namespaced tool
	// is answered with its namespace.
	t.Run("next turn", func(t *testing.T) {
		script.set(scriptAnswer{text: "Spawning a helper.", calls: []scriptCall{{"call_2", "multi_agent_v1__spawn_agent", `{"message":"check"}`}}})
		resp := capture.replay(t, base, func(m map[string]json.RawMessage) {
			var input []json.RawMessage
			json.Unmarshal(m["input"], &input)
			input = append(input,
				json.RawMessage(`{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"The user wants me to run echo hello."}],"content":null,"encrypted_content":null}`),
				json.RawMessage(`{"type":"function_call","id":"fc_1","name":"exec_command","arguments":"{\"cmd\":\"echo hello\"}","call_id":"call_1"}`),
				json.RawMessage(`{"type":"function_call_output","call_id":"call_1","output":"hello\n"}`))
			m["input"], _ = json.Marshal(input)
			m["stream"] = json.RawMessage("false")
		})
		r := wholeResponse(t, resp)
		if len(r.Output) != 2 || r.OutputText() != "Spawning a helper." {
			t.Fatalf("%s", r.RawJSON())
		}
		if fc := r.Output[1].AsFunctionCall(); fc.Name != "spawn_agent" || fc.Namespace != "multi_agent_v1" || fc.Arguments != `{"message":"check"}` {
			t.Errorf("namespaced call %s", r.Output[1].RawJSON())
		}
		c := decodeSent(t, script.last(t))
		if n := len(c.Messages); n != 5 || c.Messages[3].Role != "assistant" || len(c.Messages[3].ToolCalls) != 1 ||
			c.Messages[3].ToolCalls[0].Function.Name != "exec_command" || c.Messages[4].Role != "tool" || c.Messages[4].ToolCallID != "call_1" {
			t.Errorf("messages sent %+v", c.Messages)
		}
	})
}

// Custom tools and namespaces through the official SDK: offered as
// functions, their calls answered as custom_tool_call and namespaced
// function_call items, whole and streamed, and the calls and their
// outputs in the next turn's input sent on as chat's.
func TestResponsesCustomAndNamespacedTools(t *testing.T) {
	script, url := startChatScript(t)
	g := startScriptedGateway(t, url, io.Discard)
	client := openai.NewClient(option.WithBaseURL(g.URL()), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx := t.Context()
	const patch = "*** Begin Patch\n*** Add File: a.txt\n+<a> & b\n*** End Patch"
	tools := []responses.ToolUnionParam{
		{OfCustom: &responses.CustomToolParam{Name: "apply_patch", Description: openai.String("Edit files."),
			Format: shared.CustomToolInputFormatUnionParam{OfGrammar: &shared.CustomToolInputFormatGrammarParam{Syntax: "lark", Definition: "start: begin_patch hunk+ end_patch"}}}},
		{OfNamespace: &responses.NamespaceToolParam{Name: "crm", Description: "The customer database.", Tools: []responses.NamespaceToolToolUnionParam{
			{OfFunction: &responses.NamespaceToolToolFunctionParam{Name: "lookup", Parameters: map[string]any{"type": "object", "properties": map[string]any{"id": map[string]any{"type": "string"}}}}},
		}}},
	}
	ask := responses.ResponseInputItemParamOfMessage("Look up customer 7 and note it.", responses.EasyInputMessageRoleUser)
	params := responses.ResponseNewParams{
		Model: "gpt-5-codex",
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{ask}},
		Tools: tools,
	}
	script.set(scriptAnswer{calls: []scriptCall{{"call_1", "crm__lookup", `{"id":"7"}`}, {"call_2", "apply_patch", customArgs(patch)}}})
	wantCalls := func(t *testing.T, r *responses.Response) {
		t.Helper()
		if len(r.Output) != 2 {
			t.Fatalf("%s", r.RawJSON())
		}
		fc, ct := r.Output[0].AsFunctionCall(), r.Output[1].AsCustomToolCall()
		if r.Output[0].Type != "function_call" || fc.Name != "lookup" || fc.Namespace != "crm" || fc.Arguments != `{"id":"7"}` || fc.CallID != "call_1" {
			t.Errorf("namespaced call %s", r.Output[0].RawJSON())
		}
		if r.Output[1].Type != "custom_tool_call" || ct.Name != "apply_patch" || ct.Input != patch || ct.CallID != "call_2" {
			t.Errorf("custom call %s", r.Output[1].RawJSON())
		}
	}

	t.Run("whole", func(t *testing.T) {
		r, err := client.Responses.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		wantCalls(t, r)
		c := decodeSent(t, script.last(t))
		if len(c.Tools) != 2 || c.Tools[0].Function.Name != "apply_patch" || c.Tools[1].Function.Name != "crm__lookup" {
			t.Fatalf("tools sent %+v", c.Tools)
		}
		var schema struct {
			Properties struct {
				Input struct{ Type, Description string } `json:"input"`
			} `json:"properties"`
			Required []string `json:"required"`
		}
		json.Unmarshal(c.Tools[0].Function.Parameters, &schema)
		if schema.Properties.Input.Type != "string" || !strings.HasSuffix(schema.Properties.Input.Description, "start: begin_patch hunk+ end_patch") || len(schema.Required) != 1 {
			t.Errorf("custom tool's parameters %s", c.Tools[0].Function.Parameters)
		}
	})

	t.Run("streamed", func(t *testing.T) {
		s := client.Responses.NewStreaming(ctx, params)
		var final responses.Response
		var input string
		var kinds []string
		for s.Next() {
			ev := s.Current()
			kinds = append(kinds, ev.Type)
			switch ev.Type {
			case "response.custom_tool_call_input.done":
				input = ev.AsResponseCustomToolCallInputDone().Input
			case "response.output_item.added":
				if it := ev.AsResponseOutputItemAdded().Item; it.Type == "function_call" && it.Namespace != "crm" {
					t.Errorf("added %s", it.RawJSON())
				}
			case "response.completed":
				final = ev.AsResponseCompleted().Response
			}
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		wantCalls(t, &final)
		if input != patch {
			t.Errorf("custom_tool_call_input.done input %q; events %v", input, kinds)
		}
	})

	t.Run("next turn", func(t *testing.T) {
		call := responses.ResponseInputItemParamOfFunctionCall(`{"id":"7"}`, "call_1", "lookup")
		call.OfFunctionCall.Namespace = openai.String("crm")
		out := responses.ResponseInputItemParamOfFunctionCallOutput("Ada Lovelace")
		out.OfFunctionCallOutput.CallID = openai.String("call_1")
		p := params
		p.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			ask, call, responses.ResponseInputItemParamOfCustomToolCall("call_2", patch, "apply_patch"), out,
			responses.ResponseInputItemParamOfCustomToolCallOutput[string]("call_2", "Done!"),
		}}
		script.set(scriptAnswer{text: "Noted."})
		r, err := client.Responses.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if r.OutputText() != "Noted." {
			t.Errorf("%s", r.RawJSON())
		}
		c := decodeSent(t, script.last(t))
		got, _ := json.Marshal(c.Messages[1:])
		want := `[{"role":"assistant","content":null,"tool_calls":[` +
			`{"id":"call_1","function":{"name":"crm__lookup","arguments":"{\"id\":\"7\"}"}},` +
			`{"id":"call_2","function":{"name":"apply_patch","arguments":` + string(mustMarshal(customArgs(patch))) + `}}],"tool_call_id":""},` +
			`{"role":"tool","content":"Ada Lovelace","tool_calls":null,"tool_call_id":"call_1"},` +
			`{"role":"tool","content":"Done!","tool_calls":null,"tool_call_id":"call_2"}]`
		if diff := cmp.Diff(want, string(got)); diff != "" {
			t.Errorf("messages sent (-want +got):\n%s", diff)
		}
	})
}

// customArgs is a chat call's arguments for a custom tool's input.
func customArgs(input string) string {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	e.Encode(map[string]string{"input": input})
	return strings.TrimSpace(b.String())
}

func mustMarshal(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// Reasoning through the official SDK: the effort goes on as chat's
// reasoning_effort; the backend's reasoning_content comes back as a
// reasoning item with a summary, and is streamed as the summary's events,
// when the request asks for a summary, and not otherwise; the fields a
// stateless gateway has nothing to do with are taken.
func TestResponsesReasoning(t *testing.T) {
	script, url := startChatScript(t)
	g := startScriptedGateway(t, url, io.Discard)
	client := openai.NewClient(option.WithBaseURL(g.URL()), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx := t.Context()
	const reasoning, answer = "Two and two make four.", "Four."
	script.set(scriptAnswer{reasoning: reasoning, text: answer})
	params := responses.ResponseNewParams{
		Model:          "gpt-5-codex",
		Input:          responses.ResponseNewParamsInputUnion{OfString: openai.String("What is two and two?")},
		Reasoning:      shared.ReasoningParam{Effort: shared.ReasoningEffortHigh, Summary: shared.ReasoningSummaryDetailed},
		Include:        []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent},
		Store:          openai.Bool(false),
		PromptCacheKey: openai.String("conversation-1"),
	}
	extra := option.WithJSONSet("client_metadata", map[string]string{"session_id": "s-1"})
	wantSent := func(t *testing.T) {
		t.Helper()
		c := decodeSent(t, script.last(t))
		if c.ReasoningEffort == nil || *c.ReasoningEffort != "high" || c.PromptCacheKey != "conversation-1" {
			t.Errorf("sent reasoning_effort %v, prompt_cache_key %q", c.ReasoningEffort, c.PromptCacheKey)
		}
	}

	t.Run("whole", func(t *testing.T) {
		r, err := client.Responses.New(ctx, params, extra)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Output) != 2 || r.Output[0].Type != "reasoning" || r.OutputText() != answer {
			t.Fatalf("%s", r.RawJSON())
		}
		if rs := r.Output[0].AsReasoning(); len(rs.Summary) != 1 || rs.Summary[0].Text != reasoning || rs.JSON.EncryptedContent.Valid() {
			t.Errorf("reasoning %s", r.Output[0].RawJSON())
		}
		wantSent(t)
	})

	t.Run("streamed", func(t *testing.T) {
		s := client.Responses.NewStreaming(ctx, params, extra)
		var kinds []string
		var deltas, done, part string
		var final responses.Response
		for s.Next() {
			ev := s.Current()
			kinds = append(kinds, ev.Type)
			switch ev.Type {
			case "response.reasoning_summary_text.delta":
				deltas += ev.AsResponseReasoningSummaryTextDelta().Delta
			case "response.reasoning_summary_text.done":
				done = ev.AsResponseReasoningSummaryTextDone().Text
			case "response.reasoning_summary_part.done":
				part = ev.AsResponseReasoningSummaryPartDone().Part.Text
			case "response.completed":
				final = ev.AsResponseCompleted().Response
			}
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		if deltas != reasoning || done != reasoning || part != reasoning {
			t.Errorf("summary deltas %q, done %q, part %q", deltas, done, part)
		}
		if len(final.Output) != 2 || final.Output[0].AsReasoning().Summary[0].Text != reasoning || final.OutputText() != answer {
			t.Errorf("final %s", final.RawJSON())
		}
		if kinds[2] != "response.output_item.added" || kinds[3] != "response.reasoning_summary_part.added" {
			t.Errorf("events %v", kinds)
		}
		wantSent(t)
	})

	// Without a summary asked for, the reasoning is not answered.
	t.Run("no summary", func(t *testing.T) {
		p := params
		p.Reasoning = shared.ReasoningParam{Effort: shared.ReasoningEffortLow}
		r, err := client.Responses.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Output) != 1 || r.OutputText() != answer {
			t.Errorf("%s", r.RawJSON())
		}
		s := client.Responses.NewStreaming(ctx, p)
		for s.Next() {
			if strings.Contains(s.Current().Type, "reasoning") {
				t.Errorf("event %s", s.Current().Type)
			}
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
	})
}

// Hosted tools the gateway cannot run, in Responses and Messages
// requests: left out by default, the header and the debug log saying
// which; refused naming the first for a model with hosted_tools: refuse.
func TestHostedTools(t *testing.T) {
	script, url := startChatScript(t)
	var log lockedBuffer
	g := startScriptedGateway(t, url, &log)
	base := strings.TrimSuffix(g.URL(), "/v1")
	script.set(scriptAnswer{text: "Sunny."})
	const fn = `{"type":"function","name":"get_weather","parameters":{"type":"object"}}`
	post := func(t *testing.T, path, body string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("anthropic-version", "2023-06-01")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	for _, c := range []struct {
		name, path, tools, dropped string
	}{
		{"responses", "/v1/responses", `"tools":[{"type":"web_search"},` + fn + `,{"type":"code_interpreter","container":{"type":"auto"}},{"type":"web_search"}]`, "web_search, code_interpreter"},
		{"messages", "/v1/messages", `"max_tokens":64,"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":5},` +
			`{"name":"get_weather","input_schema":{"type":"object"}}]`, "web_search_20250305"},
	} {
		input := `"input":"Weather in Paris?"`
		if c.path == "/v1/messages" {
			input = `"messages":[{"role":"user","content":"Weather in Paris?"}]`
		}
		t.Run(c.name+"/drop", func(t *testing.T) {
			resp, body := post(t, c.path, `{"model":"gpt-5-codex",`+input+`,`+c.tools+`}`)
			if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Llmgw-Dropped-Tools") != c.dropped {
				t.Fatalf("status %d, X-Llmgw-Dropped-Tools %q: %s", resp.StatusCode, resp.Header.Get("X-Llmgw-Dropped-Tools"), body)
			}
			sent := decodeSent(t, script.last(t))
			if len(sent.Tools) != 1 || sent.Tools[0].Function.Name != "get_weather" {
				t.Errorf("tools sent %+v", sent.Tools)
			}
			if !strings.Contains(log.String(), `tools="`+c.dropped+`"`) && !strings.Contains(log.String(), "tools="+c.dropped) {
				t.Errorf("debug log:\n%s", log.String())
			}
		})
		t.Run(c.name+"/refuse", func(t *testing.T) {
			resp, body := post(t, c.path, `{"model":"strict",`+input+`,`+c.tools+`}`)
			if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("X-Llmgw-Dropped-Tools") != "" || !strings.Contains(body, "tools[0].type") ||
				!strings.Contains(body, "is a hosted tool this gateway cannot run") {
				t.Errorf("status %d: %s", resp.StatusCode, body)
			}
			if c.path == "/v1/messages" && !strings.HasPrefix(body, `{"type":"error","error":{"type":"invalid_request_error"`) {
				t.Errorf("not in Anthropic's shape: %s", body)
			}
		})
	}
	// What needs a store stays refused, naming the field.
	for field, value := range map[string]string{"previous_response_id": `"resp_1"`, "conversation": `"conv_1"`, "background": `true`, "prompt": `{"id":"pmpt_1"}`} {
		resp, body := post(t, "/v1/responses", `{"model":"gpt-5-codex","input":"hi","`+field+`":`+value+`}`)
		var e struct{ Error struct{ Param string } }
		json.Unmarshal([]byte(body), &e)
		if resp.StatusCode != http.StatusBadRequest || e.Error.Param != field {
			t.Errorf("%s: status %d: %s", field, resp.StatusCode, body)
		}
	}
}
