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
	"slices"
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

	ServiceTier          json.RawMessage `json:"service_tier"`
	Store                json.RawMessage `json:"store"`
	WebSearchOptions     json.RawMessage `json:"web_search_options"`
	Modalities           json.RawMessage `json:"modalities"`
	Audio                json.RawMessage `json:"audio"`
	Prediction           json.RawMessage `json:"prediction"`
	PromptCacheRetention json.RawMessage `json:"prompt_cache_retention"`
	InferenceGeo         json.RawMessage `json:"inference_geo"`
	Speed                json.RawMessage `json:"speed"`
	Container            json.RawMessage `json:"container"`
	Fallbacks            json.RawMessage `json:"fallbacks"`
	ContextManagement    json.RawMessage `json:"context_management"`
	MCPServers           json.RawMessage `json:"mcp_servers"`
}

// billed is g's billed fields, in BilledField's order.
func (g *goRequest) billed() [numBilled]json.RawMessage {
	return [...]json.RawMessage{g.ServiceTier, g.Store, g.WebSearchOptions, g.Modalities, g.Audio, g.Prediction,
		g.PromptCacheRetention, g.InferenceGeo, g.Speed, g.Container, g.Fallbacks, g.ContextManagement, g.MCPServers}
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
	var billed [numBilled]json.RawMessage
	for f := range numBilled {
		billed[f] = m[f.String()]
	}
	r.Billed, r.ServiceTier = billedByJSON(t, billed)
	return r
}

// billedByJSON is the billed fields of a body, by BilledField, as
// encoding/json reads them (nil for those absent): those given at a value
// that is not harmless, and the service tier asked.
func billedByJSON(t *testing.T, raw [numBilled]json.RawMessage) (BilledFields, string) {
	t.Helper()
	var billed BilledFields
	for f, v := range raw {
		if v != nil && !harmlessByJSON(t, BilledField(f), v) {
			billed |= Of(BilledField(f))
		}
	}
	var tier string
	json.Unmarshal(raw[ServiceTier], &tier)
	return billed, tier
}

// harmlessByJSON is whether raw, the value of billed field f, asks
// nothing a provider bills more for, read with encoding/json.
func harmlessByJSON(t *testing.T, f BilledField, raw json.RawMessage) bool {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: %s: %v", f, raw, err)
	}
	if v == nil {
		return true
	}
	oneOf := func(names ...string) bool {
		s, ok := v.(string)
		return ok && slices.Contains(names, s)
	}
	switch f {
	case ServiceTier:
		return oneOf("auto", "default", "standard_only")
	case Store:
		return v == false
	case Modalities:
		a, ok := v.([]any)
		return ok && !slices.ContainsFunc(a, func(e any) bool { return e != "text" })
	case PromptCacheRetention:
		return oneOf("in_memory", "in-memory")
	case Speed:
		return oneOf("standard")
	case ContextManagement:
		return clearsOnlyByJSON(t, raw)
	}
	return false
}

// clearsOnlyByJSON is whether a context_management value only clears
// context, read with encoding/json's tokenizer: an object with the one
// member edits, an array of objects each with one member whose key folds
// to type, spelled type, a string beginning clear_.
func clearsOnlyByJSON(t *testing.T, raw json.RawMessage) bool {
	keys, values := objectMembers(t, raw)
	if raw[0] != '{' || len(keys) > 1 || len(keys) == 1 && (keys[0] != "edits" || values[0][0] != '[') {
		return false
	}
	if len(keys) == 0 {
		return true
	}
	var edits []json.RawMessage
	json.Unmarshal(values[0], &edits)
	for _, e := range edits {
		keys, values := objectMembers(t, e)
		types := 0
		for i, k := range keys {
			if !strings.EqualFold(k, "type") {
				continue
			}
			var s string
			if types++; k != "type" || json.Unmarshal(values[i], &s) != nil || !strings.HasPrefix(s, "clear_") {
				return false
			}
		}
		if e[0] != '{' || types != 1 {
			return false
		}
	}
	return true
}

// objectMembers is the keys and values of the JSON object obj, in order,
// read with encoding/json's tokenizer; none when obj is not an object.
func objectMembers(t *testing.T, obj []byte) (keys []string, values []json.RawMessage) {
	t.Helper()
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
	r.Billed, r.ServiceTier = billedByJSON(t, g.billed())
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
	// check is the param at fault among one object's members, of which
	// names are the routing fields.
	check := func(obj []byte, names []string, prefix string, value func(name string, v json.RawMessage) (string, bool)) (string, bool) {
		seen := map[string]bool{}
		keys, values := objectMembers(t, obj)
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
		case "max_tokens", "max_completion_tokens":
			if c == 'n' {
				return "", false
			}
			n, err := strconv.ParseInt(string(v), 10, 64)
			bounds[name] = n
			return name, err != nil || n < 0 || n > MaxTokensLimit
		}
		return "", false // prompt lists and billed fields, any value
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
		// Prompt lists.
		`{"model":"m","prompt":["a","b","c"],"max_tokens":10}`, `{"model":"m","prompt":[[1,2],[3]],"n":2}`, `{"model":"m","prompt":[1,2,3]}`,
		`{"model":"m","prompt":"a"}`, `{"model":"m","prompt":[]}`, `{"model":"m","prompt":["a",1]}`, `{"model":"m","prompt":[[1,"a"]]}`,
		`{"model":"m","prompt":[[]]}`, `{"model":"m","prompt":{}}`, `{"model":"m","prompt":null}`, `{"model":"m","prompt":"a","prompt":["b","c"]}`,
		`{"model":"m","Prompt":["a"]}`, `{"model":"m","input":["a","b"]}`, `{"model":"m","input":[[1],[2,3]]}`, `{"model":"m","Input":"a"}`,
		`{"model":"m","prompt":["a"],"prompt_embeds":["AAAA","BBBB"]}`, `{"model":"m","prompt_embeds":"AAAA"}`, `{"model":"m","input":[-1, 2.5]}`,
		// Billed fields.
		`{"model":"m","service_tier":"priority"}`, `{"service_tier":"auto","model":"m"}`, `{"model":"m","service_tier":"default","store":true}`,
		`{"model":"m","service_tier":"\u0070riority"}`, `{"model":"m","Service_Tier":"priority"}`, `{"model":"m","service_tier":"flex","service_tier":"auto"}`,
		`{"model":"m","store":false,"modalities":["text"],"speed":"standard","prompt_cache_retention":"in_memory"}`,
		`{"model":"m","modalities":["text","audio"],"audio":{"voice":"alloy","format":"wav"}}`, `{"model":"m","web_search_options":{}}`,
		`{"store":true,"service_tier":"priority","model":"m","prediction":{"type":"content","content":"x"}}`,
		`{"model":"m","inference_geo":"us","speed":"fast","container":"c1","fallbacks":[{"model":"x"}]}`,
		`{"model":"m","context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"}]}}`,
		`{"model":"m","context_management":{"edits":[{"type":"compact_20260112"}]}}`, `{"model":"m","context_management":{"edits":[{"type":"clear_x","TYPE":"compact"}]}}`,
		`{"model":"m","context_management":{"edits":[{"type":"clear_x","type":"compact"}]}}`, `{"model":"m","context_management":{"Edits":[]}}`,
		`{"model":"m","context_management":{}}`, `{"model":"m","context_management":{"edits":[]},"x":1}`,
		` { "store" : true , "model" : "m" , "speed" : "fast" } `, `{"model":"m", "audio":null ,"store":true}`,
		`{"model":"m","stream":true,"service_tier":"scale","stream_options":{}}`, `{"model":"m","mcp\u005fservers":[{"type":"url","url":"u"}]}`,
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
		checkLists(t, body, &r)

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
		// Billed fields dropped: all, those billed, every other one,
		// with and without the other edits.
		all := BilledFields(1<<numBilled - 1)
		edits = append(edits, Edits{Model: r.Model, Drop: all}, Edits{Model: "other-name", IncludeUsage: true, CacheSalt: "s", Drop: r.Billed},
			Edits{Model: r.Model, EnableThinking: &off, ReasoningEffort: "low", Drop: 0x1555}, Edits{Model: r.Model, Drop: 0xaaa})
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
			want.Billed &^= e.Drop
			if e.Drop.Has(ServiceTier) {
				want.ServiceTier = ""
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
			checkRestKept(t, body, out, e.Drop)
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
// stream_options' members except include_usage, and none of the billed
// fields of drop.
func checkRestKept(t *testing.T, body, out []byte, drop BilledFields) {
	t.Helper()
	var after map[string]json.RawMessage
	json.Unmarshal(out, &after)
	for f := range numBilled {
		if _, kept := after[f.String()]; kept && drop.Has(f) {
			t.Fatalf("Rewrite of %q to %q kept %s, which it drops", body, out, f)
		}
	}
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
	for f := range numBilled {
		if drop.Has(f) {
			delete(top, f.String())
		}
	}
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

// checkLists checks the prompt lists r read from body against
// encoding/json's reading: prompt's and prompt_embeds' together, and
// input's, each refused naming the field that lists no prompt.
func checkLists(t *testing.T, body []byte, r *Request) {
	t.Helper()
	var m map[string]json.RawMessage
	json.Unmarshal(body, &m)
	for field, names := range map[string][]string{"prompt": {"prompt", "prompt_embeds"}, "input": {"input"}} {
		var want PromptList
		bad := ""
		for _, name := range names {
			one, ok := listByJSON(t, m[name])
			if !ok && bad == "" {
				bad = name
			}
			want.Count, want.Tokens, want.TokenBytes = want.Count+one.Count, want.Tokens+one.Tokens, want.TokenBytes+one.TokenBytes
		}
		got, err := r.Prompts(field)
		if bad != "" {
			if e, ok := err.(*Error); !ok || e.Status != http.StatusBadRequest || e.Param != bad {
				t.Fatalf("%q: Prompts(%s) = %+v, %v; want a 400 naming %s", body, field, got, err, bad)
			}
			continue
		}
		if err != nil || got != want {
			t.Fatalf("%q: Prompts(%s) = %+v, %v; want %+v", body, field, got, err, want)
		}
	}
}

// listByJSON is the prompt list raw holds, read with encoding/json: false
// when it is none (not a string or an array, an empty array, one of
// mixed elements or of arrays holding other than numbers).
func listByJSON(t *testing.T, raw json.RawMessage) (PromptList, bool) {
	var v any
	if raw != nil {
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
	}
	switch v := v.(type) {
	case nil:
		return PromptList{}, true
	case string:
		return PromptList{Count: 1}, true
	case []any:
		if len(v) == 0 {
			return PromptList{}, false
		}
		var l PromptList
		for _, e := range v {
			switch e := e.(type) {
			case string:
				l.Count++
			case float64:
				l.Tokens++
			case []any:
				l.Count++
				for _, id := range e {
					if _, ok := id.(float64); !ok {
						return PromptList{}, false
					}
					l.Tokens++
				}
			default:
				return PromptList{}, false
			}
			if reflect.TypeOf(e) != reflect.TypeOf(v[0]) {
				return PromptList{}, false
			}
		}
		if _, ids := v[0].(float64); ids {
			l.Count = 1
		}
		if _, text := v[0].(string); !text {
			l.TokenBytes = int64(len(raw))
		}
		return l, true
	}
	return PromptList{}, false
}
