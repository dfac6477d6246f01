package openai

// An answer's token accounting, as OpenAI reports it, read from a whole
// answer or a stream chunk without decoding the rest of it; the cached
// prompt tokens from llama.cpp's timings where its usage has none.

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// Usage is the token accounting of an answer, as OpenAI reports it.
type Usage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details,omitempty"`
}

// CachedTokens is the prompt tokens served from the backend's prefix cache.
func (u *Usage) CachedTokens() int64 {
	if u == nil || u.PromptTokensDetails == nil {
		return 0
	}
	return u.PromptTokensDetails.CachedTokens
}

// UsageOf reads the usage object of a JSON response or stream chunk; nil
// when there is none. Where the usage has no prompt_tokens_details and a
// timings object beside it has cache_n (llama.cpp's server), cache_n is
// its cached tokens. It reads that object alone, not the whole body, and
// its four counts without reflection; anything unusual in it goes to the
// JSON decoder.
func UsageOf(body []byte) (*Usage, error) {
	i := valueAt(body, `"usage"`)
	if i < 0 || body[i] != '{' {
		return nil, nil
	}
	u := new(Usage)
	if err := readUsageAt(body, i, u); err != nil {
		return nil, err
	}
	return u, nil
}

// ReadUsage is UsageOf into u, for a caller that has one to fill: false
// when body has no usage object, u then as it was.
func ReadUsage(body []byte, u *Usage) (bool, error) {
	i := valueAt(body, `"usage"`)
	if i < 0 || body[i] != '{' {
		return false, nil
	}
	return true, readUsageAt(body, i, u)
}

// readUsageAt reads into u the usage object at body[i:].
func readUsageAt(body []byte, i int, u *Usage) error {
	end, err := scanValue(body, i)
	if err != nil {
		return fmt.Errorf("reading usage: %w", err)
	}
	obj := body[i:end]
	*u = Usage{}
	if !scanUsage(obj, u) {
		*u = Usage{}
		if err := json.Unmarshal(obj, u); err != nil {
			return fmt.Errorf("reading usage: %w", err)
		}
	}
	if u.PromptTokensDetails == nil {
		if cached, ok := timingsCached(body, u.PromptTokens); ok {
			u.PromptTokensDetails = &struct {
				CachedTokens int64 `json:"cached_tokens"`
			}{cached}
		}
	}
	return nil
}

// timingsCached is the prompt tokens that llama.cpp's server reports it
// took from its cache, the timings object's cache_n beside the usage,
// and false where there is none, or it is not a whole number from 0 to
// prompt: llama.cpp's usage has no prompt_tokens_details.
func timingsCached(body []byte, prompt int64) (int64, bool) {
	i := valueAt(body, `"timings"`)
	if i < 0 || body[i] != '{' {
		return 0, false
	}
	end, err := scanValue(body, i)
	if err != nil {
		return 0, false
	}
	t := body[i:end]
	j := valueAt(t, `"cache_n"`)
	if j < 0 {
		return 0, false
	}
	k := j
	for k < len(t) && t[k] >= '0' && t[k] <= '9' {
		k++
	}
	if k == j || k == len(t) || !endsNumber(t[k]) {
		return 0, false
	}
	n, err := strconv.ParseInt(string(t[j:k]), 10, 64)
	if err != nil || n > prompt {
		return 0, false
	}
	return n, true
}

// endsNumber reports whether c may follow a number in JSON.
func endsNumber(c byte) bool {
	return c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\r' || c == '\n'
}

// scanUsage reads usage's counts from obj, reporting false if a count is
// not a plain integer.
func scanUsage(obj []byte, u *Usage) bool {
	count := func(in []byte, key string) (int64, bool) {
		j := valueAt(in, key)
		if j < 0 {
			return 0, true
		}
		end := j
		for end < len(in) && in[end] >= '0' && in[end] <= '9' {
			end++
		}
		if end == len(in) || end == j || !endsNumber(in[end]) {
			return 0, false // not a plain integer: 1e3, 2.0, "5", null
		}
		n, err := strconv.ParseInt(string(in[j:end]), 10, 64)
		return n, err == nil
	}
	var ok [3]bool
	u.PromptTokens, ok[0] = count(obj, `"prompt_tokens"`)
	u.CompletionTokens, ok[1] = count(obj, `"completion_tokens"`)
	u.TotalTokens, ok[2] = count(obj, `"total_tokens"`)
	if !ok[0] || !ok[1] || !ok[2] {
		return false
	}
	if d := valueAt(obj, `"prompt_tokens_details"`); d >= 0 && obj[d] == '{' {
		end, err := scanValue(obj, d)
		if err != nil {
			return false
		}
		cached, ok := count(obj[d:end], `"cached_tokens"`)
		if !ok {
			return false
		}
		u.PromptTokensDetails = &struct {
			CachedTokens int64 `json:"cached_tokens"`
		}{cached}
	}
	return true
}
