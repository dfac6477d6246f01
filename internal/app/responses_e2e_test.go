package app

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// TestResponsesClientOnSim runs the official OpenAI SDK's Responses calls
// against the demo setup.
func TestResponsesClientOnSim(t *testing.T) {
	_, client := startDemo(t)
	ctx := t.Context()
	params := responses.ResponseNewParams{
		Model:           "demo",
		Instructions:    openai.String("Be brief."),
		Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hello in five words.")},
		MaxOutputTokens: openai.Int(6),
	}

	t.Run("plain", func(t *testing.T) {
		r, err := client.Responses.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		if r.OutputText() == "" || r.Status == "" || r.Usage.OutputTokens == 0 || r.Usage.InputTokens == 0 || r.Model != "demo" || !strings.HasPrefix(r.ID, "resp_") {
			t.Errorf("%s", r.RawJSON())
		}
	})

	t.Run("streamed", func(t *testing.T) {
		s := client.Responses.NewStreaming(ctx, params)
		var text string
		var kinds []string
		var final responses.Response
		seq := int64(0)
		for s.Next() {
			ev := s.Current()
			kinds = append(kinds, ev.Type)
			if ev.SequenceNumber != seq {
				t.Errorf("event %s has sequence_number %d, want %d", ev.Type, ev.SequenceNumber, seq)
			}
			seq++
			switch ev.Type {
			case "response.output_text.delta":
				text += ev.Delta
			case "response.completed", "response.incomplete":
				final = ev.Response
			}
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		if text == "" || final.OutputText() != text || final.Usage.OutputTokens == 0 {
			t.Errorf("text %q, final %s", text, final.RawJSON())
		}
		want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"}
		if diff := cmp.Diff(want, kinds[:4]); diff != "" {
			t.Errorf("first events (-want +got):\n%s", diff)
		}
		want = []string{"response.output_text.done", "response.content_part.done", "response.output_item.done"}
		if diff := cmp.Diff(want, kinds[len(kinds)-4:len(kinds)-1]); diff != "" {
			t.Errorf("last events (-want +got):\n%s", diff)
		}
	})

	t.Run("previous response", func(t *testing.T) {
		p := params
		p.PreviousResponseID = openai.String("resp_123")
		_, err := client.Responses.New(ctx, p)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "previous_response_id" || !strings.Contains(apiErr.Message, "stores no responses") {
			t.Errorf("%v", err)
		}
	})

	t.Run("wrong type", func(t *testing.T) {
		_, err := client.Responses.New(ctx, params, option.WithJSONSet("max_output_tokens", "ten"))
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Message != "max_output_tokens: must be an integer, got a string" {
			t.Errorf("%v", err)
		}
	})
}

// TestResponsesClientTools runs function calls through the Responses API
// in front of a vLLM-style upstream, whole and streamed, and sends the
// call's output back.
func TestResponsesClientTools(t *testing.T) {
	f, g := startFakeGateway(t)
	client := openai.NewClient(option.WithBaseURL(g.URL()), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx := t.Context()
	tool := responses.ToolParamOfFunction("get_weather", map[string]any{
		"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"},
	}, true)
	ask := responses.ResponseInputItemParamOfMessage("What is the weather in Paris?", responses.EasyInputMessageRoleUser)
	params := responses.ResponseNewParams{
		Model: "demo",
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{ask}},
		Tools: []responses.ToolUnionParam{tool},
	}
	wantCall := func(t *testing.T, r *responses.Response) {
		t.Helper()
		if len(r.Output) != 1 {
			t.Fatalf("%s", r.RawJSON())
		}
		it := r.Output[0]
		args := it.Arguments.OfString
		if it.Type != "function_call" || it.CallID != fakeToolID || it.Name != "get_weather" || args != fakeToolArgs || it.Status != "completed" {
			t.Errorf("item %s", it.RawJSON())
		}
		if r.Usage.InputTokens != fakePrompt || r.Usage.InputTokensDetails.CachedTokens != fakeCached || r.Usage.OutputTokens != 7 {
			t.Errorf("usage %s", r.Usage.RawJSON())
		}
	}

	t.Run("plain", func(t *testing.T) {
		r, err := client.Responses.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		wantCall(t, r)
	})

	t.Run("streamed", func(t *testing.T) {
		s := client.Responses.NewStreaming(ctx, params)
		var final responses.Response
		var args []string
		for s.Next() {
			ev := s.Current()
			switch ev.Type {
			case "response.function_call_arguments.delta":
				args = append(args, ev.Delta)
			case "response.function_call_arguments.done":
				args = append(args, "done:"+ev.Arguments)
			case "response.completed":
				final = ev.Response
			}
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		wantCall(t, &final)
		if diff := cmp.Diff([]string{`{"city":`, `"Paris"}`, "done:" + fakeToolArgs}, args); diff != "" {
			t.Errorf("arguments (-want +got):\n%s", diff)
		}
	})

	t.Run("call output", func(t *testing.T) {
		out := responses.ResponseInputItemParamOfFunctionCallOutput("sunny, 24C")
		out.OfFunctionCallOutput.CallID = openai.String(fakeToolID)
		p := params
		p.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			ask, responses.ResponseInputItemParamOfFunctionCall(fakeToolArgs, fakeToolID, "get_weather"), out,
		}}
		r, err := client.Responses.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if r.OutputText() != fakeText || r.Status != "completed" {
			t.Errorf("%s", r.RawJSON())
		}
		msgs, _ := json.Marshal(f.last(t)["messages"])
		want := `[{"content":"What is the weather in Paris?","role":"user"},` +
			`{"role":"assistant","tool_calls":[{"function":{"arguments":"{\"city\":\"Paris\"}","name":"get_weather"},"id":"chatcmpl-tool-7b1","type":"function"}]},` +
			`{"content":"sunny, 24C","role":"tool","tool_call_id":"chatcmpl-tool-7b1"}]`
		if string(msgs) != want {
			t.Errorf("messages sent\n%s\nwant\n%s", msgs, want)
		}
	})

	t.Run("broken stream", func(t *testing.T) {
		f.cut = true
		defer func() { f.cut = false }()
		p := params
		p.Tools = nil
		s := client.Responses.NewStreaming(ctx, p)
		var kinds []string
		for s.Next() {
			kinds = append(kinds, s.Current().Type)
		}
		if s.Err() != nil {
			t.Fatal(s.Err())
		}
		if len(kinds) < 2 || kinds[len(kinds)-2] != "error" || kinds[len(kinds)-1] != "response.failed" {
			t.Errorf("a cut stream ended with %v", kinds)
		}
	})

	// A hosted tool is left out, and the answer says so.
	t.Run("hosted tool", func(t *testing.T) {
		p := params
		p.Tools = append([]responses.ToolUnionParam{{OfWebSearch: &responses.WebSearchToolParam{Type: responses.WebSearchToolTypeWebSearch}}}, tool)
		var resp *http.Response
		r, err := client.Responses.New(ctx, p, option.WithResponseInto(&resp))
		if err != nil {
			t.Fatal(err)
		}
		wantCall(t, r)
		if got := resp.Header.Get("X-Llmgw-Dropped-Tools"); got != "web_search" {
			t.Errorf("X-Llmgw-Dropped-Tools %q", got)
		}
		if tools := f.last(t)["tools"].([]any); len(tools) != 1 {
			t.Errorf("tools sent %v", tools)
		}
	})
}
