package translate

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// toChat parses and translates the Responses request body.
func toChat(t *testing.T, body string) (*ResponsesRequest, *ChatRequest) {
	t.Helper()
	r, err := ParseResponses(context.Background(), []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.ToChat(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return r, c
}

// longName is a tool name that, with its namespace, is too long for a
// function.
var longName = strings.Repeat("x", 60)

// toolsRequest offers every kind of tool: functions, a custom tool with a
// grammar, namespaces whose tools' flat names would be taken or too long,
// and hosted tools.
var toolsRequest = `{"model":"m","input":"hi","tool_choice":{"type":"custom","name":"apply_patch"},"tools":[
	{"type":"function","name":"exec_command","description":"Run.","parameters":{"type":"object"},"strict":false},
	{"type":"web_search","external_web_access":true},
	{"type":"custom","name":"apply_patch","description":"Patch files.","format":{"type":"grammar","syntax":"lark","definition":"start: <patch>"}},
	{"type":"namespace","name":"multi_agent_v1","description":"Sub-agents.","tools":[
		{"type":"function","name":"spawn_agent","description":"Spawn one.","parameters":{"type":"object","properties":{}}},
		{"type":"custom","name":"send_input","format":{"type":"text"}},
		{"type":"function","name":"` + longName + `","parameters":{}}]},
	{"type":"function","name":"crm__lookup","parameters":{}},
	{"type":"namespace","name":"crm","tools":[{"type":"function","name":"lookup","description":"Find a customer."}]},
	{"type":"file_search","vector_store_ids":["vs_1"]}]}`

// Functions stay as they are; custom tools become functions of one
// string, input, described by their grammar; a namespace's tools become
// functions named namespace__name, or a name of their own when that is
// taken or too long, the first described by the namespace's description
// and its own, the others naming the first; hosted tools are left out,
// and said to be.
func TestResponsesToolsToChat(t *testing.T) {
	r, c := toChat(t, toolsRequest)
	type fn struct{ Name, Description, Parameters string }
	var got []fn
	for _, tl := range c.Tools {
		got = append(got, fn{tl.Function.Name, tl.Function.Description, compact(tl.Function.Parameters)})
	}
	input := func(desc string) string {
		return `{"additionalProperties":false,"properties":{"input":{"description":` + string(mustJSON(desc)) + `,"type":"string"}},"required":["input"],"type":"object"}`
	}
	long := got[4].Name
	crm := got[6].Name
	want := []fn{
		{"exec_command", "Run.", `{"type":"object"}`},
		{"apply_patch", "Patch files.", input("The tool's input: text that the lark grammar below matches, and nothing else.\n\nstart: <patch>")},
		{"multi_agent_v1__spawn_agent", "Sub-agents.\n\nSpawn one.", `{"type":"object","properties":{}}`},
		{"multi_agent_v1__send_input", "Part of the namespace described under multi_agent_v1__spawn_agent.", input("The tool's input, as free-form text.")},
		{long, "Part of the namespace described under multi_agent_v1__spawn_agent.", `{}`},
		{"crm__lookup", "", `{}`},
		{crm, "Find a customer.", ""},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("chat tools (-want +got):\n%s", diff)
	}
	if len(long) != maxFunctionName || !strings.HasPrefix(long, "multi_agent_v1__xxx") {
		t.Errorf("a namespaced tool too long for a function is named %q", long)
	}
	if crm == "crm__lookup" || !strings.HasPrefix(crm, "crm__lookup_") {
		t.Errorf("a namespaced tool whose flat name a function has is named %q", crm)
	}
	if got, want := string(c.ToolChoice), `{"function":{"name":"apply_patch"},"type":"function"}`; got != want {
		t.Errorf("tool_choice %s, want %s", got, want)
	}
	if diff := cmp.Diff([]HostedTool{{"web_search", "tools[1]"}, {"file_search", "tools[6]"}}, r.HostedTools()); diff != "" {
		t.Errorf("hosted tools (-want +got):\n%s", diff)
	}
	for chat, want := range map[string]toolRef{
		"exec_command":                {name: "exec_command"},
		"apply_patch":                 {name: "apply_patch", custom: true},
		"multi_agent_v1__spawn_agent": {namespace: "multi_agent_v1", name: "spawn_agent"},
		"multi_agent_v1__send_input":  {namespace: "multi_agent_v1", name: "send_input", custom: true},
		long:                          {namespace: "multi_agent_v1", name: longName},
		"crm__lookup":                 {name: "crm__lookup"},
		crm:                           {namespace: "crm", name: "lookup"},
		"not_offered":                 {name: "not_offered"},
	} {
		if got := r.names.ref(chat); got != want {
			t.Errorf("%s stands for %+v, want %+v", chat, got, want)
		}
	}
}

// Codex CLI's first request: developer messages become the system
// message, the tools and the reasoning, cache and metadata fields are
// taken, and only web search is left out.
func TestResponsesCodexRequest(t *testing.T) {
	r, c := toChat(t, codexRequest)
	if c.Messages[0].Role != "system" || c.Messages[1].Role != "user" || c.Messages[2].Role != "user" || len(c.Messages) != 3 {
		t.Errorf("messages %s", mustJSON(c.Messages))
	}
	var parts []ChatPart
	json.Unmarshal(c.Messages[0].Content, &parts)
	if len(parts) != 3 || parts[0].Text != "You are Codex." || parts[2].Text != "<permissions>sandbox</permissions>" {
		t.Errorf("system message %s, want the developer messages' three parts", c.Messages[0].Content)
	}
	var names []string
	for _, tl := range c.Tools {
		names = append(names, tl.Function.Name)
	}
	want := []string{"exec_command", "apply_patch", "multi_agent_v1__spawn_agent", "multi_agent_v1__wait_agent"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	if c.PromptCacheKey != "019a-session" || c.ReasoningEffort != "medium" || string(c.ToolChoice) != `"auto"` || c.Parallel == nil || !*c.Parallel {
		t.Errorf("chat request %s", mustJSON(c))
	}
	if !r.Summarized() || DroppedTools(r.HostedTools()) != "web_search" {
		t.Errorf("summarized %v, hosted %v", r.Summarized(), r.HostedTools())
	}
}

// codexRequest is the shape of Codex CLI's requests, cut short.
const codexRequest = `{"model":"gpt-5-codex","stream":true,"input":[
	{"type":"message","id":"msg_1","role":"developer","content":[{"type":"input_text","text":"You are Codex."}]},
	{"type":"message","id":"msg_2","role":"developer","content":[{"type":"input_text","text":"<skills/>"},{"type":"input_text","text":"<permissions>sandbox</permissions>"}]},
	{"type":"message","id":"msg_3","role":"user","content":[{"type":"input_text","text":"<environment_context/>"}]},
	{"type":"message","id":"msg_4","role":"user","content":[{"type":"input_text","text":"Run echo hello"}]}],
	"tools":[{"type":"function","name":"exec_command","description":"Runs a command.","strict":false,"parameters":{"type":"object","properties":{"cmd":{"type":"string"}},"required":["cmd"],"additionalProperties":false}},
	{"type":"custom","name":"apply_patch","description":"Patch.","format":{"type":"grammar","syntax":"lark","definition":"start: begin_patch hunk+ end_patch"}},
	{"type":"namespace","name":"multi_agent_v1","description":"Tools for spawning and managing sub-agents.","tools":[
		{"type":"function","name":"spawn_agent","description":"Spawn.","strict":false,"parameters":{"type":"object","properties":{}}},
		{"type":"function","name":"wait_agent","description":"Wait.","strict":false,"parameters":{"type":"object","properties":{}}}]},
	{"type":"web_search","external_web_access":true}],
	"tool_choice":"auto","parallel_tool_calls":true,"reasoning":{"effort":"medium","summary":"auto"},"store":false,
	"include":["reasoning.encrypted_content"],"prompt_cache_key":"019a-session",
	"client_metadata":{"session_id":"019a-session","x-codex-turn-metadata":"{\"turn\":1}"}}`

// A later turn's items: the model's reasoning is dropped, its namespaced
// and custom calls are named as the chat functions they were offered
// as, and their outputs are tool messages.
func TestResponsesCallsInInput(t *testing.T) {
	body := strings.Replace(codexRequest, `"Run echo hello"}]}]`, `"Run echo hello"}]},
		{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"Plan."}],"content":null,"encrypted_content":null},
		{"type":"function_call","name":"spawn_agent","namespace":"multi_agent_v1","arguments":"{}","call_id":"c1"},
		{"type":"custom_tool_call","name":"apply_patch","input":"*** Begin Patch <a> & b","call_id":"c2","status":"completed"},
		{"type":"web_search_call","id":"ws_1","status":"completed","action":{"type":"search","query":"x"}},
		{"type":"function_call_output","call_id":"c1","output":"agent 7"},
		{"type":"custom_tool_call_output","call_id":"c2","output":[{"type":"input_text","text":"Done!"}]}]`, 1)
	_, c := toChat(t, body)
	got := mustJSON(c.Messages[3:])
	want := `[{"role":"assistant","tool_calls":[` +
		`{"id":"c1","type":"function","function":{"name":"multi_agent_v1__spawn_agent","arguments":"{}"}},` +
		`{"id":"c2","type":"function","function":{"name":"apply_patch","arguments":"{\"input\":\"*** Begin Patch <a> & b\"}"}}]},` +
		`{"role":"tool","content":"agent 7","tool_call_id":"c1"},{"role":"tool","content":"Done!","tool_call_id":"c2"}]`
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	// The arguments a model reads hold the input as the client sent it,
	// not escaped for HTML.
	if args := c.Messages[3].ToolCalls[1].Function.Arguments; args != `{"input":"*** Begin Patch <a> & b"}` {
		t.Errorf("custom call's arguments %s", args)
	}
}

// What needs a store, and tools the client got wrong, are refused naming
// the field.
func TestResponsesRefused(t *testing.T) {
	for _, c := range []struct{ body, param string }{
		{`{"model":"m","input":"hi","previous_response_id":"resp_1"}`, "previous_response_id"},
		{`{"model":"m","input":"hi","conversation":"conv_1"}`, "conversation"},
		{`{"model":"m","input":"hi","background":true}`, "background"},
		{`{"model":"m","input":"hi","prompt":{"id":"pmpt_1","variables":{}}}`, "prompt"},
		{`{"model":"m","input":"hi","tools":{}}`, "tools"},
		{`{"model":"m","input":"hi","tools":[{"name":"f"}]}`, "tools[0].type"},
		{`{"model":"m","input":"hi","tools":[{"type":"function"}]}`, "tools[0].name"},
		{`{"model":"m","input":"hi","tools":[{"type":"namespace","name":"n","tools":[{"type":"web_search"}]}]}`, "tools[0].tools[0].type"},
		{`{"model":"m","input":"hi","tools":[{"type":"namespace","name":"n","tools":[{"type":"function","name":"f"},{"type":"custom","name":"f"}]}]}`, "tools[0].tools[1].name"},
		{`{"model":"m","input":"hi","tools":[{"type":"namespace","name":"` + strings.Repeat("n", maxToolName+1) + `","tools":[]}]}`, "tools[0].name"},
		{`{"model":"m","input":"hi","tools":[{"type":"namespace","name":"n","tools":[{"type":"function","name":"` + strings.Repeat("f", maxToolName+1) + `"}]}]}`, "tools[0].tools[0].name"},
		{`{"model":"m","input":"hi","tools":[{"type":"custom","name":"f","format":{"type":"regex"}}]}`, "tools[0].format.type"},
		{`{"model":"m","input":[{"type":"custom_tool_call","call_id":"c","name":"f","input":{}}]}`, "input[0].input"},
		{`{"model":"m","input":[{"type":"item_reference","id":"msg_1"}]}`, "input[0].type"},
		{`{"model":"m","input":"hi","tool_choice":{"type":"web_search_preview"}}`, "tool_choice"},
	} {
		var err error
		if r, perr := ParseResponses(context.Background(), []byte(c.body)); perr != nil {
			err = perr
		} else {
			_, err = r.ToChat(context.Background())
		}
		if e := openai.AsError(err); err == nil || e.Status != 400 || e.Param != c.param {
			t.Errorf("%s: %v, want a 400 naming %s", c.body, err, c.param)
		}
	}
}

// A request whose only tools are hosted asks chat for no tool choice: a
// backend refuses a choice among none.
func TestResponsesOnlyHostedTools(t *testing.T) {
	r, c := toChat(t, `{"model":"m","input":"hi","tool_choice":"auto","parallel_tool_calls":true,"tools":[{"type":"web_search_preview"}]}`)
	if c.Tools != nil || c.ToolChoice != nil || c.Parallel != nil || len(r.HostedTools()) != 1 {
		t.Errorf("%s", mustJSON(c))
	}
}

// callsAnswer is a chat completion with reasoning, text, a namespaced
// function call and a custom tool call.
const callsAnswer = `{"id":"c","model":"x","created":1,"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant",
	"reasoning_content":"The user wants a patch.","content":"Patching.","tool_calls":[
	{"id":"call_1","type":"function","function":{"name":"multi_agent_v1__spawn_agent","arguments":"{\"task\":\"x\"}"}},
	{"id":"call_2","type":"function","function":{"name":"apply_patch","arguments":"{\"input\":\"*** Begin Patch\\n*** End Patch\"}"}}]}}],
	"usage":{"prompt_tokens":5,"completion_tokens":9,"total_tokens":14}}`

// A whole answer carries the reasoning as a summary when the request
// asks for one, and names each call as the client's tool.
func TestResponsesAnswerItems(t *testing.T) {
	for _, summary := range []string{`"auto"`, `null`, `"none"`} {
		r, _ := toChat(t, strings.Replace(codexRequest, `"summary":"auto"`, `"summary":`+summary, 1))
		out, err := (&Responses{ID: "resp_1", Model: "m", Request: r}).Answer([]byte(callsAnswer))
		if err != nil {
			t.Fatal(err)
		}
		var o struct {
			Output []json.RawMessage `json:"output"`
		}
		json.Unmarshal(out, &o)
		var got []string
		for _, it := range o.Output {
			got = append(got, string(it))
		}
		want := []string{
			`{"type":"reasoning","id":"rs_resp_1_0","summary":[{"type":"summary_text","text":"The user wants a patch."}]}`,
			`{"type":"message","id":"msg_resp_1_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Patching.","annotations":[],"logprobs":[]}]}`,
			`{"type":"function_call","id":"fc_resp_1_2","call_id":"call_1","name":"spawn_agent","namespace":"multi_agent_v1","arguments":"{\"task\":\"x\"}","status":"completed"}`,
			`{"type":"custom_tool_call","id":"ctc_resp_1_3","call_id":"call_2","name":"apply_patch","input":"*** Begin Patch\n*** End Patch","status":"completed"}`,
		}
		if summary != `"auto"` {
			want = []string{
				`{"type":"message","id":"msg_resp_1_0","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Patching.","annotations":[],"logprobs":[]}]}`,
				`{"type":"function_call","id":"fc_resp_1_1","call_id":"call_1","name":"spawn_agent","namespace":"multi_agent_v1","arguments":"{\"task\":\"x\"}","status":"completed"}`,
				`{"type":"custom_tool_call","id":"ctc_resp_1_2","call_id":"call_2","name":"apply_patch","input":"*** Begin Patch\n*** End Patch","status":"completed"}`,
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("summary %s: output (-want +got):\n%s", summary, diff)
		}
		if strings.Contains(string(out), "encrypted_content") {
			t.Errorf("an answer with encrypted_content: %s", out)
		}
	}
}

// A streamed answer's events, in order, for reasoning, text, a
// namespaced function call and a custom tool call: OpenAI's events for
// each, the reasoning summary's among them.
func TestResponsesStreamItems(t *testing.T) {
	r, _ := toChat(t, codexRequest)
	chunks := []string{
		`{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"reasoning_content":"The user"}}]}`,
		`{"choices":[{"index":0,"delta":{"reasoning_content":" wants a patch."}}]}`,
		`{"choices":[{"index":0,"delta":{"content":"Patching."}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"multi_agent_v1__spawn_agent","arguments":""}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"apply_patch","arguments":"{\"input\":"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"\"*** Begin Patch\"}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		`{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":9,"total_tokens":14}}`,
	}
	tr := (&Responses{ID: "resp_1", Model: "m", Request: r}).Stream()
	var got []string
	emit := func(kind, data []byte) error {
		var ev map[string]json.RawMessage
		if err := json.Unmarshal(data, &ev); err != nil {
			t.Fatalf("%s: %v", data, err)
		}
		if string(ev["type"]) != `"`+string(kind)+`"` || string(ev["sequence_number"]) != itoa(int64(len(got))) {
			t.Errorf("event %d: %s", len(got), data)
		}
		line := string(kind)
		for _, k := range []string{"output_index", "summary_index", "delta", "text", "name", "arguments", "input", "part", "item"} {
			if v, ok := ev[k]; ok && string(kind) != "response.completed" {
				line += " " + k + "=" + string(v)
			}
		}
		got = append(got, line)
		return nil
	}
	for _, c := range chunks {
		if err := tr.Event([]byte(c), emit); err != nil {
			t.Fatal(err)
		}
	}
	tr.Event(openai.Done, emit)
	want := []string{
		"response.created",
		"response.in_progress",
		`response.output_item.added output_index=0 item={"type":"reasoning","id":"rs_resp_1_0","summary":[]}`,
		`response.reasoning_summary_part.added output_index=0 summary_index=0 part={"type":"summary_text","text":""}`,
		`response.reasoning_summary_text.delta output_index=0 summary_index=0 delta="The user"`,
		`response.reasoning_summary_text.delta output_index=0 summary_index=0 delta=" wants a patch."`,
		`response.reasoning_summary_text.done output_index=0 summary_index=0 text="The user wants a patch."`,
		`response.reasoning_summary_part.done output_index=0 summary_index=0 part={"type":"summary_text","text":"The user wants a patch."}`,
		`response.output_item.done output_index=0 item={"type":"reasoning","id":"rs_resp_1_0","summary":[{"type":"summary_text","text":"The user wants a patch."}]}`,
		`response.output_item.added output_index=1 item={"type":"message","id":"msg_resp_1_1","status":"in_progress","role":"assistant","content":[]}`,
		`response.content_part.added output_index=1 part={"type":"output_text","text":"","annotations":[],"logprobs":[]}`,
		`response.output_text.delta output_index=1 delta="Patching."`,
		`response.output_text.done output_index=1 text="Patching."`,
		`response.content_part.done output_index=1 part={"type":"output_text","text":"Patching.","annotations":[],"logprobs":[]}`,
		`response.output_item.done output_index=1 item={"type":"message","id":"msg_resp_1_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Patching.","annotations":[],"logprobs":[]}]}`,
		`response.output_item.added output_index=2 item={"type":"function_call","id":"fc_resp_1_2","call_id":"call_1","name":"spawn_agent","namespace":"multi_agent_v1","arguments":"","status":"in_progress"}`,
		`response.function_call_arguments.delta output_index=2 delta="{}"`,
		`response.function_call_arguments.done output_index=2 name="spawn_agent" arguments="{}"`,
		`response.output_item.done output_index=2 item={"type":"function_call","id":"fc_resp_1_2","call_id":"call_1","name":"spawn_agent","namespace":"multi_agent_v1","arguments":"{}","status":"completed"}`,
		`response.output_item.added output_index=3 item={"type":"custom_tool_call","id":"ctc_resp_1_3","call_id":"call_2","name":"apply_patch","input":"","status":"in_progress"}`,
		`response.custom_tool_call_input.delta output_index=3 delta="*** Begin Patch"`,
		`response.custom_tool_call_input.done output_index=3 input="*** Begin Patch"`,
		`response.output_item.done output_index=3 item={"type":"custom_tool_call","id":"ctc_resp_1_3","call_id":"call_2","name":"apply_patch","input":"*** Begin Patch","status":"completed"}`,
		"response.completed",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// additionalToolsRequest adds its tools in an additional_tools input item,
// as Codex CLI does for models it runs in code mode.
const additionalToolsRequest = `{"model":"m","stream":true,"reasoning":{"effort":"high","summary":"auto","context":"all_turns"},"text":{"verbosity":"low"},
	"input":[{"type":"additional_tools","id":"at_1","role":"developer","tools":[
		{"type":"namespace","name":"functions","description":"","tools":[
			{"type":"custom","name":"exec","description":"Run JavaScript.","format":{"type":"grammar","syntax":"lark","definition":"start: SOURCE"}},
			{"type":"function","name":"wait","strict":false,"parameters":{"type":"object"}}]},
		{"type":"web_search"}]},
	{"type":"message","role":"developer","content":[{"type":"input_text","text":"You are Codex."}]},
	{"type":"message","role":"user","content":[{"type":"input_text","text":"Create hello.txt"}]},
	{"type":"custom_tool_call","call_id":"c1","namespace":"functions","name":"exec","input":"text(1)"},
	{"type":"custom_tool_call_output","call_id":"c1","output":"1"}]}`

// The tools of an additional_tools item are offered with the request's
// own, for the whole conversation as chat offers tools; hosted ones among
// them are left out and said to be, by their place in the input.
func TestResponsesAdditionalTools(t *testing.T) {
	r, c := toChat(t, additionalToolsRequest)
	var names []string
	for _, tl := range c.Tools {
		names = append(names, tl.Function.Name)
	}
	if diff := cmp.Diff([]string{"functions__exec", "functions__wait"}, names); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]HostedTool{{"web_search", "input[0].tools[1]"}}, r.HostedTools()); diff != "" {
		t.Errorf("hosted tools (-want +got):\n%s", diff)
	}
	if got := r.names.ref("functions__exec"); got != (toolRef{namespace: "functions", name: "exec", custom: true}) {
		t.Errorf("functions__exec stands for %+v", got)
	}
	got := string(mustJSON(c.Messages))
	want := `[{"role":"system","content":[{"type":"text","text":"You are Codex."}]},{"role":"user","content":[{"type":"text","text":"Create hello.txt"}]},` +
		`{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"functions__exec","arguments":"{\"input\":\"text(1)\"}"}}]},` +
		`{"role":"tool","content":"1","tool_call_id":"c1"}]`
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	for body, param := range map[string]string{
		`{"model":"m","input":[{"type":"additional_tools","tools":{}}]}`:                                                   "input[0].tools",
		`{"model":"m","input":[{"type":"additional_tools","tools":[{"type":"function"}]}]}`:                                "input[0].tools[0].name",
		`{"model":"m","input":[{"type":"additional_tools","tools":[{"type":"custom","name":"f","format":{"type":"x"}}]}]}`: "input[0].tools[0].format.type",
	} {
		r, err := ParseResponses(context.Background(), []byte(body))
		if err == nil {
			_, err = r.ToChat(context.Background())
		}
		if e := openai.AsError(err); err == nil || e.Param != param {
			t.Errorf("%s: %v, want a 400 naming %s", body, err, param)
		}
	}
}

// What X-Llmgw-Dropped-Tools says is each type once, a type that could
// not be written in a header as it is named "other", and never more than
// maxDroppedTools bytes, whatever the client named.
func TestDroppedTools(t *testing.T) {
	many := []HostedTool{{Type: "web_search"}, {Type: "web\r\nX-Injected: 1"}, {Type: "code_interpreter"}, {Type: "web_search"}, {Type: strings.Repeat("y", 65)}}
	for i := range 200 {
		many = append(many, HostedTool{Type: "tool_" + strings.Repeat("z", 40) + itoa(int64(i))})
	}
	got := DroppedTools(many)
	if !strings.HasPrefix(got, "web_search, other, code_interpreter, tool_") || !strings.HasSuffix(got, ", ...") || len(got) > maxDroppedTools+5 {
		t.Errorf("%d bytes: %q", len(got), got)
	}
	if strings.ContainsAny(got, "\r\n") || strings.Count(got, "web_search") != 1 {
		t.Errorf("%q", got)
	}
}
