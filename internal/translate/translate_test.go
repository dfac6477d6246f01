package translate

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// TestWrongTypes names the field and the type it must be, without Go's
// type names, in both APIs.
func TestWrongTypes(t *testing.T) {
	for _, c := range []struct {
		api, body, want string
	}{
		{"anthropic", `{"model":"m","max_tokens":"ten","messages":[]}`, "max_tokens: must be an integer, got a string"},
		{"anthropic", `{"model":"m","max_tokens":1.5,"messages":[]}`, "max_tokens: must be an integer, got a decimal number"},
		{"anthropic", `{"model":7,"max_tokens":1,"messages":[]}`, "model: must be a string, got a number"},
		{"anthropic", `{"model":"m","max_tokens":1,"messages":{}}`, "messages: must be an array, got an object"},
		{"anthropic", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"image","source":"x"}]}]}`,
			"messages[0].content[0].source: must be an object, got a string"},
		{"anthropic", `{"model":"m","max_tokens":1,"messages":[],"temperature":"hot"}`, "temperature: must be a number, got a string"},
		{"anthropic", `{"model":"m","max_tokens":1,"messages":[],"stop_sequences":"END"}`, "stop_sequences: must be an array, got a string"},
		{"anthropic", `{"model":"m","max_tokens":1,"messages":[],"tools":[{"name":"f","input_schema":{},"description":3}]}`, "tools.description: must be a string, got a number"},
		{"anthropic", `{"model":"m","max_tokens":1,"messages":[],"thinking":"on"}`, "thinking: must be an object, got a string"},
		{"anthropic", `{"model":"m","max_tokens":1,"messages":[],"thinking":{"type":"enabled","budget_tokens":"lots"}}`, "thinking.budget_tokens: must be an integer, got a string"},
		{"anthropic", `{"model":"m","max_tokens":1,"messages":[{"role":"developer","content":"x"}]}`, `messages[0].role: must be "user", "assistant" or "system", got "developer"`},
		{"anthropic", `{"model":"m","max_tokens":1,"messages":[{"role":"system","content":[{"type":"image","source":{"type":"url","url":"x"}}]}]}`,
			`messages[0].content[0].type: a system message holds text, tool_addition and tool_removal blocks, not "image"`},
		{"anthropic", `{"model":"m","max_tokens":1,"messages":[{"role":"system","content":[{"type":"tool_removal"}]}]}`, "messages[0].content[0].tool: field required"},
		{"anthropic", `[]`, "The request body must be a JSON object."},
		{"anthropic", `{"model":`, "The request body is not valid JSON."},
		{"responses", `{"model":"m","input":"hi","max_output_tokens":"ten"}`, "max_output_tokens: must be an integer, got a string"},
		{"responses", `{"model":"m","input":7}`, "input: must be a string or an array of items, got an integer"},
		{"responses", `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":false}]}]}`, "input[0].content[0].text: must be a string, got a boolean"},
		{"responses", `{"model":"m","input":"hi","stream":"yes"}`, "stream: must be a boolean, got a string"},
	} {
		var err error
		if c.api == "anthropic" {
			var r *AnthropicRequest
			if r, err = ParseAnthropic(context.Background(), []byte(c.body)); err == nil {
				_, err = r.ToChat(context.Background())
			}
		} else {
			var r *ResponsesRequest
			if r, err = ParseResponses(context.Background(), []byte(c.body)); err == nil {
				_, err = r.ToChat(context.Background())
			}
		}
		if e := openai.AsError(err); err == nil || e.Status != 400 || e.Message != c.want {
			t.Errorf("%s %s: %v, want %q", c.api, c.body, err, c.want)
		}
	}
}

// TestAnthropicToChat maps every field a Messages request carries.
func TestAnthropicToChat(t *testing.T) {
	r, err := ParseAnthropic(context.Background(), []byte(anthropicSeeds[1]))
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.ToChat(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(c)
	want := `{"model":"m","messages":[` +
		`{"role":"system","content":[{"type":"text","text":"Be brief."},{"type":"text","text":"And kind."}]},` +
		`{"role":"user","content":[{"type":"text","text":"Weather?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]},` +
		`{"role":"assistant","content":"Checking.","tool_calls":[{"id":"t1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},` +
		`{"role":"tool","content":"sunny","tool_call_id":"t1"},` +
		`{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}},{"type":"text","text":"Thanks"}]}],` +
		`"max_tokens":64,"temperature":0.5,"top_p":0.9,"top_k":40,"stop":["END"],"user":"u1",` +
		`"tools":[{"type":"function","function":{"name":"get_weather","description":"The weather.","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],` +
		`"tool_choice":{"function":{"name":"get_weather"},"type":"function"},"parallel_tool_calls":false,"stream":true,"stream_options":{"include_usage":true}}`
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("chat request (-want +got):\n%s", diff)
	}
}

// TestReasoning reads what a Messages request asks of the model's
// reasoning from its thinking and output_config.
func TestReasoning(t *testing.T) {
	for _, c := range []struct {
		fields string
		want   Reasoning
	}{
		{``, Reasoning{}},
		{`"output_config":{"effort":"high"}`, Reasoning{}},
		{`"thinking":{"type":"enabled","budget_tokens":31999,"display":"omitted"},"output_config":{"effort":"high"}`, Reasoning{Asked: true, On: true, Effort: "high", Hidden: true}},
		{`"thinking":{"type":"enabled","budget_tokens":1024}`, Reasoning{Asked: true, On: true, Effort: "low"}},
		{`"thinking":{"type":"enabled","budget_tokens":4096}`, Reasoning{Asked: true, On: true, Effort: "medium"}},
		{`"thinking":{"type":"enabled","budget_tokens":16384}`, Reasoning{Asked: true, On: true, Effort: "high"}},
		{`"thinking":{"type":"enabled","budget_tokens":31999},"output_config":{"effort":"low"}`, Reasoning{Asked: true, On: true, Effort: "low"}},
		{`"thinking":{"type":"enabled"},"output_config":{"effort":"unheard-of"}`, Reasoning{Asked: true, On: true}},
		{`"thinking":{"type":"adaptive","display":"summarized"}`, Reasoning{Asked: true, On: true}},
		{`"thinking":{"type":"adaptive"},"output_config":{"effort":"xhigh"}`, Reasoning{Asked: true, On: true, Effort: "high"}},
		{`"thinking":{"type":"adaptive"},"output_config":{"effort":"medium"}`, Reasoning{Asked: true, On: true, Effort: "medium"}},
		{`"thinking":{"type":"disabled"},"output_config":{"effort":"low"}`, Reasoning{Asked: true}},
		{`"thinking":{"type":"sometimes"}`, Reasoning{}},
	} {
		body := `{"model":"m","max_tokens":5,"messages":[]`
		if c.fields != "" {
			body += "," + c.fields
		}
		r, err := ParseAnthropic(context.Background(), []byte(body+"}"))
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Reasoning(); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.fields, got, c.want)
		}
	}
}
