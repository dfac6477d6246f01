package translate

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestAnthropicUpstreamHeader: a pool's call carries its version, the
// default one when it sets none, and its key only when it has one; a
// client's version and beta reach the call without touching the pool's
// header, which every call shares.
func TestAnthropicUpstreamHeader(t *testing.T) {
	for _, c := range []struct {
		name, key, version string
		want               http.Header
	}{
		{"default version", "sk-ant", "", http.Header{"Anthropic-Version": {AnthropicVersion}, "X-Api-Key": {"sk-ant"}}},
		{"pool's version", "sk-ant", "2025-01-01", http.Header{"Anthropic-Version": {"2025-01-01"}, "X-Api-Key": {"sk-ant"}}},
		{"no key", "", "", http.Header{"Anthropic-Version": {AnthropicVersion}}},
	} {
		h := http.Header{}
		AnthropicUpstream{}.SetHeader(h, c.key, c.version)
		if d := cmp.Diff(c.want, h); d != "" {
			t.Errorf("%s: SetHeader (-want +got):\n%s", c.name, d)
		}
	}

	pool := http.Header{"Anthropic-Version": {AnthropicVersion}, "X-Api-Key": {"sk-ant"}}
	for _, c := range []struct {
		name, version, beta string
		want                http.Header
	}{
		{"nothing asked", "", "", pool},
		{"client's version", "2025-01-01", "", http.Header{"Anthropic-Version": {"2025-01-01"}, "X-Api-Key": {"sk-ant"}}},
		{"beta", "", "a,b", http.Header{"Anthropic-Version": {AnthropicVersion}, "Anthropic-Beta": {"a,b"}, "X-Api-Key": {"sk-ant"}}},
	} {
		got := AnthropicUpstream{}.ClientHeader(pool, c.version, c.beta)
		if d := cmp.Diff(c.want, got); d != "" {
			t.Errorf("%s: ClientHeader (-want +got):\n%s", c.name, d)
		}
	}
	if d := cmp.Diff(http.Header{"Anthropic-Version": {AnthropicVersion}, "X-Api-Key": {"sk-ant"}}, pool); d != "" {
		t.Errorf("the pool's shared header changed (-want +got):\n%s", d)
	}
}
