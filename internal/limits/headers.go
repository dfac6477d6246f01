// The x-ratelimit-* response headers, as OpenAI sends them: limit, remaining
// and reset for requests and for tokens, reset written as a duration such as
// "20ms", "1s" or "6m0s".
package limits

import (
	"net/http"
	"strconv"
	"time"
)

// Header names, in http.Header's canonical form so that they are stored
// as they are: the wire carries them so for HTTP/1.1 (OpenAI's lower case
// differs only in case, which HTTP ignores) and lower-cased for HTTP/2.
const (
	headerLimitRequests     = "X-Ratelimit-Limit-Requests"
	headerRemainingRequests = "X-Ratelimit-Remaining-Requests"
	headerResetRequests     = "X-Ratelimit-Reset-Requests"
	headerLimitTokens       = "X-Ratelimit-Limit-Tokens"
	headerRemainingTokens   = "X-Ratelimit-Remaining-Tokens"
	headerResetTokens       = "X-Ratelimit-Reset-Tokens"
)

// Headers writes d's x-ratelimit-* headers to w. A kind with no limit (a
// Header whose Limit is 0) writes none of its three. Every response
// carries them, so they share one allocation for their values.
func Headers(w http.Header, d Decision) {
	var vals []string
	set := func(key, v string) {
		if vals == nil {
			vals = make([]string, 0, 6)
		}
		vals = append(vals, v)
		w[key] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	if h := d.Requests; h.Limit > 0 {
		set(headerLimitRequests, strconv.FormatInt(h.Limit, 10))
		set(headerRemainingRequests, strconv.FormatInt(h.Remaining, 10))
		set(headerResetRequests, formatReset(h.Reset))
	}
	if h := d.Tokens; h.Limit > 0 {
		set(headerLimitTokens, strconv.FormatInt(h.Limit, 10))
		set(headerRemainingTokens, strconv.FormatInt(h.Remaining, 10))
		set(headerResetTokens, formatReset(h.Reset))
	}
}

// formatReset writes d as OpenAI does: a Go duration rounded up to the
// millisecond ("20ms", "1.5s", "6m0s"); zero or less is "0s".
func formatReset(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	if r := d.Truncate(time.Millisecond); r != d {
		d = r + time.Millisecond
	}
	return d.String()
}
