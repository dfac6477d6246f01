package translate

import (
	"testing"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

func TestToVertexAnthropic(t *testing.T) {
	for _, c := range []struct {
		in, want string
	}{
		{`{"model":"claude","max_tokens":9,"messages":[{"role":"user","content":"hi"}],"stream":true}`,
			`{"anthropic_version":"vertex-2023-10-16","max_tokens":9,"messages":[{"role":"user","content":"hi"}],"stream":true}`},
		{`{"anthropic_version":"2023-06-01","metadata":{"user_id":"u\"1"},"model":"c","x\u00e9":1.50}`,
			`{"anthropic_version":"vertex-2023-10-16","metadata":{"user_id":"u\"1"},"xé":1.50}`},
		{`{}`, `{"anthropic_version":"vertex-2023-10-16"}`},
	} {
		got, err := ToVertexAnthropic([]byte(c.in))
		if err != nil || string(got) != c.want {
			t.Errorf("ToVertexAnthropic(%s) = %s, %v; want %s", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{`[]`, `{"model":`, `{"a":1,}`, ``} {
		if _, err := ToVertexAnthropic([]byte(bad)); err == nil || err.(*openai.Error).Status != 400 {
			t.Errorf("ToVertexAnthropic(%s): %v, want a 400", bad, err)
		}
	}
}
