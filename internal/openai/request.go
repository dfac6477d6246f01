package openai

// The few request fields routing reads, found without decoding the whole
// body: a scan over the top-level object notes where each wanted value
// lies, decodes only those (values.go), and lets a rewrite splice new
// values in place (rewrite.go), so a body that needs no change reaches
// the backend byte for byte.

// Request is what routing needs from a completion, chat or embeddings body.
type Request struct {
	Model string
	// Stream reports whether the client asked for server-sent events.
	Stream bool
	// IncludeUsage reports whether the client asked for the usage chunk
	// (stream_options.include_usage).
	IncludeUsage bool
	// MaxTokens is the most tokens an answer may take: max_tokens or
	// max_completion_tokens, whichever is given (a body giving both must
	// give them the same value); zero when neither is, or when it is 0.
	// It is never above MaxTokensLimit.
	MaxTokens int64
	// Choices is how many answers the backend may generate: n, or best_of
	// when that is larger (a completion generates best_of and returns the
	// n best); 1 when neither is given. It is never above MaxChoices.
	Choices int64
	// User is the client's end-user id, if it sent one.
	User string
	// CacheSalt is the client's cache_salt, which keeps its prompts out of
	// the prefix cache other salts use; empty when it sent none.
	CacheSalt string
	// PromptCacheKey is the client's prompt_cache_key, which names the
	// requests it wants served from one cache (a conversation, say), and
	// which routing places them by; empty when it sent none.
	PromptCacheKey string
	// Billed are the fields the body gives that change what a provider
	// bills or runs beyond a request's tokens, at a value that may
	// (billed.go); a Rewrite can drop them.
	Billed BilledFields
	// ServiceTier is the body's service_tier, decoded; empty when it
	// gives none, or null.
	ServiceTier string

	model         span // the model value, quotes included
	streamOptions span // the stream_options value, null included; zero when absent
	includeUsage  span // the include_usage value in stream_options; zero when absent
	cacheSalt     span // the cache_salt value, null included; zero when absent
	prompt        span // the messages or prompt value, the last given; zero when absent
	maxTokens     span // the max_tokens value, null included; zero when absent
	// templateKwargs is the chat_template_kwargs value, the last given
	// (what Python's decoder keeps); zero when absent.
	templateKwargs span
	effort         bool // whether the body names reasoning_effort
	end            int  // offset of the object's closing brace
	// lists are what prompt, prompt_embeds and input list, by field
	// from fieldPrompt (prompts.go).
	lists [3]PromptList
	// present are the billed fields the body gives, at any value, and
	// billed where each lies, by BilledField.
	present BilledFields
	billed  [numBilled]member
}

// Prompt is the body's messages or prompt value as sent: what a backend's
// prefix cache keys on, for routing to find where a prompt's prefix is
// cached. Nil when the body has neither. Only routing reads it, and a
// body that names both, or either twice, only routes less well.
func (r *Request) Prompt(body []byte) []byte {
	if !r.prompt.ok() {
		return nil
	}
	return body[r.prompt.start:r.prompt.end]
}

// span is a half-open byte range [start, end) of a body; zero means absent.
type span struct{ start, end int }

func (s span) ok() bool { return s.end > 0 }

// MaxTokensLimit is the most max_tokens or max_completion_tokens may ask
// for: 2^31-1, hundreds of times the longest context any model serves
// (about 10M tokens), the most a backend holding counts in 32 bits can
// read, and far enough below 2^63 that a prompt estimate added to it
// cannot overflow a token reservation.
const MaxTokensLimit = 1<<31 - 1

// MaxChoices is the most answers n or best_of may ask of one request, as
// OpenAI bounds n. A request's output tokens are reserved for every one.
const MaxChoices = 128

// The fields Parse reads, as bits of the set of those a body has given.
// includeUsage is inside stream_options; the others are top-level.
const (
	fieldModel = iota
	fieldStream
	fieldStreamOptions
	fieldMaxTokens
	fieldMaxCompletionTokens
	fieldUser
	fieldN
	fieldBestOf
	fieldCacheSalt
	fieldPromptCacheKey
	fieldPrompt
	fieldPromptEmbeds
	fieldInput
	fieldTools        // any value: given twice, a decoder could find server tools another does not
	fieldBilled       // the first of the billed fields, in BilledField's order
	fieldIncludeUsage = fieldBilled + int(numBilled)
)

// fieldNames are the keys of the fields Parse reads, by the constants
// above; fieldParams name them in errors.
var (
	fieldNames = [...]string{"model", "stream", "stream_options", "max_tokens", "max_completion_tokens", "user", "n", "best_of", "cache_salt", "prompt_cache_key",
		"prompt", "prompt_embeds", "input", "tools",
		"service_tier", "store", "web_search_options", "modalities", "audio", "prediction", "prompt_cache_retention", "inference_geo", "speed", "container", "fallbacks", "context_management", "mcp_servers",
		"include_usage"}
	fieldParams = func() (p [len(fieldNames)]string) {
		p = fieldNames
		p[fieldIncludeUsage] = "stream_options.include_usage"
		return p
	}()
)

// ParseRequest reads routing's fields from a JSON body. It fails with a 400
// *Error on malformed JSON, a body that is not an object, a missing model,
// a routing field that is ill-typed, out of range, given twice or spelled
// so that decoders disagree on it, or max_tokens and
// max_completion_tokens given different values.
func ParseRequest(body []byte) (*Request, error) {
	r := new(Request)
	if err := r.Parse(body); err != nil {
		return nil, err
	}
	return r, nil
}

// Parse reads routing's fields from body into r; see ParseRequest. It
// checks the whole body is valid JSON in the same pass.
//
// Backends decode the body again, each its own way, and the key's limits
// and bill follow what Parse reads, so Parse refuses what they could read
// differently: a routing field given twice, where most decoders keep the
// last and some the first; a key that is not a routing field's but that
// Go's encoding/json would take for one, matching case-insensitively; and
// both max_tokens and max_completion_tokens with different values, of
// which backends heed one or the other. Keys are compared as decoders see
// them, escapes decoded.
func (r *Request) Parse(body []byte) error {
	err := r.parse(body)
	if err != nil && !valid(body) {
		return errNotJSON() // rather than a fault found before the bad syntax
	}
	return err
}

func (r *Request) parse(body []byte) error {
	*r = Request{}
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		if valid(body) {
			return BadRequest("", "The request body must be a JSON object.")
		}
		return errNotJSON()
	}
	var seen uint32 // bit f set when field f has been given
	c := givenCounts{maxTokens: -1, maxCompletionTokens: -1, n: -1, bestOf: -1}
	prev := i + 1 // where the member before the next ends: past the brace at first
	i = skipSpace(body, i+1)
	if i < len(body) && body[i] == '}' {
		r.end = i
	} else {
		follows := BilledField(numBilled) // the billed field of the member before, if any
		for {
			k := i
			if follows < numBilled {
				r.billed[follows].next, follows = k, numBilled
			}
			kEnd, next, err := scanMember(body, i)
			if err != nil {
				return errNotJSON()
			}
			key := body[i+1 : kEnd-1]
			f, exact := keyField(key, fieldModel, fieldIncludeUsage-1)
			i = skipSpace(body, next)
			vEnd, err := scanValue(body, i)
			if err != nil {
				return errNotJSON()
			}
			if f >= 0 {
				if err := checkKey(f, exact, &seen); err != nil {
					return err
				}
			}
			switch {
			case f < 0:
				r.noteMember(key, i, vEnd)
			case f >= fieldBilled:
				follows = BilledField(f - fieldBilled)
				r.noteBilled(follows, body[i:vEnd], member{start: k, end: vEnd, prev: prev})
			default:
				if err := r.readField(f, body, i, vEnd, &c); err != nil {
					return err
				}
			}
			prev = vEnd
			i = skipSpace(body, vEnd)
			if i < len(body) && body[i] == '}' {
				r.end = i
				break
			}
			if i >= len(body) || body[i] != ',' {
				return errNotJSON()
			}
			i = skipSpace(body, i+1)
		}
	}
	if skipSpace(body, r.end+1) != len(body) {
		return errNotJSON()
	}
	return r.settle(c)
}

// givenCounts are a body's counts as given: -1 when not given, or null.
type givenCounts struct{ maxTokens, maxCompletionTokens, n, bestOf int64 }

// noteMember notes where the value body[start:end] of a member that is
// not a routing field lies, when a rewrite or routing reads it: the
// messages, chat_template_kwargs, reasoning_effort.
func (r *Request) noteMember(key []byte, start, end int) {
	switch {
	case keyIs(key, "messages"):
		r.prompt = span{start, end}
	case keyIs(key, "chat_template_kwargs"):
		r.templateKwargs = span{start, end}
	case keyIs(key, "reasoning_effort"):
		r.effort = true
	}
}

// readField decodes routing field f's value body[start:end] into r, or
// into c for the counts only the whole body settles.
func (r *Request) readField(f int, body []byte, start, end int, c *givenCounts) error {
	v := body[start:end]
	var err error
	switch f {
	case fieldModel:
		if v[0] != '"' {
			return invalidType(f, "a string", v)
		}
		r.Model = decodeString(v)
		r.model = span{start, end}
	case fieldStream:
		r.Stream, err = decodeBool(f, v)
	case fieldStreamOptions:
		err = r.parseStreamOptions(body, start, end)
	case fieldMaxTokens:
		if c.maxTokens, err = decodeCount(f, v, 0, MaxTokensLimit, -1); err == nil {
			r.maxTokens = span{start, end}
		}
	case fieldMaxCompletionTokens:
		c.maxCompletionTokens, err = decodeCount(f, v, 0, MaxTokensLimit, -1)
	case fieldN:
		c.n, err = decodeCount(f, v, 1, MaxChoices, -1)
	case fieldBestOf:
		c.bestOf, err = decodeCount(f, v, 1, MaxChoices, -1)
	case fieldUser:
		r.User, err = decodeOptionalString(f, v)
	case fieldCacheSalt:
		if r.CacheSalt, err = decodeOptionalString(f, v); err == nil {
			r.cacheSalt = span{start, end}
		}
	case fieldPromptCacheKey:
		r.PromptCacheKey, err = decodeOptionalString(f, v)
	case fieldPrompt, fieldPromptEmbeds, fieldInput:
		r.lists[f-fieldPrompt] = readList(v)
		if f == fieldPrompt {
			r.prompt = span{start, end}
		}
	}
	return err
}

// settle checks what only the whole body shows, that it gives a model
// and that max_tokens and max_completion_tokens agree, and sets
// MaxTokens and Choices from c.
func (r *Request) settle(c givenCounts) error {
	if r.Model == "" {
		return BadRequest("model", "You must provide a model parameter.")
	}
	switch {
	case c.maxTokens >= 0 && c.maxCompletionTokens >= 0 && c.maxTokens != c.maxCompletionTokens:
		return BadRequest("max_completion_tokens", "max_tokens (%d) and max_completion_tokens (%d) disagree, and backends heed one or the other: send one of them, or the same value in both.", c.maxTokens, c.maxCompletionTokens)
	case c.maxCompletionTokens >= 0:
		r.MaxTokens = c.maxCompletionTokens
	default:
		r.MaxTokens = max(c.maxTokens, 0)
	}
	r.Choices = max(c.n, c.bestOf, 1)
	return nil
}

func errNotJSON() error { return BadRequest("", "The request body is not valid JSON.") }

// checkKey refuses field f's key when it is a case-folded spelling or
// the field has been seen before, and notes it in seen.
func checkKey(f int, exact bool, seen *uint32) error {
	if !exact {
		return BadRequest(fieldParams[f], "The request body has a key that differs from '%s' only in case, which backends read differently; spell it '%s'.", fieldNames[f], fieldNames[f])
	}
	if *seen&(1<<f) != 0 {
		return BadRequest(fieldParams[f], "Duplicate key '%s' in the request body: backends differ on which value they keep, so send it once.", fieldNames[f])
	}
	*seen |= 1 << f
	return nil
}

// parseStreamOptions reads the stream_options value body[start:end]: an
// object or null, whose include_usage, when given, is a boolean or null.
func (r *Request) parseStreamOptions(body []byte, start, end int) error {
	r.streamOptions = span{start, end}
	if body[start] == 'n' {
		return nil
	}
	if body[start] != '{' {
		return invalidType(fieldStreamOptions, "an object or null", body[start:end])
	}
	var seen uint32
	i := skipSpace(body, start+1)
	if body[i] == '}' {
		return nil
	}
	for { // body[start:end] is a valid object, so the scans cannot fail
		kEnd, next, _ := scanMember(body, i)
		f, exact := keyField(body[i+1:kEnd-1], fieldIncludeUsage, fieldIncludeUsage)
		i = skipSpace(body, next)
		vEnd, _ := scanValue(body, i)
		if f >= 0 {
			if err := checkKey(f, exact, &seen); err != nil {
				return err
			}
			var err error
			if r.IncludeUsage, err = decodeBool(f, body[i:vEnd]); err != nil {
				return err
			}
			r.includeUsage = span{i, vEnd}
		}
		i = skipSpace(body, vEnd)
		if body[i] == '}' {
			return nil
		}
		i = skipSpace(body, i+1) // past the comma
	}
}
