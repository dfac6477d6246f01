package router

import (
	"net/http"
	"testing"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// TestModelFor checks that a name resolves through the catalog's aliases
// and that a model the key may not use answers as one that does not exist.
func TestModelFor(t *testing.T) {
	cat, err := catalog.New([]catalog.Pool{{Name: "p", Endpoints: []catalog.Endpoint{{URL: "http://x/v1"}}}},
		[]catalog.Model{{Name: "llama", Pool: "p", Aliases: []string{"small"}}, {Name: "qwen", Pool: "p"}})
	if err != nil {
		t.Fatal(err)
	}
	s := &snapshot{cat: cat}
	for _, c := range []struct {
		name string
		key  *tenant.Key
		want string // the canonical model; empty for 404
	}{
		{"llama", nil, "llama"},
		{"small", nil, "llama"},
		{"nope", nil, ""},
		{"qwen", &tenant.Key{}, "qwen"},
		{"llama", &tenant.Key{Models: []string{"sm*"}}, "llama"}, // allowed by its alias
		{"small", &tenant.Key{Models: []string{"llama"}}, "llama"},
		{"qwen", &tenant.Key{Models: []string{"llama", "small"}}, ""},
		{"nope", &tenant.Key{Models: []string{"*"}}, ""},
	} {
		m, err := s.modelFor(c.key, c.name)
		switch {
		case c.want == "":
			if e := openai.AsError(err); err == nil || e.Status != http.StatusNotFound || e.Code != "model_not_found" {
				t.Errorf("modelFor(%v, %q) = %v, %v; want 404 model_not_found", c.key, c.name, m, err)
			}
		case err != nil || m.Name != c.want:
			t.Errorf("modelFor(%v, %q) = %v, %v; want %s", c.key, c.name, m, err, c.want)
		}
	}
}
