// The two generating endpoints, /v1/chat/completions and /v1/completions:
// parse the request, size the prompt and the answer, queue the sequence,
// then stream its tokens as they are produced or send the whole answer.

package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// commonFields are the request fields both endpoints share.
type commonFields struct {
	Model               string `json:"model"`
	MaxTokens           *int   `json:"max_tokens"`
	MaxCompletionTokens *int   `json:"max_completion_tokens"`
	Stream              bool   `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	IgnoreEOS bool   `json:"ignore_eos"`
	Seed      *int64 `json:"seed"`
	N         *int   `json:"n"`
	// CacheSalt keeps the prompt's blocks apart from those of prompts
	// with another salt, or none, as vLLM's does.
	CacheSalt *string `json:"cache_salt"`
}

type chatRequest struct {
	commonFields
	Messages []json.RawMessage `json:"messages"` // each a requestMessage
}

// requestMessage is one of a chat request's messages, decoded on its own
// so that an error in it can name its index.
type requestMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type completionRequest struct {
	commonFields
	Prompt json.RawMessage `json:"prompt"`
}

// endpoint says which API a job answers, and so the shape of its chunks.
type endpoint uint8

const (
	chatEndpoint endpoint = iota
	completionEndpoint
)

// job is one parsed generating request.
type job struct {
	endpoint     endpoint
	id           string
	modelJSON    []byte // the model's name as a JSON string
	created      int64
	prompt       promptInfo
	gen          generation
	stream       bool
	includeUsage bool
	// llama reports whether the replica answers as llama.cpp's server
	// does: cached tokens as timings.cache_n beside a usage without
	// prompt_tokens_details.
	llama bool
}

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request, body []byte, f Faults) {
	c, p, err := parseChat(body, s.cfg.BlockSize)
	if err != nil {
		openai.WriteError(w, err)
		return
	}
	s.generate(w, r, chatEndpoint, c, p, f)
}

// parseChat reads a chat completions body: its common fields, and its
// prompt as the chat template renders it, each message as <|role|>, its
// text and a newline, then the assistant's turn.
func parseChat(body []byte, blockSize int) (commonFields, promptInfo, error) {
	var req chatRequest
	if err := decodeJSON(body, &req, ""); err != nil {
		return commonFields{}, promptInfo{}, err
	}
	if len(req.Messages) == 0 {
		return commonFields{}, promptInfo{}, openai.BadRequest("messages", "messages must hold at least one message.")
	}
	ph := newPromptHasher(blockSize)
	for i, raw := range req.Messages {
		param := fmt.Sprintf("messages[%d]", i)
		var m requestMessage
		if err := decodeJSON(raw, &m, param); err != nil {
			return commonFields{}, promptInfo{}, err
		}
		text, err := messageText(m.Content, param+".content")
		if err != nil {
			return commonFields{}, promptInfo{}, err
		}
		ph.addText("<|" + m.Role + "|>\n")
		ph.addText(text)
	}
	ph.addText("<|assistant|>\n")
	return req.commonFields, ph.result(), nil
}

// messageText is a message's text: the string itself, or the text parts
// of an array of parts. Other parts, such as images, add nothing. param is
// the content's place in the request, for errors.
func messageText(raw json.RawMessage, param string) (string, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return "", nil
	case raw[0] == '"':
		var s string
		err := decodeJSON(raw, &s, param)
		return s, err
	case raw[0] == '[':
		var parts []json.RawMessage
		if err := decodeJSON(raw, &parts, param); err != nil {
			return "", err
		}
		var b []byte
		for i, raw := range parts {
			var p struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			if err := decodeJSON(raw, &p, fmt.Sprintf("%s[%d]", param, i)); err != nil {
				return "", err
			}
			if p.Type == "text" {
				b = append(b, p.Text...)
				b = append(b, '\n')
			}
		}
		return string(b), nil
	}
	return "", openai.InvalidType(param, "a string or an array of parts", openai.JSONKind(raw))
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request, body []byte, f Faults) {
	var req completionRequest
	if err := decodeJSON(body, &req, ""); err != nil {
		openai.WriteError(w, err)
		return
	}
	p, err := completionPrompt(req.Prompt, s.cfg.BlockSize)
	if err != nil {
		openai.WriteError(w, openai.BadRequest("prompt", "%v", err))
		return
	}
	s.generate(w, r, completionEndpoint, req.commonFields, p, f)
}

// decodeJSON decodes raw into v, a pointer to a request type, and words a
// failure as OpenAI does: a syntax error says the body is not valid JSON,
// and a value of the wrong type names its field and what it must be.
// param is raw's place in the request, "" for the whole body.
func decodeJSON(raw []byte, v any, param string) error {
	err := json.Unmarshal(raw, v)
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return openai.BadRequest("", "The request body is not valid JSON: %v", err)
	}
	// encoding/json puts an embedded struct's Go name in the field's path.
	field := strings.TrimPrefix(te.Field, "commonFields.")
	switch {
	case field == "" && param == "":
		return openai.BadRequest("", "The request body must be a JSON object.")
	case param == "":
		param = field
	case field != "":
		param += "." + field
	}
	t := te.Type
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var want string
	switch t.Kind() {
	case reflect.String:
		want = "a string"
	case reflect.Bool:
		want = "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		want = "an integer"
		// A number that is an integer yet refused is out of range.
		if n, ok := strings.CutPrefix(te.Value, "number "); ok && !strings.ContainsAny(n, ".eE") {
			e := openai.BadRequest(param, "Invalid '%s': %.24s is out of range for an integer.", param, n)
			e.Code = "integer_out_of_range"
			return e
		}
	case reflect.Float32, reflect.Float64:
		want = "a number"
	case reflect.Slice, reflect.Array:
		want = "an array"
	default: // structs and maps
		want = "an object"
	}
	got := "a number"
	switch v, _, _ := strings.Cut(te.Value, " "); v {
	case "string":
		got = "a string"
	case "bool":
		got = "a boolean"
	case "array":
		got = "an array"
	case "object":
		got = "an object"
	case "number":
		if n, ok := strings.CutPrefix(te.Value, "number "); ok && strings.ContainsAny(n, ".eE") {
			got = "a decimal number"
		}
	}
	return openai.InvalidType(param, want, got)
}

// completionPrompt reads a completions prompt: a string, or token ids,
// alone or as a one-element array. Several prompts in one request are not
// served.
func completionPrompt(raw json.RawMessage, blockSize int) (promptInfo, error) {
	raw = bytes.TrimSpace(raw)
	var one []json.RawMessage
	if len(raw) > 0 && raw[0] == '[' {
		if err := json.Unmarshal(raw, &one); err != nil {
			return promptInfo{}, fmt.Errorf("prompt: %w", err)
		}
		if len(one) > 0 && (one[0][0] == '"' || one[0][0] == '[') {
			if len(one) > 1 {
				return promptInfo{}, fmt.Errorf("only one prompt a request is served, got %d", len(one))
			}
			raw = one[0]
		}
	}
	ph := newPromptHasher(blockSize)
	switch {
	case len(raw) > 0 && raw[0] == '"':
		var text string
		if err := json.Unmarshal(raw, &text); err != nil {
			return promptInfo{}, fmt.Errorf("prompt: %w", err)
		}
		ph.addText(text)
	case len(raw) > 0 && raw[0] == '[':
		var ids []int64
		if err := json.Unmarshal(raw, &ids); err != nil {
			return promptInfo{}, errors.New("prompt must be a string or token ids, an array of integers")
		}
		for _, id := range ids {
			ph.addTokenID(id)
		}
	default:
		return promptInfo{}, fmt.Errorf("prompt must be a string or token ids")
	}
	p := ph.result()
	if p.tokens == 0 {
		return promptInfo{}, fmt.Errorf("prompt must not be empty")
	}
	return p, nil
}

// generate checks what both endpoints share, queues the sequence, and
// answers.
func (s *Server) generate(w http.ResponseWriter, r *http.Request, ep endpoint, c commonFields, p promptInfo, f Faults) {
	p, gen, err := s.cfg.plan(ep, c, p)
	if err != nil {
		openai.WriteError(w, err)
		return
	}
	sq := newSeq(p, gen.tokens)
	if err := s.eng.submit(sq, time.Now()); err != nil {
		if err == errQueueFull {
			openai.WriteError(w, openai.Overloaded(fmt.Sprintf("The server is overloaded: %d requests are already waiting.", s.cfg.MaxWaiting), 1))
		} else {
			openai.WriteError(w, openai.Unavailable("The server is shutting down.", err))
		}
		return
	}
	j := job{
		endpoint:     ep,
		modelJSON:    s.modelJSON,
		created:      time.Now().Unix(),
		prompt:       p,
		gen:          gen,
		stream:       c.Stream,
		includeUsage: c.Stream && c.StreamOptions != nil && c.StreamOptions.IncludeUsage,
		llama:        s.cfg.Cache == CacheSlots,
	}
	if ep == chatEndpoint {
		j.id = s.nextID("chatcmpl-")
	} else {
		j.id = s.nextID("cmpl-")
	}
	if j.stream {
		s.stream(w, r, sq, &j, f.DieAfterTokens)
	} else {
		s.whole(w, r, sq, &j, f.DieAfterTokens)
	}
}

// plan checks what both endpoints share against the replica's
// configuration c, and sizes the answer: it returns the prompt as the
// cache keys it (salted when the request gave a salt) and the generation.
// Its errors are *openai.Error.
func (c Config) plan(ep endpoint, f commonFields, p promptInfo) (promptInfo, generation, error) {
	if f.Model != "" && f.Model != c.Model {
		return p, generation{}, openai.ModelNotFound(f.Model)
	}
	if f.N != nil && *f.N != 1 {
		return p, generation{}, openai.BadRequest("n", "Only n=1 is served.")
	}
	if f.CacheSalt != nil {
		if *f.CacheSalt == "" {
			return p, generation{}, openai.BadRequest("cache_salt", "Parameter 'cache_salt' must be a non-empty string if provided.")
		}
		p = p.salted(*f.CacheSalt)
	}
	maxTokens, param := f.MaxCompletionTokens, "max_completion_tokens"
	if maxTokens == nil {
		maxTokens, param = f.MaxTokens, "max_tokens"
	}
	limit := min(c.DefaultMaxTokens, c.MaxModelLen-p.tokens)
	if maxTokens != nil {
		if *maxTokens < 1 {
			return p, generation{}, openai.BadRequest(param, "%s must be at least 1, got %d.", param, *maxTokens)
		}
		limit = *maxTokens
	}
	if p.tokens+limit > c.MaxModelLen || limit < 1 {
		e := openai.BadRequest("messages", "This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the prompt, %d in the completion). Please reduce the length of the prompt or completion.",
			c.MaxModelLen, p.tokens+max(limit, 0), p.tokens, max(limit, 0))
		e.Code = "context_length_exceeded"
		if ep == completionEndpoint {
			e.Param = "prompt"
		}
		return p, generation{}, e
	}
	var reqSeed int64
	if f.Seed != nil {
		reqSeed = *f.Seed
	}
	gen := planGeneration(p.digest, c.Seed, reqSeed, limit, f.IgnoreEOS)
	if need := (p.tokens + gen.tokens + c.BlockSize - 1) / c.BlockSize; need > c.NumBlocks {
		return p, generation{}, openai.BadRequest("max_tokens", "The request needs %d KV-cache blocks; the server has %d.", need, c.NumBlocks)
	}
	return p, gen, nil
}

// abort cuts the client's connection without a proper end, taking sq out
// of the batch first.
func (s *Server) abort(sq *seq) {
	s.eng.cancel(sq)
	panic(http.ErrAbortHandler)
}

// stream sends sq's tokens as SSE chunks as they are produced, one token a
// chunk, then the finish chunk, the usage chunk when asked, and [DONE].
// dieAfter, when positive, cuts the connection after that many tokens.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, sq *seq, j *job, dieAfter int) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	rc.Flush()

	buf := make([]byte, 0, 1024)
	sent := 0
	for {
		select {
		case <-sq.notify:
		case <-r.Context().Done():
			s.eng.cancel(sq)
			return
		}
		if sq.aborted.Load() {
			panic(http.ErrAbortHandler)
		}
		done := sq.finished.Load()
		n := int(sq.produced.Load())
		buf = buf[:0]
		for ; sent < n; sent++ {
			if dieAfter > 0 && sent == dieAfter {
				w.Write(buf)
				rc.Flush()
				s.abort(sq)
			}
			buf = j.appendTokenChunk(buf, sent)
		}
		if done {
			buf = j.appendFinishChunk(buf)
			if j.includeUsage {
				buf = j.appendUsageChunk(buf, int(sq.cachedTokens.Load()))
			}
			buf = append(buf, "data: [DONE]\n\n"...)
		}
		if _, err := w.Write(buf); err != nil {
			s.eng.cancel(sq)
			return
		}
		rc.Flush()
		if done {
			return
		}
	}
}

// whole waits for sq to finish and sends the answer in one body.
func (s *Server) whole(w http.ResponseWriter, r *http.Request, sq *seq, j *job, dieAfter int) {
	for {
		done := sq.finished.Load()
		if dieAfter > 0 && sq.target > dieAfter && int(sq.produced.Load()) >= dieAfter {
			s.abort(sq)
		}
		if done {
			break
		}
		select {
		case <-sq.notify:
		case <-r.Context().Done():
			s.eng.cancel(sq)
			return
		}
		if sq.aborted.Load() {
			panic(http.ErrAbortHandler)
		}
	}
	cached := int(sq.cachedTokens.Load())
	u, tm := j.usageOf(cached), j.timings(cached)
	text := j.gen.text()
	if j.endpoint == chatEndpoint {
		writeJSON(w, whole[chatChoice]{j.id, "chat.completion", j.created, s.cfg.Model,
			[]chatChoice{{Message: chatMessage{"assistant", text}, FinishReason: j.gen.reason}}, u, tm})
		return
	}
	writeJSON(w, whole[textChoice]{j.id, "text_completion", j.created, s.cfg.Model,
		[]textChoice{{Text: text, FinishReason: j.gen.reason}}, u, tm})
}

// whole is a whole (not streamed) completion; C is its endpoint's choice.
type whole[C chatChoice | textChoice] struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []C      `json:"choices"`
	Usage   any      `json:"usage"`             // usage, or llamaUsage
	Timings *timings `json:"timings,omitempty"` // llama.cpp's alone
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type chatChoice struct {
	Index        int         `json:"index"`
	Message      chatMessage `json:"message"`
	Logprobs     *int        `json:"logprobs"`
	FinishReason string      `json:"finish_reason"`
}

type textChoice struct {
	Index        int    `json:"index"`
	Text         string `json:"text"`
	Logprobs     *int   `json:"logprobs"`
	FinishReason string `json:"finish_reason"`
}

// usage is OpenAI's usage object.
type usage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func (j *job) usage(cached int) usage {
	u := usage{PromptTokens: j.prompt.tokens, CompletionTokens: j.gen.tokens, TotalTokens: j.prompt.tokens + j.gen.tokens}
	u.PromptTokensDetails.CachedTokens = cached
	return u
}

// appendChunkHead appends the opening of an SSE chunk up to its choices.
func (j *job) appendChunkHead(b []byte) []byte {
	b = append(b, `data: {"id":"`...)
	b = append(b, j.id...)
	if j.endpoint == chatEndpoint {
		b = append(b, `","object":"chat.completion.chunk","created":`...)
	} else {
		b = append(b, `","object":"text_completion","created":`...)
	}
	b = strconv.AppendInt(b, j.created, 10)
	b = append(b, `,"model":`...)
	b = append(b, j.modelJSON...)
	return append(b, `,"choices":`...)
}

// appendTokenChunk appends the chunk carrying output token i; the first
// chat chunk also carries the assistant role.
func (j *job) appendTokenChunk(b []byte, i int) []byte {
	b = j.appendChunkHead(b)
	space, word := j.gen.word(i)
	switch {
	case j.endpoint == completionEndpoint:
		b = append(b, `[{"index":0,"text":"`...)
	case i == 0:
		b = append(b, `[{"index":0,"delta":{"role":"assistant","content":"`...)
	default:
		b = append(b, `[{"index":0,"delta":{"content":"`...)
	}
	if space {
		b = append(b, ' ')
	}
	b = append(b, word...)
	b = append(b, '"')
	if j.endpoint == chatEndpoint {
		b = append(b, '}')
	}
	return append(b, `,"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
}

// appendFinishChunk appends the chunk that carries no token and the
// finish reason.
func (j *job) appendFinishChunk(b []byte) []byte {
	b = j.appendChunkHead(b)
	if j.endpoint == chatEndpoint {
		b = append(b, `[{"index":0,"delta":{},"logprobs":null,"finish_reason":"`...)
	} else {
		b = append(b, `[{"index":0,"text":"","logprobs":null,"finish_reason":"`...)
	}
	b = append(b, j.gen.reason...)
	return append(b, `"}]}`+"\n\n"...)
}

// appendUsageChunk appends the extra chunk stream_options.include_usage
// asks for: no choices, and the usage.
func (j *job) appendUsageChunk(b []byte, cached int) []byte {
	b = j.appendChunkHead(b)
	u, _ := json.Marshal(j.usageOf(cached))
	b = append(b, `[],"usage":`...)
	b = append(b, u...)
	if tm := j.timings(cached); tm != nil {
		t, _ := json.Marshal(tm)
		b = append(b, `,"timings":`...)
		b = append(b, t...)
	}
	return append(b, "}\n\n"...)
}
