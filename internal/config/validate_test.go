package config

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
)

// validConfig is a small config that passes Validate, for tests to break
// one field at a time.
func validConfig() *Config {
	c := Default()
	c.Tenants = []tenant.TenantLimits{{Path: "acme", Limits: tenant.Limits{RPM: 60}}}
	c.Pools = []catalog.Pool{
		{Name: "gpu-a", Kind: catalog.KindVLLM, Endpoints: []catalog.Endpoint{
			{URL: "http://10.0.0.1:8000/v1"}, {URL: "http://10.0.0.2:8000/v1"}, {URL: "http://10.0.0.3:8000/v1"}}},
		{Name: "hosted", APIKeyEnv: "LLMGW_TEST_HOSTED_KEY", Endpoints: []catalog.Endpoint{{URL: "https://api.example.com/v1"}}},
	}
	c.Models = []catalog.Model{
		{Name: "llama", Aliases: []string{"default"}, Pool: "gpu-a", Fallbacks: []string{"gpt"}},
		{Name: "qwen", Pool: "gpu-a", SLO: catalog.SLO{TTFTp99: time.Second, TPOTp99: 50 * time.Millisecond}},
		{Name: "gpt", Aliases: []string{"gpt-mini"}, Pool: "hosted", Price: catalog.Price{InputPerMillion: 0.15, OutputPerMillion: 0.6}},
	}
	return &c
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(c *Config)
		want   []string // every problem, in order; none for a valid config
	}{
		{"valid", func(*Config) {}, nil},
		{"negative tpot", func(c *Config) { c.Models[1].SLO.TPOTp99 = -time.Second },
			[]string{"models[1].slo.tpot_p99: must be positive, got -1s"}},
		{"ftp endpoint", func(c *Config) { c.Pools[0].Endpoints[2].URL = "ftp://x" },
			[]string{`pools[0].endpoints[2].url: must be an http or https URL, got "ftp://x"`}},
		{"undefined pool", func(c *Config) { c.Models[0].Pool = "gpu-b" },
			[]string{`models[0].pool: pool "gpu-b" is not defined`}},
		{"alias taken", func(c *Config) { c.Models[2].Aliases[0] = "default" },
			[]string{`models[2].aliases[0]: "default" is already the name or alias of models[0]`}},
		{"fallback unknown", func(c *Config) { c.Models[1].Fallbacks = []string{"nope"} },
			[]string{`models[1].fallbacks[0]: "nope" is not a model`}},
		{"fallback to self by alias", func(c *Config) { c.Models[0].Fallbacks = []string{"default"} },
			[]string{`models[0].fallbacks[0]: "default" is this model itself`}},
		{"fallback defined later is fine", func(c *Config) { c.Models[0].Fallbacks = []string{"gpt-mini", "qwen"} }, nil},
		{"auth", func(c *Config) { c.Router.Auth = "maybe" },
			[]string{`router.auth: must be keys or none, got "maybe"`}},
		{"tenant label", func(c *Config) { c.Router.TenantLabel = "" },
			[]string{`router.tenant_label: must be org, team or user, got ""`}},
		{"body limit", func(c *Config) { c.Server.MaxBodyBytes = -1 },
			[]string{"server.max_body_bytes: must be positive, got -1"}},
		{"redis error mode", func(c *Config) { c.Limits.OnRedisError = "" },
			[]string{`limits.on_redis_error: must be open or closed, got ""`}},
		{"redis url ok", func(c *Config) { c.Limits.Redis = "rediss://cache:6380/1" }, nil},
		{"redis acl user over tls", func(c *Config) {
			c.Limits.Redis = "rediss://llmgw:s3cret@cache:6380/1"
			c.Limits.RedisCAFile, c.Limits.RedisCertFile, c.Limits.RedisKeyFile = "ca.pem", "client.pem", "client.key"
		}, nil},
		{"redis url without its scheme", func(c *Config) { c.Limits.Redis = "llmgw:s3cret@cache:6380/1" },
			[]string{"limits.redis: must be a redis:// or rediss:// URL"}},
		{"redis url not a url", func(c *Config) { c.Limits.Redis = "redis://llmgw:s3%zzcret@cache:6380/1" },
			[]string{"limits.redis: is not a valid URL"}},
		{"redis client key alone", func(c *Config) { c.Limits.Redis, c.Limits.RedisKeyFile = "rediss://cache:6380/1", "client.key" },
			[]string{"limits.redis_cert_file: must be set with limits.redis_key_file: the client certificate"}},
		{"tenant period", func(c *Config) { c.Tenants[0].Period = "year" },
			[]string{`tenants[0].period: must be day or month, got "year"`}},
		{"tenant path", func(c *Config) { c.Tenants[0].Path = "acme/sea rch" },
			[]string{`tenants[0].path: tenant path "acme/sea rch": ' ' is not allowed in a level`}},
		{"tenant budget not finite", func(c *Config) { c.Tenants[0].BudgetUSD = math.Inf(1) },
			[]string{"tenants[0].budget_usd: must be a finite number, got +Inf"}},
		{"duplicate pool", func(c *Config) { c.Pools[1].Name = "gpu-a"; c.Models[2].Pool = "gpu-a" },
			[]string{`pools[1].name: "gpu-a" is already the name of pools[0]`}},
		{"empty names", func(c *Config) { c.Pools[1].Name = ""; c.Models[1].Name = "" },
			[]string{"pools[1].name: must not be empty", "models[1].name: must not be empty", `models[2].pool: pool "hosted" is not defined`}},
		{"pool without endpoints", func(c *Config) { c.Pools[1].Endpoints = nil },
			[]string{"pools[1].endpoints: must list at least one endpoint"}},
		{"pool kind", func(c *Config) { c.Pools[0].Kind = "tgi" },
			[]string{`pools[0].kind: must be one of openai, vllm, sglang, llamacpp, ollama, anthropic, azure, bedrock, gemini, vertex, got "tgi"`}},
		{"negative price", func(c *Config) { c.Models[2].Price.OutputPerMillion = -1 },
			[]string{"models[2].price.output_per_million: must not be negative, got -1"}},
		{"negative timeouts", func(c *Config) {
			c.Server.RequestTimeout = -time.Second
			c.Server.IdleTimeout = 0
			c.Models[0].FirstTokenTimeout = -time.Millisecond
		}, []string{
			"server.idle_timeout: must be positive, got 0s",
			"server.request_timeout: must be positive, got -1s",
			"models[0].first_token_timeout: must be positive, got -1ms",
		}},
		{"zero keepalive and grace are off", func(c *Config) { c.Server.KeepAlive = 0; c.Server.ShutdownGrace = 0 }, nil},
		{"no models", func(c *Config) { c.Models = nil },
			[]string{"models: must list at least one model"}},
		{"listen address", func(c *Config) { c.Server.Listen = "localhost" },
			[]string{`server.listen: must be host:port, such as :8080, got "localhost"`}},
		{"any free port", func(c *Config) { c.Server.Listen = "127.0.0.1:0"; c.Server.AdminListen = "[::1]:0" }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.mutate(c)
			err := c.Validate()
			var got []string
			if err != nil {
				ps, ok := AsProblems(err)
				if !ok {
					t.Fatalf("Validate error %v (%T) is not Problems", err, err)
				}
				for _, p := range ps {
					got = append(got, p.Error())
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateStoreURL(t *testing.T) {
	tests := []struct {
		url  string
		want string // the problem, or "" for none
	}{
		{"sqlite:llmgw.db", ""},
		{"sqlite:/var/lib/llmgw/llmgw.db", ""},
		{"postgres://llmgw@db:5432/llmgw?sslmode=disable", ""},
		{"postgresql://llmgw@db/llmgw", ""},
		{"memory:", ""},
		{"sqlite:", "store.url: sqlite: needs a file path, such as sqlite:llmgw.db"},
		{"memory:x", `store.url: memory: takes nothing after the colon, got "memory:x"`},
		{"", "store.url: must not be empty; use sqlite:PATH, postgres://, postgresql:// or memory:"},
		{"mysql://root:pw@db/x", `store.url: must be sqlite:PATH, postgres://, postgresql:// or memory:, got scheme "mysql"`},
		{"llmgw.db", `store.url: must be sqlite:PATH, postgres://, postgresql:// or memory:, got scheme "llmgw.db"`},
	}
	for _, tt := range tests {
		c := validConfig()
		c.Store.URL = tt.url
		got := ""
		if err := c.Validate(); err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("store.url %q: got %q; want %q", tt.url, got, tt.want)
		}
	}
}

// TestValidateKeepsSecrets checks that a secret written where it does not
// belong is refused without being echoed.
func TestValidateKeepsSecrets(t *testing.T) {
	const secret = "sk-live-0123456789abcdef"
	c := validConfig()
	c.Pools[1].APIKeyEnv = secret
	c.Pools[1].Endpoints[0].URL = "https://user:" + secret + "@api.example.com/v1"
	c.Store.URL = "mysql://root:" + secret + "@db/llmgw"
	err := c.Validate()
	if err == nil {
		t.Fatal("Validate accepted secrets in api_key_env, an endpoint URL and store.url")
	}
	ps, _ := AsProblems(err)
	if len(ps) != 3 {
		t.Errorf("got %d problems, want 3:\n%v", len(ps), err)
	}
	if strings.Contains(err.Error(), secret) {
		t.Errorf("problems echo the secret:\n%v", err)
	}
}

func TestValidateNilWhenValid(t *testing.T) {
	// A nil Problems in an error interface would be a non-nil error.
	if err := validConfig().Validate(); err != nil {
		t.Fatalf("Validate() = %#v; want nil", err)
	}
}

func TestProblemsUnwrap(t *testing.T) {
	c := validConfig()
	c.Router.Auth = "x"
	c.Models[0].Pool = "y"
	err := c.Validate()
	var p Problem
	if !errors.As(err, &p) || p.Path != "router.auth" {
		t.Errorf("errors.As(Problem) = %+v; want the router.auth problem", p)
	}
	got := strings.Split(err.Error(), "\n")
	want := []string{`router.auth: must be keys or none, got "x"`, `models[0].pool: pool "y" is not defined`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("one problem a line (-want +got):\n%s", diff)
	}
}

func TestCatalog(t *testing.T) {
	t.Setenv("LLMGW_TEST_HOSTED_KEY", "sk-test-key")
	c := validConfig()
	cat, err := c.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	m, ok := cat.Resolve("gpt-mini")
	if !ok || m.Name != "gpt" {
		t.Fatalf("Resolve(gpt-mini) = %v, %v; want gpt", m, ok)
	}
	p, ok := cat.Pool(m.Pool)
	if !ok || p.APIKey != "sk-test-key" {
		t.Errorf("pool %q key read from its env = %v; want it set", m.Pool, ok && p.APIKey != "")
	}

	c.Models[0].Pool = "nope"
	if _, err := c.Catalog(); err == nil {
		t.Error("Catalog of an invalid config succeeded")
	} else if _, ok := AsProblems(err); !ok {
		t.Errorf("Catalog error %v holds no Problems", err)
	}
}

// TestCatalogKeyFile: a pool's key is read from api_key_file, trimmed,
// each time the catalog is built, so a reload takes a rewritten file; a
// missing or empty file fails the build, naming the field and never the
// key.
func TestCatalogKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gemini-key")
	c := validConfig()
	c.Pools[1].APIKeyEnv, c.Pools[1].APIKeyFile = "", path
	key := func() (string, error) {
		cat, err := c.Catalog()
		if err != nil {
			return "", err
		}
		p, _ := cat.Pool(c.Pools[1].Name)
		return p.APIKey, nil
	}
	for _, want := range []string{"sk-file-key-1", "sk-file-key-2"} {
		if err := os.WriteFile(path, []byte("  "+want+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if got, err := key(); err != nil || got != want {
			t.Errorf("key read from the file = %v, %v; want it, %q", got == want, err, "sk-file-key-…")
		}
	}
	os.WriteFile(path, []byte("\n"), 0o600)
	if _, err := key(); err == nil || !strings.Contains(err.Error(), "api_key_file") || !strings.Contains(err.Error(), "is empty") {
		t.Errorf("an empty key file: %v; want an error naming api_key_file", err)
	}
	os.WriteFile(path, []byte(strings.Repeat("k", 1<<20)), 0o600)
	if _, err := key(); err == nil || strings.Contains(err.Error(), "kkkk") {
		t.Errorf("a 1 MiB key file: %v; want it refused, unquoted", err)
	}
	os.Remove(path)
	if _, err := key(); err == nil || !strings.Contains(err.Error(), "api_key_file") {
		t.Errorf("a missing key file: %v; want an error naming api_key_file", err)
	}
	c.Pools[1].APIKeyEnv = "LLMGW_TEST_HOSTED_KEY"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "pools[1].api_key_file: set api_key_env or api_key_file, not both") {
		t.Errorf("both api_key_env and api_key_file: %v", err)
	}
}
