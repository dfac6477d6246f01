// The x-ratelimit-* response headers, as OpenAI sends them: limit, remaining
// and reset for requests and for tokens, reset written as a duration such as
// "20ms", "1s" or "6m0s".
package limits

import (
	"net/http"
	"strconv"
	"time"
)

// Header names, lower-case as OpenAI writes them; http.Header canonicalizes
// them on the wire for HTTP/1.1 and lower-cases them again for HTTP/2.
const (
	headerLimitRequests     = "x-ratelimit-limit-requests"
	headerRemainingRequests = "x-ratelimit-remaining-requests"
	headerResetRequests     = "x-ratelimit-reset-requests"
	headerLimitTokens       = "x-ratelimit-limit-tokens"
	headerRemainingTokens   = "x-ratelimit-remaining-tokens"
	headerResetTokens       = "x-ratelimit-reset-tokens"
)

// Headers writes d's x-ratelimit-* headers to w. A kind with no limit (a
// Header whose Limit is 0) writes none of its three.
func Headers(w http.Header, d Decision) {
	if h := d.Requests; h.Limit > 0 {
		w.Set(headerLimitRequests, strconv.FormatInt(h.Limit, 10))
		w.Set(headerRemainingRequests, strconv.FormatInt(h.Remaining, 10))
		w.Set(headerResetRequests, formatReset(h.Reset))
	}
	if h := d.Tokens; h.Limit > 0 {
		w.Set(headerLimitTokens, strconv.FormatInt(h.Limit, 10))
		w.Set(headerRemainingTokens, strconv.FormatInt(h.Remaining, 10))
		w.Set(headerResetTokens, formatReset(h.Reset))
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
