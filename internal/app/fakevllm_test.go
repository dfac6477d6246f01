package app

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// fakeVLLM is an upstream speaking chat completions as vLLM does: it
// calls the first tool it is offered, unless the conversation already
// holds the tool's result, and otherwise answers with text, whole or
// streamed, with vLLM's stop_reason and usage. Every request body it saw
// is kept for the test to read.
type fakeVLLM struct {
	bodies chan []byte
	// cut, when set, ends streams after the first content chunk without
	// a finish or [DONE].
	cut bool
}

// The fake's answers.
const (
	fakeText     = "It is sunny in Paris."
	fakeToolArgs = `{"city":"Paris"}`
	fakeToolID   = "chatcmpl-tool-7b1"
	fakePrompt   = 21
	fakeCached   = 16
)

func startFakeVLLM(t *testing.T) (*fakeVLLM, string) {
	f := &fakeVLLM{bodies: make(chan []byte, 100)}
	s := httptest.NewServer(f)
	t.Cleanup(s.Close)
	return f, s.URL + "/v1"
}

// last is the body of the latest request the fake saw.
func (f *fakeVLLM) last(t *testing.T) map[string]any {
	t.Helper()
	var b []byte
drain:
	for {
		select {
		case b = <-f.bodies:
		default:
			break drain
		}
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("upstream body %q: %v", b, err)
	}
	return m
}

func (f *fakeVLLM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.bodies <- body
	if r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	var req struct {
		Stream   bool `json:"stream"`
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
		Tools []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
		Stop []string `json:"stop"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		w.WriteHeader(400)
		fmt.Fprintf(w, `{"object":"error","message":"bad body: %v","type":"BadRequestError","param":null,"code":400}`, err)
		return
	}
	call := len(req.Tools) > 0
	for _, m := range req.Messages {
		call = call && m.Role != "tool"
	}
	tool := ""
	if call {
		tool = req.Tools[0].Function.Name
	}
	stopReason := "null"
	if len(req.Stop) > 0 {
		stopReason = fmt.Sprintf("%q", req.Stop[0])
	}
	completion := 7
	usage := fmt.Sprintf(`{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d}}`,
		fakePrompt, fakePrompt+completion, completion, fakeCached)
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		msg := fmt.Sprintf(`{"role":"assistant","content":%q,"tool_calls":[]}`, fakeText)
		finish := "stop"
		if call {
			msg = fmt.Sprintf(`{"role":"assistant","content":null,"tool_calls":[{"id":%q,"type":"function","function":{"name":%q,"arguments":%q}}]}`, fakeToolID, tool, fakeToolArgs)
			finish, stopReason = "tool_calls", "null"
		}
		fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"x","choices":[{"index":0,"message":%s,"logprobs":null,"finish_reason":%q,"stop_reason":%s}],"usage":%s}`,
			msg, finish, stopReason, usage)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	chunk := func(delta, finish string) {
		fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"x\",\"choices\":[{\"index\":0,\"delta\":%s,\"logprobs\":null,\"finish_reason\":%s}]}\n\n", delta, finish)
		fl.Flush()
	}
	chunk(`{"role":"assistant","content":""}`, "null")
	if call {
		chunk(fmt.Sprintf(`{"tool_calls":[{"id":%q,"type":"function","index":0,"function":{"name":%q,"arguments":""}}]}`, fakeToolID, tool), "null")
		for _, piece := range []string{`{"city":`, `"Paris"}`} {
			chunk(fmt.Sprintf(`{"tool_calls":[{"index":0,"function":{"arguments":%q}}]}`, piece), "null")
		}
		fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"x\",\"choices\":[{\"index\":0,\"delta\":{},\"logprobs\":null,\"finish_reason\":\"tool_calls\",\"stop_reason\":null}]}\n\n")
	} else {
		for _, word := range strings.SplitAfter(fakeText, " ") {
			chunk(fmt.Sprintf(`{"content":%q}`, word), "null")
			if f.cut {
				return
			}
		}
		fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"},\"logprobs\":null,\"finish_reason\":\"stop\",\"stop_reason\":%s}]}\n\n", stopReason)
	}
	fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"x\",\"choices\":[],\"usage\":%s}\n\ndata: [DONE]\n\n", usage)
}
