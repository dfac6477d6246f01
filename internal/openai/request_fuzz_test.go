package openai

// Parse held to what backends decode. Whatever Parse accepts, two
// decodings of the same body must agree with it: exact keys with the last
// of a repeated key winning, as Python's json, pydantic and serde read a
// body, and a struct matched case-insensitively, as Go's encoding/json
// reads one. Whatever Parse refuses is a 400, and refused for a reason an
// independent reading of the body (refusal below) also finds.

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// goRequest is the request as a Go backend decodes it.
type goRequest struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           *int64 `json:"max_tokens"`
	MaxCompletionTokens *int64 `json:"max_completion_tokens"`
	N                   *int64 `json:"n"`
	BestOf              *int64 `json:"best_of"`
	User                string `json:"user"`
	CacheSalt           string `json:"cache_salt"`
	PromptCacheKey      string `json:"prompt_cache_key"`
}

// choices is how many answers a backend generates for n and best_of, nil
// when absent or null.
func choices(n, bestOf *int64) int64 {
	c := int64(1)
	for _, v := range []*int64{n, bestOf} {
		if v != nil {
			c = max(c, *v)
		}
	}
	return c
}

// decodedByMap is body's routing fields as an exact-key decoder reads
// them, the last of a repeated key winning.
func decodedByMap(t *testing.T, body []byte) Request {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("json.Unmarshal(%q) into a map: %v", body, err)
	}
	var r Request
	str := func(raw json.RawMessage) string {
		var s string
		if raw != nil {
			if err := json.Unmarshal(raw, &s); err != nil {
				t.Fatalf("%q: %s is not a string: %v", body, raw, err)
			}
		}
		return s
	}
	count := func(raw json.RawMessage) *int64 {
		if raw == nil || string(raw) == "null" {
			return nil
		}
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil {
			t.Fatalf("%q: %s is not an int64: %v", body, raw, err)
		}
		return &n
	}
	r.Model = str(m["model"])
	r.Stream = string(m["stream"]) == "true"
	if so := m["stream_options"]; so != nil {
		var o map[string]json.RawMessage
		if err := json.Unmarshal(so, &o); err != nil {
			t.Fatalf("%q: stream_options %s: %v", body, so, err)
		}
		r.IncludeUsage = string(o["include_usage"]) == "true"
	}
	r.MaxTokens = bound(count(m["max_tokens"]), count(m["max_completion_tokens"]))
	r.Choices = choices(count(m["n"]), count(m["best_of"]))
	r.User = str(m["user"])
	r.CacheSalt = str(m["cache_salt"])
	r.PromptCacheKey = str(m["prompt_cache_key"])
	return r
}

// bound is the output bound a backend heeds, whichever of max_tokens and
// max_completion_tokens it reads: the one given, or either when both are
// (Parse accepts both only when they agree); 0 when neither is.
func bound(maxTokens, maxCompletionTokens *int64) int64 {
	switch {
	case maxCompletionTokens != nil:
		return *maxCompletionTokens
	case maxTokens != nil:
		return *maxTokens
	}
	return 0
}

// decodedByStruct is body's routing fields as encoding/json reads them
// into a struct.
func decodedByStruct(t *testing.T, body []byte) Request {
	t.Helper()
	var g goRequest
	if err := json.Unmarshal(body, &g); err != nil {
		t.Fatalf("json.Unmarshal(%q) into a struct: %v", body, err)
	}
	r := Request{Model: g.Model, Stream: g.Stream, User: g.User, CacheSalt: g.CacheSalt, PromptCacheKey: g.PromptCacheKey}
	if g.StreamOptions != nil {
		r.IncludeUsage = g.StreamOptions.IncludeUsage
	}
	r.MaxTokens = bound(g.MaxTokens, g.MaxCompletionTokens)
	r.Choices = choices(g.N, g.BestOf)
	return r
}

// checkDecoders checks that both decodings of body read want.
func checkDecoders(t *testing.T, body []byte, want Request) {
	t.Helper()
	opt := cmpopts.IgnoreUnexported(Request{})
	if diff := cmp.Diff(want, decodedByMap(t, body), opt); diff != "" {
		t.Fatalf("%q: exact-key decoding differs from Parse (-parse +decoded):\n%s", body, diff)
	}
	if diff := cmp.Diff(want, decodedByStruct(t, body), opt); diff != "" {
		t.Fatalf("%q: struct decoding differs from Parse (-parse +decoded):\n%s", body, diff)
	}
}

// refusal is the param a 400 for the valid JSON body should name, found
// independently of Parse with encoding/json's tokenizer and its own case
// folding (strings.EqualFold): the first routing field, in the body's
// order, that is spelled in another case, repeated, ill-typed or out of
// range; else "model" when the model is missing. ok is false when body
// should be accepted; param is "" when body is not an object.
func refusal(t *testing.T, body []byte) (param string, ok bool) {
	t.Helper()
	members := func(obj []byte) (keys []string, values []json.RawMessage) {
		dec := json.NewDecoder(bytes.NewReader(obj))
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			return nil, nil
		}
		for dec.More() {
			k, err := dec.Token()
			var v json.RawMessage
			if err == nil {
				err = dec.Decode(&v)
			}
			if err != nil {
				t.Fatalf("decoding %q: %v", obj, err)
			}
			keys, values = append(keys, k.(string)), append(values, v)
		}
		return keys, values
	}
	// check is the param at fault among one object's members, of which
	// names are the routing fields.
	check := func(obj []byte, names []string, prefix string, value func(name string, v json.RawMessage) (string, bool)) (string, bool) {
		seen := map[string]bool{}
		keys, values := members(obj)
		for i, k := range keys {
			for _, name := range names {
				if !strings.EqualFold(k, name) {
					continue
				}
				if k != name || seen[name] {
					return prefix + name, true
				}
				seen[name] = true
				if p, bad := value(name, values[i]); bad {
					return p, true
				}
			}
		}
		return "", false
	}
	if body = bytes.TrimLeft(body, " \t\r\n"); body[0] != '{' {
		return "", true
	}
	model := ""
	bounds := map[string]int64{} // max_tokens and max_completion_tokens, when given
	p, bad := check(body, fieldNames[:fieldIncludeUsage], "", func(name string, v json.RawMessage) (string, bool) {
		switch c := v[0]; name {
		case "model":
			json.Unmarshal(v, &model)
			return name, c != '"'
		case "stream":
			return name, c != 't' && c != 'f' && c != 'n'
		case "user", "cache_salt", "prompt_cache_key":
			return name, c != '"' && c != 'n'
		case "n", "best_of":
			if c == 'n' {
				return "", false
			}
			n, err := strconv.ParseInt(string(v), 10, 64)
			return name, err != nil || n < 1 || n > MaxChoices
		case "stream_options":
			if c == 'n' {
				return "", false
			}
			if c != '{' {
				return name, true
			}
			return check(v, []string{"include_usage"}, "stream_options.", func(name string, v json.RawMessage) (string, bool) {
				return "stream_options." + name, v[0] != 't' && v[0] != 'f' && v[0] != 'n'
			})
		default: // max_tokens, max_completion_tokens
			if c == 'n' {
				return "", false
			}
			n, err := strconv.ParseInt(string(v), 10, 64)
			bounds[name] = n
			return name, err != nil || n < 0 || n > MaxTokensLimit
		}
	})
	if bad {
		return p, true
	}
	if model == "" {
		return "model", true
	}
	mt, ok1 := bounds["max_tokens"]
	mct, ok2 := bounds["max_completion_tokens"]
	if ok1 && ok2 && mt != mct {
		return "max_completion_tokens", true
	}
	return "", false
}

// FuzzRequestMatchesEncodingJSON holds Parse and Rewrite to what
// backends decode. The seeds run with every go test; go test -fuzz
// FuzzRequestMatchesEncodingJSON ./internal/openai explores further.
func FuzzRequestMatchesEncodingJSON(f *testing.F) {
	for _, s := range []string{
		`{"model":"m"}`, `{}`, `[]`, `"x"`, `null`, ` `,
		`{"model":"gpt-4o","messages":[{"role":"user","content":"Hi"}],"stream":true,"stream_options":{"include_usage":true},"max_tokens":256,"user":"u-1"}`,
		`{"model":"a","messages":[{"role":"system","content":"{\"model\":\"b\",\"max_tokens\":9}"}],"max_completion_tokens":64,"temperature":0.2}`,
		`{"model":"a","stream":true,"stream_options":{"x":1}}`,
		// Escaped keys.
		`{"model":"cheap","mod\u0065l":"premium"}`, `{"mod\u0065l":"m","max_tok\u0065ns":5}`, `{"model":"m","str\u0065am":true}`,
		`{"model":"m","stream_options":{"include_u\u0073age":true}}`, `{"\u006d\u006f\u0064\u0065\u006c":"m","us\u0065r":"u"}`,
		`{"model":"m","\/user":"u","us\ud800er":"v"}`,
		// Repeated keys.
		`{"model":"a","model":"b"}`, `{"model":"m","stream":false,"stream":true}`, `{"model":"m","max_tokens":1,"max_tokens":100000}`,
		`{"model":"m","stream_options":{"include_usage":false,"include_usage":true}}`, `{"model":"m","stream_options":null,"stream_options":{}}`,
		// Keys in another case.
		`{"model":"a","Model":"b"}`, `{"MODEL":"b","model":"a"}`, `{"model":"m","ſtream":true}`, `{"model":"m","max_to\u212aens":5}`,
		`{"model":"m","Max_Completion_Tokens":5}`, `{"model":"m","USER":"u"}`, `{"model":"m","stream_options":{"Include_Usage":true}}`,
		`{"model":"m","stream_options":{"include_u\u017fage":true}}`,
		// stream_options in its shapes.
		`{"model":"m","stream_options":null}`, `{"model":"m","stream_options":{}}`, `{"model":"m","stream_options":{ }}`,
		`{"model":"m","stream_options":{"include_usage":null}}`, `{"model":"m","stream_options":{"include_usage":false,"continuous_usage_stats":true}}`,
		`{"model":"m","stream_options":{"x":{"include_usage":true}}}`, `{"model":"m","stream_options":true}`, `{"model":"m","stream_options":[]}`,
		// Counts.
		`{"model":"m","max_tokens":9223372036854775807}`, `{"model":"m","max_tokens":9223372036854775808}`, `{"model":"m","max_tokens":2147483647}`,
		`{"model":"m","max_tokens":2147483648}`, `{"model":"m","max_tokens":-1}`, `{"model":"m","max_tokens":-0}`, `{"model":"m","max_tokens":1.5}`,
		`{"model":"m","max_tokens":1e3}`, `{"model":"m","max_tokens":"5"}`, `{"model":"m","max_completion_tokens":0,"max_tokens":7}`,
		`{"model":"m","max_completion_tokens":null,"max_tokens":7}`, `{"model":"m","max_tokens":7,"max_completion_tokens":3}`,
		`{"model":"m","max_tokens":7,"max_completion_tokens":7}`, `{"model":"m","max_completion_tokens":1,"max_tokens":1000000}`,
		`{"model":"m","max_tokens":-0,"max_completion_tokens":0}`,
		// Answers.
		`{"model":"m","n":128,"max_tokens":10}`, `{"model":"m","n":0}`, `{"model":"m","n":-0}`, `{"model":"m","n":129}`,
		`{"model":"m","n":2,"best_of":5}`, `{"model":"m","best_of":null,"n":null}`, `{"model":"m","N":4}`, `{"model":"m","n":1,"n":128}`,
		`{"model":"m","n":"2"}`, `{"model":"m","Best_Of":3}`, `{"model":"m","\u006e":3}`,
		// Cache salts.
		`{"model":"m","cache_salt":"tenant-a"}`, `{"model":"m","cache_salt":null}`, `{"model":"m","cache_salt":""}`,
		`{"model":"m","cache_salt":5}`, `{"model":"m","Cache_Salt":"x"}`, `{"model":"m","cache_salt":"a","cache_salt":"b"}`,
		`{"cache_salt":"x","model":"m","stream_options":{}}`,
		// Prompt cache keys.
		`{"model":"m","prompt_cache_key":"conv-1"}`, `{"model":"m","prompt_cache_key":null}`, `{"model":"m","prompt_cache_key":7}`,
		`{"model":"m","prompt_cache_key":"a","prompt_cache_key":"b"}`, `{"model":"m","PROMPT_CACHE_KEY":"a"}`, `{"model":"m","prompt_cache_\u006bey":"a"}`,
		`{"model":"m","prompt_cache_\u212aey":"a"}`, `{"prompt_cache_key":"k","cache_salt":"s","model":"m","user":"u"}`,
		// Nulls and wrong types.
		`{"model":null}`, `{"model":"m","stream":null,"user":null,"max_tokens":null}`, `{"model":3}`, `{"model":"m","stream":"true"}`,
		`{"model":"m","user":1}`, `{"model":""}`,
		// Escapes in values.
		`{"model":"caf\u00e9"}`, `{"model":"\ud83d\ude00"}`, `{"model":"\ud800"}`, "{\"model\":\"m\xff\"}", `{"model":"a\"b\\c"}`,
		// Space everywhere.
		" \t\r\n{ \"model\" \n: \"m\" ,\t\"stream\" : true , \"stream_options\" : { \"include_usage\" : false } , \"max_tokens\" : 3 } \n",
		`{"model":"m"} {}`, `{"model":"m",}`,
		// Reasoning controls.
		`{"model":"m","chat_template_kwargs":{"enable_thinking":false}}`, `{"model":"m","chat_template_kwargs":{ }}`,
		`{"model":"m","chat_template_kwargs":null,"reasoning_effort":"low"}`, `{"model":"m","chat_template_kwargs":{"x":1},"max_tokens":5}`,
		`{"chat_template_kwargs":{"enable_thinking":true},"model":"m","chat_template_kwargs":{"a":[1]}}`, `{"model":"m","chat_template_kwargs":"x"}`,
		`{"model":"m","chat_template_kwargs":{"enable\u005fthinking":true}}`, `{"model":"m","max_tokens":null,"reasoning_effort":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var r Request
		if err := r.Parse(body); err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Status != http.StatusBadRequest || e.Type != "invalid_request_error" {
				t.Fatalf("Parse(%q) = %v, not a 400 *Error", body, err)
			}
			if !json.Valid(body) {
				if e.Message != "The request body is not valid JSON." {
					t.Fatalf("Parse(%q) = %q, want it to say the body is not JSON", body, e.Message)
				}
				return
			}
			switch param, ok := refusal(t, body); {
			case !ok:
				t.Fatalf("Parse(%q) refused naming %q (%s); want it accepted", body, e.Param, e.Message)
			case e.Param != param:
				t.Fatalf("Parse(%q) refused naming %q (%s); want %q named", body, e.Param, e.Message, param)
			}
			return
		}
		checkDecoders(t, body, r)
		if param, ok := refusal(t, body); ok {
			t.Fatalf("Parse(%q) accepted a body it should refuse, naming %q", body, param)
		}
		if r.MaxTokens < 0 || r.MaxTokens > MaxTokensLimit {
			t.Fatalf("Parse(%q) read MaxTokens %d", body, r.MaxTokens)
		}
		if r.Choices < 1 || r.Choices > MaxChoices {
			t.Fatalf("Parse(%q) read Choices %d", body, r.Choices)
		}
		checkPrompt(t, body, r.Prompt(body))

		on, off := true, false
		edits := []Edits{
			{Model: "other-name", IncludeUsage: true},
			{Model: "other-name"},
			{Model: r.Model, CacheSalt: "8c1f\\salt\""},
			{Model: "other-name", IncludeUsage: true, CacheSalt: "9d2e0b7a"},
			{Model: r.Model, EnableThinking: &on, ReasoningEffort: "high"},
			{Model: "other-name", IncludeUsage: true, CacheSalt: "9d2e0b7a", EnableThinking: &off},
		}
		var top map[string]json.RawMessage
		json.Unmarshal(body, &top)
		if mct := top["max_completion_tokens"]; mct == nil || string(mct) == "null" {
			// A bound set where max_completion_tokens gives none.
			edits = append(edits, Edits{Model: r.Model, MaxTokens: 77}, Edits{Model: "other-name", IncludeUsage: true, MaxTokens: max(r.MaxTokens, 1), EnableThinking: &on})
		}
		for _, e := range edits {
			out := r.Rewrite(body, e)
			if !json.Valid(out) {
				t.Fatalf("Rewrite of %q is invalid: %q", body, out)
			}
			want := r
			want.Model = e.Model
			want.IncludeUsage = r.IncludeUsage || e.IncludeUsage
			if e.CacheSalt != "" {
				want.CacheSalt = e.CacheSalt
			}
			if e.MaxTokens > 0 {
				want.MaxTokens = e.MaxTokens
			}
			checkReasoningEdits(t, body, out, e)
			var got Request
			if err := got.Parse(out); err != nil {
				t.Fatalf("Rewrite of %q to %q: %v", body, out, err)
			}
			if diff := cmp.Diff(want, got, cmpopts.IgnoreUnexported(Request{})); diff != "" {
				t.Fatalf("Rewrite of %q to %q reads back as (-want +got):\n%s", body, out, diff)
			}
			checkDecoders(t, out, want)
			checkRestKept(t, body, out)
		}
	})
}

// checkPrompt checks the prompt routing reads: when there is one, it is
// the value encoding/json decodes for messages or prompt, whichever came
// last.
func checkPrompt(t *testing.T, body, prompt []byte) {
	t.Helper()
	if prompt == nil {
		return
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("json.Unmarshal(%q): %v", body, err)
	}
	var got any
	if err := json.Unmarshal(prompt, &got); err != nil {
		t.Fatalf("Prompt of %q is %q, not JSON: %v", body, prompt, err)
	}
	for _, k := range []string{"messages", "prompt"} {
		var want any
		if raw, ok := m[k]; ok && json.Unmarshal(raw, &want) == nil && reflect.DeepEqual(got, want) {
			return
		}
	}
	t.Fatalf("Prompt of %q is %q, which encoding/json decodes as neither messages nor prompt", body, prompt)
}

// checkRestKept checks that out, a rewrite of body, holds body's members
// byte for byte except model, stream_options and cache_salt, and
// stream_options' members except include_usage.
func checkRestKept(t *testing.T, body, out []byte) {
	t.Helper()
	rest := func(b []byte) (top, options map[string]json.RawMessage) {
		if err := json.Unmarshal(b, &top); err != nil {
			t.Fatalf("%q: %v", b, err)
		}
		if err := json.Unmarshal(top["stream_options"], &options); err != nil && top["stream_options"] != nil {
			t.Fatalf("%q: stream_options: %v", b, err)
		}
		delete(top, "model")
		delete(top, "stream_options")
		delete(top, "cache_salt")
		delete(top, "max_tokens")           // checked by Parse
		delete(top, "chat_template_kwargs") // and these two by checkReasoningEdits
		delete(top, "reasoning_effort")
		delete(options, "include_usage")
		return top, options
	}
	top, options := rest(body)
	outTop, outOptions := rest(out)
	if diff := cmp.Diff(top, outTop, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("Rewrite of %q to %q changed other members (-before +after):\n%s", body, out, diff)
	}
	if diff := cmp.Diff(options, outOptions, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("Rewrite of %q to %q changed stream_options (-before +after):\n%s", body, out, diff)
	}
}

// checkReasoningEdits checks what a rewrite of body to out did with e's
// max_tokens, enable_thinking and reasoning_effort, as Python's decoder
// (which keeps a repeated key's last value) reads them: each set as e
// asks, unless the body had its own, and chat_template_kwargs' other
// members kept.
func checkReasoningEdits(t *testing.T, body, out []byte, e Edits) {
	t.Helper()
	var before, after map[string]json.RawMessage
	json.Unmarshal(body, &before)
	json.Unmarshal(out, &after)
	if e.MaxTokens > 0 && string(after["max_tokens"]) != strconv.FormatInt(e.MaxTokens, 10) {
		t.Fatalf("Rewrite of %q to %q: max_tokens %s, want %d", body, out, after["max_tokens"], e.MaxTokens)
	}
	wantEffort := before["reasoning_effort"]
	if _, named := before["reasoning_effort"]; !named && e.ReasoningEffort != "" {
		wantEffort, _ = json.Marshal(e.ReasoningEffort)
	}
	if string(after["reasoning_effort"]) != string(wantEffort) {
		t.Fatalf("Rewrite of %q to %q: reasoning_effort %s, want %s", body, out, after["reasoning_effort"], wantEffort)
	}
	kwBefore, kwAfter := before["chat_template_kwargs"], after["chat_template_kwargs"]
	var members map[string]json.RawMessage
	takes := kwBefore == nil || string(kwBefore) == "null"
	if !takes && kwBefore[0] == '{' {
		json.Unmarshal(kwBefore, &members)
		_, named := members["enable_thinking"]
		takes = !named
	}
	if e.EnableThinking == nil || !takes {
		if string(kwBefore) != string(kwAfter) {
			t.Fatalf("Rewrite of %q to %q changed chat_template_kwargs %s to %s", body, out, kwBefore, kwAfter)
		}
		return
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(kwAfter, &got); err != nil {
		t.Fatalf("Rewrite of %q to %q: chat_template_kwargs %s: %v", body, out, kwAfter, err)
	}
	if string(got["enable_thinking"]) != strconv.FormatBool(*e.EnableThinking) {
		t.Fatalf("Rewrite of %q to %q: enable_thinking %s, want %v", body, out, got["enable_thinking"], *e.EnableThinking)
	}
	delete(got, "enable_thinking")
	if diff := cmp.Diff(members, got, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("Rewrite of %q to %q changed chat_template_kwargs (-before +after):\n%s", body, out, diff)
	}
}
