package translate

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// Bounds on what a translation writes for what it reads, held by every
// input: output ≤ k × input + a constant. A request's items translate to
// about their size, but the least of them take a few dozen bytes more
// (a custom tool of 28 bytes is a function of 200, the note of its
// namespace and a hashed name take 160 more). An answer's events grow
// more: the least chunk that opens or ends a tool call writes a few
// hundred bytes of events, and a Responses answer writes an item's text
// again in its done events and the response's, and the request it
// echoes three times.
const (
	maxRequestGrowth = 16
	maxAnswerGrowth  = 32
	fixedOutput      = 4 << 10 // what an empty request, or answer, writes
)

// checkBounded fails t when out bytes were written for in bytes read,
// past k × in + fixed.
func checkBounded(t *testing.T, what string, in, out, k, fixed int) {
	t.Helper()
	if out > k*in+fixed {
		t.Fatalf("%s: %d bytes in, %d out: more than %d times, and %d", what, in, out, k, fixed)
	}
}

// checkWritten fails t unless c is written as encoding/json writes it,
// but for HTML's escapes, within a limit of its own size, and refused
// with a 413 within one byte less; it is the body written.
func checkWritten(t *testing.T, c *ChatRequest) []byte {
	t.Helper()
	chat, err := MarshalChat(c, 1<<30)
	if err != nil {
		t.Fatalf("marshalling the chat request: %v", err)
	}
	std, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var got, want any
	if err := json.Unmarshal(chat, &got); err != nil {
		t.Fatalf("the chat body %s is not JSON: %v", chat, err)
	}
	json.Unmarshal(std, &want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("the chat body differs from encoding/json's (-encoding/json +written):\n%s", diff)
	}
	if again, err := MarshalChat(c, int64(len(chat))); err != nil || !bytes.Equal(again, chat) {
		t.Fatalf("within a limit of its own %d bytes: %s, %v", len(chat), again, err)
	}
	if _, err := MarshalChat(c, int64(len(chat)-1)); openai.AsError(err).Status != 413 {
		t.Fatalf("within a limit of %d bytes, %d written: %v, want a 413", len(chat)-1, len(chat), err)
	}
	return chat
}

// anthropicSeeds are Messages API requests for the fuzz targets to start
// from: every kind of block and field the translation maps.
var anthropicSeeds = []string{
	`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"m","max_tokens":64,"system":[{"type":"text","text":"Be brief."},{"type":"text","text":"And kind."}],"stream":true,
	  "stop_sequences":["END"],"temperature":0.5,"top_p":0.9,"top_k":40,"metadata":{"user_id":"u1"},
	  "tools":[{"name":"get_weather","description":"The weather.","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}],
	  "tool_choice":{"type":"tool","name":"get_weather","disable_parallel_tool_use":true},
	  "messages":[{"role":"user","content":[{"type":"text","text":"Weather?"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]},
	    {"role":"assistant","content":[{"type":"thinking","thinking":"hm"},{"type":"text","text":"Checking."},{"type":"tool_use","id":"t1","name":"get_weather","input":{"city":"Paris"}}]},
	    {"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"sunny"},{"type":"image","source":{"type":"url","url":"https://x/y.png"}}]},{"type":"text","text":"Thanks"}]}]}`,
	`{"model":"m","max_tokens":1,"system":"s","tool_choice":{"type":"any"},"messages":[{"role":"assistant","content":[]},{"role":"user","content":[]}]}`,
	`{"model":"m","max_tokens":32000,"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],
	  "thinking":{"type":"enabled","budget_tokens":31999,"display":"omitted"},"output_config":{"effort":"high"},"context_management":{"edits":[]},
	  "tools":[{"name":"Bash","input_schema":{"type":"object"}},{"name":"Read","input_schema":{"type":"object"},"defer_loading":true}],
	  "messages":[{"role":"user","content":"hi"},{"role":"system","content":"Be brief.","clear_at":"next_user_message"},
	    {"role":"assistant","content":[{"type":"thinking","thinking":"","signature":"c2ln"},{"type":"tool_use","id":"t1","name":"Bash","input":{}}]},
	    {"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"tool_reference","tool_name":"Read"}]}]},
	    {"role":"system","content":[{"type":"text","text":"Tools changed."},{"type":"tool_removal","tool":{"type":"tool_reference","name":"Bash"}},
	      {"type":"tool_addition","tool":{"type":"tool_definition","definition":{"name":"Grep","input_schema":{"type":"object"}}}}],"output_config":{"effort":"low"}},
	    {"role":"system","content":[{"type":"tool_addition","tool":{"type":"tool_reference","name":"Bash"}}]},
	    {"role":"system","content":[]}]}`,
}

// normalAnthropic is what a Messages API request asks, in a form that
// its translation to chat and back must keep: in each turn, an
// assistant's text joined before its tool uses and a user's tool results
// first, then the images they held; consecutive turns of one role joined;
// images as URLs; tool inputs compacted; the system prompt and the text
// of every system message in the conversation as one system prompt (the
// way back gathers them), and the tools as the system messages leave
// them. It leaves out what chat cannot carry: thinking blocks and a tool
// result's error flag.
func normalAnthropic(t *testing.T, r *AnthropicRequest) any {
	type block = normBlock
	type turn struct {
		Role   string
		Blocks []block
	}
	type tool struct{ Name, Description, Schema string }
	var tools []tool
	var removed []bool
	at := map[string]int{}
	offer := func(tl AnthropicTool) {
		if tl.Type != "" && tl.Type != "custom" {
			return // server tools are not offered to the model
		}
		tools = append(tools, tool{tl.Name, tl.Description, compact(tl.InputSchema)})
		removed = append(removed, false)
		at[tl.Name] = len(tools) - 1
	}
	for _, tl := range r.Tools {
		offer(tl)
	}
	// The system prompt's sources, in order: each a string or text blocks.
	type source struct {
		isString bool
		texts    []string
	}
	var sources []source
	if !isNull(r.System) {
		if isString(r.System) {
			sources = append(sources, source{true, []string{contentText(r.System)}})
		} else {
			var blocks []AnthropicBlock
			json.Unmarshal(r.System, &blocks)
			var texts []string
			for _, b := range blocks {
				texts = append(texts, b.Text)
			}
			sources = append(sources, source{false, texts})
		}
	}
	var turns []turn
	for _, m := range r.Messages {
		if m.Role == "system" {
			if isString(m.Content) {
				sources = append(sources, source{true, []string{contentText(m.Content)}})
				continue
			}
			var blocks []AnthropicBlock
			json.Unmarshal(m.Content, &blocks)
			var texts []string
			for _, b := range blocks {
				switch {
				case b.Type == "text":
					texts = append(texts, b.Text)
				case b.Tool == nil:
				case b.Tool.Definition != nil && b.Type == "tool_addition":
					d := *b.Tool.Definition
					if d.Type != "" && d.Type != "custom" {
						break
					}
					if i, ok := at[d.Name]; ok {
						tools[i], removed[i] = tool{d.Name, d.Description, compact(d.InputSchema)}, false
					} else {
						offer(d)
					}
				default:
					name := b.Tool.Name
					if d := b.Tool.Definition; d != nil {
						if d.Type != "" && d.Type != "custom" {
							break
						}
						name = d.Name
					}
					if i, ok := at[name]; ok {
						removed[i] = b.Type == "tool_removal"
					}
				}
			}
			if len(texts) > 0 {
				sources = append(sources, source{false, texts})
			}
			continue
		}
		var blocks []AnthropicBlock
		if isString(m.Content) {
			blocks = []AnthropicBlock{{Type: "text", Text: contentText(m.Content)}}
		} else if err := json.Unmarshal(m.Content, &blocks); err != nil {
			t.Fatalf("content %s: %v", m.Content, err)
		}
		var text strings.Builder
		var results, images, rest []block
		for _, b := range normalBlocks(t, blocks) {
			switch {
			case m.Role == "assistant" && b.Type == "text":
				text.WriteString(b.Text)
			case b.Type == "tool_result":
				results = append(results, b)
			case b.Type == "result_image":
				images = append(images, block{Type: "image", URL: b.URL})
			default:
				rest = append(rest, b)
			}
		}
		if m.Role == "assistant" && (text.Len() > 0 || len(rest) == 0) {
			rest = append([]block{{Type: "text", Text: text.String()}}, rest...)
		}
		normal := append(append(results, images...), rest...)
		if n := len(turns); n > 0 && turns[n-1].Role == m.Role {
			turns[n-1].Blocks = append(turns[n-1].Blocks, normal...)
			continue
		}
		turns = append(turns, turn{m.Role, normal})
	}
	var system string
	if len(sources) == 1 && sources[0].isString {
		system = "string:" + sources[0].texts[0]
	} else {
		for _, src := range sources {
			for _, text := range src.texts {
				system += "block:" + text + "\n"
			}
		}
	}
	var offered []tool
	for i, tl := range tools {
		if !removed[i] {
			offered = append(offered, tl)
		}
	}
	user := ""
	if r.Metadata != nil {
		user = r.Metadata.UserID
	}
	return struct {
		Model       string
		MaxTokens   *int64
		Temperature *float64
		TopP        *float64
		TopK        *int64
		Stop        []string
		Stream      bool
		User        string
		System      string
		Turns       []turn
		Tools       []tool
		ToolChoice  *AnthropicToolChoice
	}{r.Model, r.MaxTokens, r.Temperature, r.TopP, r.TopK, r.StopSequences, r.Stream, user, system, turns, offered, r.ToolChoice}
}

// normBlock is a content block as normalAnthropic compares it.
type normBlock struct{ Type, Text, URL, ID, Name, Input string }

func normalBlocks(t *testing.T, blocks []AnthropicBlock) []normBlock {
	var out []normBlock
	for _, b := range blocks {
		switch b.Type {
		case "text":
			out = append(out, normBlock{Type: "text", Text: b.Text})
		case "image":
			p, err := imagePart(b.Source, "")
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, normBlock{Type: "image", URL: p.ImageURL.URL})
		case "tool_use":
			out = append(out, normBlock{Type: "tool_use", ID: b.ID, Name: b.Name, Input: compact(toolInput(compact(b.Input)))})
		case "tool_result":
			text, images, err := toolResultContent(&progress{ctx: context.Background()}, b.Content, "")
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, normBlock{Type: "tool_result", ID: b.ToolUseID, Text: text})
			for _, im := range images {
				out = append(out, normBlock{Type: "result_image", URL: im.ImageURL.URL})
			}
		}
	}
	return out
}

// FuzzTranslateAnthropic translates Messages API requests to chat and
// back: no input panics, every request that translates gives a chat body
// the router's parser takes, and the way back keeps every mapped field.
// Every body written, to chat, to an anthropic pool and the client's own
// without its server tools, is at most a constant times what it came
// from.
func FuzzTranslateAnthropic(f *testing.F) {
	for _, s := range anthropicSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := ParseAnthropic(context.Background(), body)
		if err != nil {
			if openai.AsError(err).Status != 400 {
				t.Fatalf("error %v is not a 400", err)
			}
			return
		}
		// The client's own body, as an anthropic pool is sent it.
		if own, err := WithoutServerTools(body); err == nil {
			checkBounded(t, "without server tools", len(body), len(own), maxRequestGrowth, fixedOutput)
		}
		c, err := r.ToChat(context.Background())
		if err != nil {
			return
		}
		chat := checkWritten(t, c)
		checkBounded(t, "to chat", len(body), len(chat), maxRequestGrowth, fixedOutput)
		p, err := openai.ParseRequest(chat)
		if err != nil {
			t.Fatalf("the router refuses the translation %s: %v", chat, err)
		}
		if r.MaxTokens != nil && p.MaxTokens != *r.MaxTokens || p.Choices != 1 {
			t.Fatalf("the router reads max tokens %d and %d answers of %s, asked for %v", p.MaxTokens, p.Choices, chat, r.MaxTokens)
		}
		// To an anthropic pool, the bound sent is the one reserved: the
		// request's, or the router's default, as encoding/json reads it.
		bound := p.MaxTokens
		if bound == 0 {
			bound = 777
		}
		up, err := ChatToAnthropicBody(context.Background(), chat, bound, 1<<30)
		if err != nil {
			t.Fatalf("chat %s does not translate for an anthropic pool: %v", chat, err)
		}
		var sent map[string]json.RawMessage
		if err := json.Unmarshal(up, &sent); err != nil || string(sent["max_tokens"]) != strconv.FormatInt(bound, 10) {
			t.Fatalf("an anthropic pool is asked for max_tokens %s (%v), %d reserved: %s", sent["max_tokens"], err, bound, up)
		}
		checkBounded(t, "chat to an anthropic pool", len(chat), len(up), maxRequestGrowth, fixedOutput)
		if again, err := ChatToAnthropicBody(context.Background(), chat, bound, int64(len(up))); err != nil || !bytes.Equal(again, up) {
			t.Fatalf("to an anthropic pool within a limit of its own %d bytes: %s, %v", len(up), again, err)
		}
		if _, err := ChatToAnthropicBody(context.Background(), chat, bound, int64(len(up)-1)); openai.AsError(err).Status != 413 {
			t.Fatalf("to an anthropic pool within a limit of %d bytes, %d written: %v, want a 413", len(up)-1, len(up), err)
		}
		var c2 ChatRequest
		if err := json.Unmarshal(chat, &c2); err != nil {
			t.Fatal(err)
		}
		back, err := ChatToAnthropic(context.Background(), &c2)
		if err != nil {
			t.Fatalf("chat %s does not translate back: %v", chat, err)
		}
		wire, err := json.Marshal(back)
		if err != nil {
			t.Fatal(err)
		}
		// What an anthropic pool is sent is what encoding/json writes,
		// but for HTML's escapes.
		std := *back
		std.MaxTokens = &bound
		var got, want any
		json.Unmarshal(up, &got)
		json.Unmarshal(mustJSON(&std), &want)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("the body an anthropic pool is sent differs from encoding/json's (-encoding/json +written):\n%s", diff)
		}
		again, err := ParseAnthropic(context.Background(), wire)
		if err != nil {
			t.Fatalf("the translation back %s does not parse: %v", wire, err)
		}
		if diff := cmp.Diff(normalAnthropic(t, r), normalAnthropic(t, again), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("lost on the way through chat (-sent +back):\n%s\nchat: %s", diff, chat)
		}
	})
}

// FuzzTranslateResponses translates Responses API requests to chat: no
// input panics, and every request that translates gives a chat body the
// router's parser takes, with the model, limit and stream asked for, at
// most a constant times the request.
func FuzzTranslateResponses(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","input":"hi"}`,
		`{"model":"m","instructions":"Be brief.","max_output_tokens":9,"stream":true,"temperature":1,"top_p":0.5,"user":"u",
		  "tools":[{"type":"function","name":"f","parameters":{"type":"object"},"strict":true}],"tool_choice":{"type":"function","name":"f"},
		  "text":{"format":{"type":"json_schema","name":"x","schema":{"type":"object"}}},
		  "input":[{"role":"developer","content":"d"},{"type":"message","role":"user","content":[{"type":"input_text","text":"q"},{"type":"input_image","image_url":"https://x/i.png"}]},
		    {"type":"message","role":"assistant","content":[{"type":"output_text","text":"a"}]},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},
		    {"type":"function_call_output","call_id":"c","output":"42"},{"type":"reasoning","summary":[]}]}`,
		`{"model":"m","input":[],"previous_response_id":"resp_1"}`,
		codexRequest, toolsRequest, additionalToolsRequest,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := ParseResponses(context.Background(), body)
		if err != nil {
			if openai.AsError(err).Status != 400 {
				t.Fatalf("error %v is not a 400", err)
			}
			return
		}
		c, err := r.ToChat(context.Background())
		if err != nil {
			return
		}
		chat := checkWritten(t, c)
		checkBounded(t, "to chat", len(body), len(chat), maxRequestGrowth, fixedOutput)
		p, err := openai.ParseRequest(chat)
		if err != nil {
			t.Fatalf("the router refuses the translation %s: %v", chat, err)
		}
		var limit int64
		if r.MaxOutputTokens != nil {
			limit = *r.MaxOutputTokens
		}
		key := ""
		if r.PromptCacheKey != nil {
			key = *r.PromptCacheKey
		}
		if p.Model != r.Model || p.MaxTokens != limit || p.Stream != r.Stream || p.IncludeUsage != r.Stream || p.User != r.User || p.PromptCacheKey != key {
			t.Errorf("chat %s asks %+v of request %s", chat, p, body)
		}
		// Every tool but the hosted ones is offered, a namespace's each
		// under a function name of its own that maps back to it.
		offered := map[string]bool{}
		for _, ct := range c.Tools {
			offered[ct.Function.Name] = true
		}
		want := 0
		for _, tl := range append(slices.Clip(r.Tools), r.added...) {
			switch tl.Type {
			case "function", "custom":
				want++
				if !offered[tl.Name] {
					t.Errorf("%s is not offered", tl.Name)
				}
			case "namespace":
				for _, m := range tl.Tools {
					want++
					name := r.names.chatName(tl.Name, m.Name)
					if len(name) > maxFunctionName || string(appendFunctionName(nil, name)) != name {
						t.Errorf("%s.%s is offered as %q", tl.Name, m.Name, name)
					}
					if got := r.names.ref(name); !offered[name] || got != (toolRef{tl.Name, m.Name, m.Type == "custom"}) {
						t.Errorf("%s.%s is offered as %q (%v), which stands for %+v", tl.Name, m.Name, name, offered[name], got)
					}
				}
			}
		}
		if len(c.Tools) != want {
			t.Errorf("%d tools offered of %d", len(c.Tools), want)
		}
	})
}

// FuzzTranslateStream sends chat stream events, one a line, through both
// stream translators, with and without the undecoded path for text: no
// input panics, every event written is JSON, both paths write the same
// events, and the text the client is sent is the text the chunks held,
// in events at most a constant times the chunks. The same lines, read as
// an Anthropic upstream's events, answers and errors, must give chat
// JSON, each event's chunks at most a constant times the event.
func FuzzTranslateStream(f *testing.F) {
	f.Add([]byte(`{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}
{"choices":[{"index":0,"delta":{"content":"Hel\u006co"},"finish_reason":null}]}
{"choices":[{"index":0,"delta":{"content":" world"},"logprobs":{"content":[]},"finish_reason":null}]}
{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"f","arguments":""}}]}}]}
{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":1}"}}]}}]}
{"choices":[{"index":0,"delta":{"content":"!"},"finish_reason":"stop","stop_reason":"END"}]}
{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7,"prompt_tokens_details":{"cached_tokens":1}}}`))
	f.Add([]byte(`{"choices":[{"delta":{"role":"assistant","content":null,"reasoning_content":"Think"}}]}
{"choices":[{"delta":{"content":"a","reasoning_content":null}}]}
{"choices":[{"delta":{"content":"b","reasoning_content":"c"}}]}`))
	f.Add([]byte(`{"choices":[{"delta":{"reasoning":"Think","reasoning_content":"Think"}}]}
{"choices":[{"delta":{"thinking_blocks":[{"type":"thinking","signature":"c2ln"},{"type":"redacted_thinking","data":"ZGF0YQ=="}]}}]}
{"choices":[{"delta":{"content":"a","reasoning":null}}]}`))
	f.Add([]byte(`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}
{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}}
{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"c2ln"}}
{"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"ZGF0YQ=="}}
{"type":"message","content":[{"type":"thinking","thinking":"hm","signature":"c2ln"},{"type":"redacted_thinking","data":"eA=="},{"type":"text","text":"a"}]}`))
	f.Add([]byte(`{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"reasoning_content":"The user"}}]}
{"choices":[{"index":0,"delta":{"reasoning_content":" wants a patch.","content":"Patching."}}]}
{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"multi_agent_v1__spawn_agent","arguments":"{}"}}]}}]}
{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"c2","type":"function","function":{"name":"apply_patch","arguments":"{\"input\":"}}]}}]}
{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"\"*** Begin Patch\"}"}}]}}]}
{"choices":[{"index":0,"delta":{"reasoning_content":"More."}}]}
{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`))
	f.Add([]byte(`{"choices":[{"delta":{"content":"a","Content":"b"}}]}
{"choices":[{"delta":{"content":"x"}},{"delta":{"content":"y"}}]}
{"error":{"message":"boom"}}`))
	f.Add([]byte(`{"type":"message_start","message":{"id":"msg_1","model":"c","usage":{"input_tokens":25,"output_tokens":1}}}
{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}
{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}
{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"hi"}}
{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":15}}
{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}
{"type":"message_stop"}`))
	// An anthropic pool's message id and model of 8 KiB, past what a
	// chunk may grow by.
	f.Add([]byte(`{"type":"message_start","message":{"id":"` + strings.Repeat("i", 8<<10) + `","model":"` + strings.Repeat("m", 8<<10) + `"}}
{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}
{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":1}}`))
	codex, err := ParseResponses(context.Background(), []byte(codexRequest))
	if err != nil {
		f.Fatal(err)
	}
	if _, err := codex.ToChat(context.Background()); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, stream []byte) {
		lines := bytes.Split(stream, []byte("\n"))
		// Each line read as an Anthropic upstream's event, and as its
		// whole answer, gives chat chunks and answers that are JSON, each
		// event's at most a constant larger than the event.
		dec := AnthropicUpstream{}.Stream()
		for _, l := range lines {
			out := 0
			for _, c := range dec.Event(nil, l, nil) {
				if !json.Valid(c) && !bytes.Equal(c, openai.Done) {
					t.Fatalf("event %s gave the chunk %s", l, c)
				}
				out += len(c)
			}
			checkBounded(t, "an anthropic pool's event", len(l), out, maxAnswerGrowth, fixedOutput)
			if a, err := (AnthropicUpstream{}).Answer(l); err == nil && !json.Valid(a) {
				t.Fatalf("answer %s gave %s", l, a)
			}
			if e := (AnthropicUpstream{}).Error(400, l); !json.Valid(e) {
				t.Fatalf("error %s gave %s", l, e)
			}
		}
		var want strings.Builder
		for _, l := range lines {
			var c chatChunk
			if json.Unmarshal(l, &c) == nil && len(c.Choices) > 0 && c.Choices[0].Delta.Content != nil {
				want.WriteString(*c.Choices[0].Delta.Content)
			}
		}
		for _, name := range []string{"anthropic", "responses", "responses to codex"} {
			var got [2][]any
			var text [2]string
			var out [2]int
			for i, decodeAll := range []bool{false, true} {
				var tr openai.EventTranslator
				if name == "anthropic" {
					tr = (&Anthropic{ID: "msg_1", Model: "m", StopSequences: []string{"END"}, decodeAll: decodeAll}).Stream()
				} else if name == "responses" {
					tr = (&Responses{ID: "resp_1", Model: "m", decodeAll: decodeAll}).Stream()
				} else {
					// Reasoning summarized, namespaced and custom tools.
					tr = (&Responses{ID: "resp_1", Model: "m", Request: codex, decodeAll: decodeAll}).Stream()
				}
				emit := func(kind, data []byte) error {
					var v map[string]any
					if err := json.Unmarshal(data, &v); err != nil {
						t.Fatalf("%s event %s is not JSON: %v", kind, data, err)
					}
					if v["type"] != string(kind) {
						t.Fatalf("event %s has type %v", kind, v["type"])
					}
					got[i] = append(got[i], v)
					out[i] += len(data)
					if d, ok := v["delta"].(map[string]any); ok && d["type"] == "text_delta" {
						text[i] += d["text"].(string)
					}
					if kind := string(kind); kind == "response.output_text.delta" {
						text[i] += v["delta"].(string)
					}
					return nil
				}
				for _, l := range lines {
					tr.Event(l, emit)
				}
				tr.Event(openai.Done, emit)
			}
			if diff := cmp.Diff(got[1], got[0]); diff != "" {
				t.Fatalf("%s: the undecoded path differs (-decoded +undecoded):\n%s", name, diff)
			}
			if text[0] != want.String() {
				t.Errorf("%s: text %q, the chunks held %q", name, text[0], want.String())
			}
			// The answer's events, the request they echo three times
			// (codexRequest, 3 KiB) aside, are at most a constant times
			// the chunks.
			checkBounded(t, name, len(stream), out[0], maxAnswerGrowth, 3*len(codexRequest)+fixedOutput)
		}
	})
}
