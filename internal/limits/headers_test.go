// The x-ratelimit-* headers and the error a refusal is answered with.
package limits

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestFormatReset(t *testing.T) {
	for _, tc := range []struct {
		in   time.Duration
		want string
	}{
		{0, "0s"},
		{-time.Second, "0s"},
		{time.Nanosecond, "1ms"},
		{20 * time.Millisecond, "20ms"},
		{1500 * time.Microsecond, "2ms"},
		{time.Second, "1s"},
		{8640 * time.Millisecond, "8.64s"},
		{6 * time.Minute, "6m0s"},
		{6*time.Minute + time.Microsecond, "6m0.001s"},
	} {
		if got := formatReset(tc.in); got != tc.want {
			t.Errorf("formatReset(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestHeaders(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    Decision
		want http.Header
	}{
		{
			name: "both kinds",
			d: Decision{
				Allowed:  true,
				Requests: Header{Limit: 60, Remaining: 59, Reset: time.Second},
				Tokens:   Header{Limit: 150000, Remaining: 149984, Reset: 6 * time.Millisecond},
			},
			want: http.Header{
				"X-Ratelimit-Limit-Requests":     {"60"},
				"X-Ratelimit-Remaining-Requests": {"59"},
				"X-Ratelimit-Reset-Requests":     {"1s"},
				"X-Ratelimit-Limit-Tokens":       {"150000"},
				"X-Ratelimit-Remaining-Tokens":   {"149984"},
				"X-Ratelimit-Reset-Tokens":       {"6ms"},
			},
		},
		{
			name: "requests only",
			d:    Decision{Code: CodeRateLimited, Requests: Header{Limit: 3, Remaining: 0, Reset: 6 * time.Minute}},
			want: http.Header{
				"X-Ratelimit-Limit-Requests":     {"3"},
				"X-Ratelimit-Remaining-Requests": {"0"},
				"X-Ratelimit-Reset-Requests":     {"6m0s"},
			},
		},
		{
			name: "no limits",
			d:    Decision{Allowed: true},
			want: http.Header{},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := http.Header{}
			Headers(got, tc.d)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("headers (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRefusalError(t *testing.T) {
	type errView struct {
		Status            int
		Type, Code        string
		Message           string
		RetryAfterSeconds int
	}
	for _, tc := range []struct {
		name string
		d    Decision
		want *errView
	}{
		{name: "allowed", d: Decision{Allowed: true}},
		{
			name: "requests",
			d:    Decision{Code: CodeRateLimited, Kind: KindRequests, RetryAfter: 1500 * time.Millisecond},
			want: &errView{429, "rate_limit_error", "rate_limit_exceeded", "Rate limit reached for requests per minute. Please try again in 1.5s.", 2},
		},
		{
			name: "too large",
			d:    Decision{Code: CodeRateLimited, Kind: KindTokens, RetryAfter: time.Minute, TooLarge: true},
			want: &errView{429, "rate_limit_error", "rate_limit_exceeded", "Request too large for the tokens-per-minute limit: lower max_tokens or the prompt.", 60},
		},
		{
			name: "budget",
			d:    Decision{Code: CodeInsufficientQuota, Kind: KindBudgetUSD, RetryAfter: 14 * time.Hour},
			want: &errView{429, "rate_limit_error", "insufficient_quota", "The spending budget for this period is spent. Please try again in 14h0m0s.", 50400},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := RefusalError(tc.d)
			var got *errView
			if e != nil {
				got = &errView{e.Status, e.Type, e.Code, e.Message, e.RetryAfterSeconds}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("RefusalError (-want +got):\n%s", diff)
			}
		})
	}
}

func BenchmarkHeaders(b *testing.B) {
	d := Decision{
		Allowed:  true,
		Requests: Header{Limit: 60, Remaining: 59, Reset: time.Second},
		Tokens:   Header{Limit: 150000, Remaining: 149984, Reset: 6 * time.Millisecond},
	}
	b.ReportAllocs()
	for b.Loop() {
		Headers(make(http.Header, 8), d)
	}
}
