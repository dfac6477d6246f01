package translate

// Each translation, and the count, is linear in the body and stops when
// its context ends: growth tests, benchmarks at two sizes, and
// cancellation.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"gitea.mynodes.xyz/ilker/llmgw/internal/lineartest"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
	"gitea.mynodes.xyz/ilker/llmgw/internal/tokenize"
)

// items is n copies of item, each given its index, joined by commas.
func items(n int, item func(i int) string) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(item(i))
	}
	return b.String()
}

// Bodies of n of a translation's largest repeated part.
var (
	// chatTools is a chat request to an anthropic pool, its tool calls'
	// results n tool messages, which become one user turn.
	chatTools = func(n int) string {
		return `{"model":"c","max_tokens":16,"messages":[{"role":"user","content":"look these up"},` +
			`{"role":"assistant","content":null,"tool_calls":[{"id":"t","type":"function","function":{"name":"lookup","arguments":"{}"}}]},` +
			items(n, func(i int) string {
				return fmt.Sprintf(`{"role":"tool","tool_call_id":"t%d","content":"result %d"}`, i, i)
			}) +
			`,{"role":"user","content":[{"type":"text","text":"and then?"}]}]}`
	}
	// anthropicResults is a Messages request whose last turn holds n
	// tool results, which become n tool messages.
	anthropicResults = func(n int) string {
		return `{"model":"c","max_tokens":16,"messages":[{"role":"user","content":"look these up"},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"lookup","input":{}}]},{"role":"user","content":[` +
			items(n, func(i int) string {
				return fmt.Sprintf(`{"type":"tool_result","tool_use_id":"t%d","content":[{"type":"text","text":"result %d"}]}`, i, i)
			}) + `]}]}`
	}
	// anthropicTurns is a Messages request of n turns of text blocks.
	anthropicTurns = func(n int) string {
		return `{"model":"c","max_tokens":16,"system":[{"type":"text","text":"Be brief."}],"messages":[` +
			items(n, func(i int) string {
				return fmt.Sprintf(`{"role":%q,"content":[{"type":"text","text":"turn %d"},{"type":"text","text":"of the talk"}]}`, [2]string{"user", "assistant"}[i%2], i)
			}) + `]}`
	}
	// anthropicParts is a Messages request of one turn of n text blocks,
	// which become one chat message of n parts.
	anthropicParts = func(n int) string {
		return `{"model":"c","max_tokens":16,"messages":[{"role":"user","content":[` +
			items(n, func(i int) string { return fmt.Sprintf(`{"type":"text","text":"part %d "}`, i) }) + `]}]}`
	}
	// anthropicAnswer is a Messages API answer of n text blocks.
	anthropicAnswer = func(n int) string {
		return `{"id":"msg_1","type":"message","role":"assistant","model":"c","content":[` +
			items(n, func(i int) string { return fmt.Sprintf(`{"type":"text","text":"block %d "}`, i) }) +
			`],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}`
	}
	// argumentChunks is a chat stream of one tool call whose arguments
	// come in n pieces, a chunk a line.
	argumentChunks = func(n int) string {
		return `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"f","arguments":""}}]}}]}` + "\n" +
			strings.Repeat(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":1}"}}]}}]}`+"\n", n) +
			`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`
	}
	// responsesNamespace is a Responses request of one namespace of n
	// tools, each name too long for namespace__name, and as many calls
	// of them in its input.
	responsesNamespace = func(n int) string {
		long := strings.Repeat("x", 64)
		return `{"model":"c","tools":[{"type":"namespace","name":"ns","tools":[` + items(n, func(i int) string {
			return fmt.Sprintf(`{"type":"function","name":"%s%d","parameters":{}}`, long, i)
		}) + `]}],"input":[` + items(n, func(i int) string {
			return fmt.Sprintf(`{"type":"function_call","call_id":"c%d","namespace":"ns","name":"%s%d","arguments":"{}"}`, i, long, i)
		}) + `]}`
	}
	// namespaceDescription is a Responses request of one namespace with
	// a description of 256 KiB, shared by its n tools.
	namespaceDescription = func(n int) string {
		return `{"model":"c","input":"hi","tools":[{"type":"namespace","name":"ns","description":"` + strings.Repeat("d", 256<<10) +
			`","tools":[` + items(n, func(i int) string {
			return fmt.Sprintf(`{"type":"function","name":"f%d","description":"Tool %d.","parameters":{}}`, i, i)
		}) + `]}]}`
	}
	// longMessageID is an Anthropic upstream's stream of n pieces of
	// text, its message's id and model 256 KiB each, shared by every
	// chunk they become.
	longMessageID = func(n int) string {
		long := strings.Repeat("x", 256<<10)
		return `{"type":"message_start","message":{"id":"` + long + `","model":"` + long + `","usage":{"input_tokens":3,"output_tokens":1}}}` + "\n" +
			strings.Repeat(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"piece "}}`+"\n", n) +
			`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":9}}` + "\n" +
			`{"type":"message_stop"}`
	}
	// reasoningChunks is a chat stream of n pieces of reasoning, a chunk
	// a line.
	reasoningChunks = func(n int) string {
		return strings.Repeat(`{"choices":[{"index":0,"delta":{"reasoning_content":"Let me think. "}}]}`+"\n", n) +
			`{"choices":[{"index":0,"delta":{"content":"Done."},"finish_reason":"stop"}]}`
	}
	// responsesItems is a Responses request of n input items: messages,
	// function calls and their outputs.
	responsesItems = func(n int) string {
		return `{"model":"c","max_output_tokens":16,"input":[` + items(n, func(i int) string {
			switch i % 3 {
			case 0:
				return fmt.Sprintf(`{"role":"user","content":[{"type":"input_text","text":"item %d"}]}`, i)
			case 1:
				return fmt.Sprintf(`{"type":"function_call","call_id":"c%d","name":"lookup","arguments":"{}"}`, i)
			}
			return fmt.Sprintf(`{"type":"function_call_output","call_id":"c%d","output":"result %d"}`, i-1, i)
		}) + `]}`
	}
)

// bodyLimit bounds the bodies the translations here write: larger than
// any of them.
const bodyLimit = 1 << 30

// The translations, each from a body: what the router runs for each API
// and for an anthropic pool, each giving the bytes it writes, the body
// sent on.
func chatToAnthropic(ctx context.Context, body []byte) (int, error) {
	up, err := ChatToAnthropicBody(ctx, body, 16, bodyLimit)
	return len(up), err
}

func anthropicToChat(ctx context.Context, body []byte) (int, error) {
	r, err := ParseAnthropic(ctx, body)
	if err != nil {
		return 0, err
	}
	return chatBody(r.ToChat(ctx))
}

func responsesToChat(ctx context.Context, body []byte) (int, error) {
	r, err := ParseResponses(ctx, body)
	if err != nil {
		return 0, err
	}
	return chatBody(r.ToChat(ctx))
}

// chatBody is the size of c's body, as the router writes it.
func chatBody(c *ChatRequest, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	chat, err := MarshalChat(c, bodyLimit)
	return len(chat), err
}

func countTokens(ctx context.Context, body []byte) (int, error) {
	r, err := ParseAnthropic(ctx, body)
	if err != nil {
		return 0, err
	}
	c, err := r.ToChat(ctx)
	if err != nil {
		return 0, err
	}
	if _, err = PromptTokens(ctx, c, tokenize.Count); err != nil {
		return 0, err
	}
	return chatBody(c, nil)
}

// The translations of answers, which their requests' contexts do not
// bound: they end with the upstream's answer. Each gives the bytes it
// writes: the answer, or the data of the events streamed.
func anthropicUpstreamAnswer(_ context.Context, body []byte) (int, error) {
	a, err := AnthropicUpstream{}.Answer(body)
	return len(a), err
}

func anthropicUpstreamStreamed(_ context.Context, body []byte) (int, error) {
	dec, out := AnthropicUpstream{}.Stream(), 0
	for l := range bytes.SplitSeq(body, []byte("\n")) {
		for _, c := range dec.Event(nil, l, nil) {
			out += len(c)
		}
	}
	return out, nil
}

func anthropicStreamed(_ context.Context, body []byte) (int, error) {
	return streamed((&Anthropic{ID: "msg_1", Model: "m"}).Stream(), body)
}

func responsesStreamed(_ context.Context, body []byte) (int, error) {
	return streamed((&Responses{ID: "resp_1", Model: "m"}).Stream(), body)
}

// responsesSummarized is responsesStreamed for a request that asks for
// the model's reasoning.
func responsesSummarized(_ context.Context, body []byte) (int, error) {
	summary := "auto"
	q := &ResponsesRequest{Reasoning: &ResponsesReasoning{Summary: &summary}}
	return streamed((&Responses{ID: "resp_1", Model: "m", Request: q}).Stream(), body)
}

// streamed sends tr the chat chunks of body, one a line, and Done, and
// is the bytes of the events' data it writes.
func streamed(tr openai.EventTranslator, body []byte) (int, error) {
	out := 0
	emit := func(kind, data []byte) error {
		out += len(data)
		return nil
	}
	for l := range bytes.SplitSeq(body, []byte("\n")) {
		if err := tr.Event(l, emit); err != nil {
			return out, err
		}
	}
	err := tr.Event(openai.Done, emit)
	return out, err
}

// translation is a translation, with the body it is measured on; the
// bytes it writes are its output.
type translation struct {
	name      string
	body      func(n int) string
	translate func(ctx context.Context, body []byte) (out int, err error)
}

// translations are every request's translation and count, with the body
// each is measured on.
var translations = []translation{
	{"ChatToAnthropic/tools", chatTools, chatToAnthropic},
	{"AnthropicToChat/tool_results", anthropicResults, anthropicToChat},
	{"AnthropicToChat/turns", anthropicTurns, anthropicToChat},
	{"ResponsesToChat/items", responsesItems, responsesToChat},
	{"ResponsesToChat/namespace_tools", responsesNamespace, responsesToChat},
	{"ResponsesToChat/namespace_description", namespaceDescription, responsesToChat},
	{"PromptTokens/turns", anthropicTurns, countTokens},
	{"PromptTokens/parts", anthropicParts, countTokens},
}

// answers are the translations of answers that gather what an answer
// repeats (text blocks into one text, argument pieces into one call),
// or write what the answer shares into each event (a streamed message's
// id and model).
var answers = []translation{
	{"AnthropicUpstreamAnswer/text_blocks", anthropicAnswer, anthropicUpstreamAnswer},
	{"AnthropicUpstreamStream/long_message_id", longMessageID, anthropicUpstreamStreamed},
	{"AnthropicStream/argument_pieces", argumentChunks, anthropicStreamed},
	{"ResponsesStream/argument_pieces", argumentChunks, responsesStreamed},
	{"ResponsesStream/reasoning_pieces", reasoningChunks, responsesSummarized},
}

// maxGrowth is the most bytes a translation here may write for each byte
// of its body: the bodies are of items of a few dozen bytes, which are
// translated to about their size; a field shared by every item, copied
// into each, writes the items times the field.
const maxGrowth = 4

// TestTranslationsGrowLinearly: 8 times the items take about 8 times the
// time and bytes in every translation, and every translation writes at
// most maxGrowth times the bytes of its body, whose items add at most
// maxGrowth times theirs.
func TestTranslationsGrowLinearly(t *testing.T) {
	for _, tr := range append(translations[:len(translations):len(translations)], answers...) {
		t.Run(tr.name, func(t *testing.T) {
			lineartest.LinearOutput(t, 64, maxGrowth, func(t testing.TB, n int) (int, func() int) {
				body := []byte(tr.body(n))
				return len(body), func() int {
					out, err := tr.translate(t.Context(), body)
					if err != nil {
						t.Fatal(err)
					}
					return out
				}
			})
		})
	}
}

// TestSharedFieldsWrittenOnce: a namespace's description, shared by its
// tools, is written once. A request of 64 tools sharing 256 KiB is
// translated to about its size, and one of 1 MiB and 256 tools, parsed,
// translated and written, allocates a few times its size.
func TestSharedFieldsWrittenOnce(t *testing.T) {
	for _, c := range []struct{ description, tools int }{{256 << 10, 64}, {1<<20 - 256*80, 256}} {
		body := []byte(strings.Replace(namespaceDescription(c.tools), strings.Repeat("d", 256<<10), strings.Repeat("d", c.description), 1))
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		out, err := responsesToChat(t.Context(), body)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		if out > len(body)*11/10 {
			t.Errorf("%d tools sharing %d bytes, %d bytes in all, were written as %d", c.tools, c.description, len(body), out)
		}
		// The body is copied as it is decoded, and its translation as
		// it is written, each buffer grown by doubling: about 8 times.
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 12*uint64(len(body)) {
			t.Errorf("%d tools sharing %d bytes, %d bytes in all, allocated %d", c.tools, c.description, len(body), alloc)
		}
	}
}

// BenchmarkTranslations times each translation at 1,000 and 8,000 of its
// repeated part, reported per item: linear work costs the same per item
// at both sizes.
func BenchmarkTranslations(b *testing.B) {
	for _, tr := range append(translations[:len(translations):len(translations)], answers...) {
		for _, n := range []int{1000, 8000} {
			b.Run(fmt.Sprintf("%s=%d", tr.name, n), func(b *testing.B) {
				body := []byte(tr.body(n))
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := tr.translate(b.Context(), body); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/item")
			})
		}
	}
}

// lookCounter is a context that counts how often a translation looks at
// it, and ends at the look numbered end (never when zero).
type lookCounter struct {
	context.Context
	looks, end int
}

func (c *lookCounter) Err() error {
	c.looks++
	if c.end > 0 && c.looks >= c.end {
		return context.Canceled
	}
	return nil
}

// TestTranslationsStopWhenTheirContextEnds: every translation of a large
// body returns the context's error at once when its context has ended
// before it starts, and at its next look when it ends midway, doing no
// more work.
func TestTranslationsStopWhenTheirContextEnds(t *testing.T) {
	const n = 20000
	for _, tr := range translations {
		t.Run(tr.name, func(t *testing.T) {
			body := []byte(tr.body(n))
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			if _, err := tr.translate(ctx, body); !errors.Is(err, context.Canceled) {
				t.Errorf("with its context ended: %v, want %v", err, context.Canceled)
			}
			whole := &lookCounter{Context: t.Context()}
			if _, err := tr.translate(whole, body); err != nil {
				t.Fatal(err)
			}
			if whole.looks < n/checkEvery {
				t.Fatalf("looked at its context %d times over %d items; want one look every %d items at least", whole.looks, n, checkEvery)
			}
			// Ended midway: the translation looks once more, and stops.
			midway := &lookCounter{Context: t.Context(), end: whole.looks / 2}
			if _, err := tr.translate(midway, body); !errors.Is(err, context.Canceled) || midway.looks != midway.end {
				t.Errorf("ended at look %d of %d: %v after %d looks; want %v at once", midway.end, whole.looks, err, midway.looks, context.Canceled)
			}
		})
	}
}

// TestChatToAnthropicMaxTokens: the Messages API request asks for the
// max tokens it is given, whatever the chat request names, and joins tool
// results and the user's words after them into one turn as before.
func TestChatToAnthropicMaxTokens(t *testing.T) {
	for _, c := range []struct {
		chat string
		max  int64
		want string
	}{
		{`{"model":"c","messages":[{"role":"user","content":"hi"}]}`, 1024,
			`{"model":"c","max_tokens":1024,"messages":[{"role":"user","content":"hi"}]}`},
		{`{"model":"c","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, 7,
			`{"model":"c","max_tokens":7,"messages":[{"role":"user","content":"hi"}]}`},
		{`{"model":"c","max_completion_tokens":10,"max_tokens":20,"messages":[{"role":"user","content":"hi"}]}`, 10,
			`{"model":"c","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`},
		{chatTools(2), 16,
			`{"model":"c","max_tokens":16,"messages":[{"role":"user","content":"look these up"},` +
				`{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"lookup","input":{}}]},` +
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t0","content":"result 0"},` +
				`{"type":"tool_result","tool_use_id":"t1","content":"result 1"},{"type":"text","text":"and then?"}]}]}`},
		{`{"model":"c","messages":[{"role":"tool","tool_call_id":"a","content":"x"},{"role":"system","content":"s"},` +
			`{"role":"tool","tool_call_id":"b","content":[{"type":"text","text":"y"},{"type":"text","text":"z"}]},{"role":"assistant","content":"ok"},` +
			`{"role":"tool","tool_call_id":"c","content":"w"}]}`, 5,
			`{"model":"c","max_tokens":5,"system":"s","messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":"x"},` +
				`{"type":"tool_result","tool_use_id":"b","content":"yz"}]},{"role":"assistant","content":"ok"},` +
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"c","content":"w"}]}]}`},
	} {
		got, err := ChatToAnthropicBody(t.Context(), []byte(c.chat), c.max, 1<<20)
		if err != nil || string(got) != c.want {
			t.Errorf("%s with %d:\n got %s, %v\nwant %s", c.chat, c.max, got, err, c.want)
		}
		if !json.Valid(got) {
			t.Errorf("%s: not JSON", got)
		}
	}
}
