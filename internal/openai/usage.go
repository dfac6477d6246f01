package openai

// An answer's token accounting, as OpenAI reports it, read from a whole
// answer or a stream chunk without decoding the rest of it.

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
// when there is none. It reads that object alone, not the whole body, and
// its four counts without reflection; anything unusual in it goes to the
// JSON decoder.
func UsageOf(body []byte) (*Usage, error) {
	i := valueAt(body, `"usage"`)
	if i < 0 || body[i] != '{' {
		return nil, nil
	}
	end, err := scanValue(body, i)
	if err != nil {
		return nil, fmt.Errorf("reading usage: %w", err)
	}
	obj := body[i:end]
	u := new(Usage)
	if scanUsage(obj, u) {
		return u, nil
	}
	*u = Usage{}
	if err := json.Unmarshal(obj, u); err != nil {
		return nil, fmt.Errorf("reading usage: %w", err)
	}
	return u, nil
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
