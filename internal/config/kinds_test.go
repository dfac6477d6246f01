package config

// What each pool kind scrapes and probes when its pool names no paths.

import (
	"testing"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

func TestPoolDefaultsByKind(t *testing.T) {
	for _, tc := range []struct {
		kind, metrics, health string
	}{
		{catalog.KindOpenAI, "", ""},
		{catalog.KindVLLM, "/metrics", "/health"},
		{catalog.KindSGLang, "/metrics", "/health"},
		{catalog.KindLlamaCpp, "/metrics", "/health"},
		{catalog.KindOllama, "/api/ps", "/api/version"},
		{catalog.KindAnthropic, "", ""},
		{catalog.KindAzure, "", ""},
	} {
		p := catalog.Pool{Name: "p", Kind: tc.kind}
		PoolDefaults(&p)
		if p.Metrics.Path != tc.metrics || p.Health.Path != tc.health {
			t.Errorf("kind %s: metrics.path %q, health.path %q; want %q, %q", tc.kind, p.Metrics.Path, p.Health.Path, tc.metrics, tc.health)
		}
	}
}

func TestLoadSelfHostedKinds(t *testing.T) {
	cfg, err := Parse([]byte(`
pools:
  - name: cpu
    kind: llamacpp
    endpoints:
      - url: http://127.0.0.1:8080/v1
  - name: laptop
    kind: ollama
    endpoints:
      - url: http://127.0.0.1:11434/v1
models:
  - name: small
    pool: cpu
  - name: llama3.2
    pool: laptop
    upstream_model: llama3.2:1b
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Pools[1].Metrics.Path; got != "/api/ps" {
		t.Errorf("ollama pool's metrics.path = %q, want /api/ps", got)
	}
}
