package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
)

func glob(t testing.TB, pattern string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", pattern))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no files match testdata/%s", pattern)
	}
	return files
}

func TestGoodFiles(t *testing.T) {
	for _, file := range glob(t, "*.good.yaml") {
		t.Run(filepath.Base(file), func(t *testing.T) {
			c, err := Load(file)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			cat, err := c.Catalog()
			if err != nil {
				t.Fatalf("Catalog: %v", err)
			}
			for _, m := range c.Models {
				for _, n := range append([]string{m.Name}, m.Aliases...) {
					got, ok := cat.Resolve(n)
					if !ok || got.Name != m.Name {
						t.Errorf("Resolve(%q) = %v, %v; want model %q", n, got, ok, m.Name)
					}
				}
			}
		})
	}
}

// TestBadFiles loads each testdata/*.bad.yaml and compares its problems
// with the *.bad.yaml.err file beside it, one problem a line.
func TestBadFiles(t *testing.T) {
	for _, file := range glob(t, "*.bad.yaml") {
		t.Run(filepath.Base(file), func(t *testing.T) {
			want, err := os.ReadFile(file + ".err")
			if err != nil {
				t.Fatalf("expected problems: %v", err)
			}
			c, err := Load(file)
			if err == nil {
				t.Fatalf("Load succeeded with %+v; want problems", c)
			}
			ps, ok := AsProblems(err)
			if !ok {
				t.Fatalf("Load error %v (%T) holds no Problems", err, err)
			}
			if diff := cmp.Diff(strings.TrimSpace(string(want)), ps.Error()); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
	// Every expectation has its file, so none is silently skipped.
	for _, errFile := range glob(t, "*.bad.yaml.err") {
		if _, err := os.Stat(strings.TrimSuffix(errFile, ".err")); err != nil {
			t.Errorf("%s has no config beside it: %v", errFile, err)
		}
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load of a missing file: %v; want fs.ErrNotExist", err)
	}
	if _, ok := AsProblems(err); ok {
		t.Errorf("a missing file is not a config problem, got %v", err)
	}
}

// TestFullExample pins what the annotated example decodes to, field by field.
func TestFullExample(t *testing.T) {
	got, err := Load("testdata/full.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		Server: Server{
			Listen: ":8080", AdminListen: "127.0.0.1:8081", MaxBodyBytes: 8 << 20, BodyTimeout: 30 * time.Second, HTTP: "llmgw",
			ConnectTimeout: 5 * time.Second, FirstTokenTimeout: time.Minute, IdleTimeout: time.Minute,
			RequestTimeout: 10 * time.Minute, KeepAlive: 15 * time.Second, Retries: 1, DrainDelay: 0, ShutdownGrace: 30 * time.Second,
		},
		Router: Router{Auth: "keys", TenantLabel: "team", TenantLabelLimit: 100, DefaultMaxTokens: 1024, SharePrefixIndex: true, ShareLoad: true, ShareChannel: "llmgw:placements", CacheIsolation: "org"},
		Store:  Store{URL: "sqlite:/var/lib/llmgw/llmgw.db", SpoolDir: "/var/lib/llmgw/spool"},
		Limits: Limits{Redis: "rediss://llmgw:change-me@redis.internal:6380/0", RedisCAFile: "/etc/llmgw/redis-ca.pem",
			RedisCertFile: "/etc/llmgw/redis-client.pem", RedisKeyFile: "/etc/llmgw/redis-client.key", OnRedisError: "open"},
		Telemetry: Telemetry{Traces: "otlp", Endpoint: "http://otel-collector:4318", ClientTrace: "link", AccessLog: "off"},
		Admin: Admin{AuditRetention: 8760 * time.Hour, OIDC: OIDC{Issuer: "https://idp.example.com/", ClientID: "llmgw", ClientSecretEnv: "LLMGW_OIDC_CLIENT_SECRET",
			RedirectURL: "https://llmgw-admin.example.com/ui/oidc/callback", Scopes: []string{"openid", "email", "profile", "groups"},
			RolesClaim: "groups", Audience: "llmgw", Roles: map[string][]string{"platform-team": {"admin"}, "auditors": {"viewer"},
				"acme-leads": {"tenant_admin:acme"}, "acme-search": {"tenant_viewer:acme/search"}}}},
		Alerts: Alerts{WebhookURL: "https://hooks.slack.com/services/T000/B000/XXXX", SecretEnv: "LLMGW_ALERTS_SECRET"},
		Tenants: []tenant.TenantLimits{
			{Path: "acme", Limits: tenant.Limits{RPM: 6000, TPM: 2_000_000, BudgetUSD: 5000, Period: "month", ToolRPM: 600}},
			{Path: "acme/search", Limits: tenant.Limits{TPM: 500_000, BudgetTokens: 100_000_000, Period: "day"}},
		},
		Pools: []catalog.Pool{
			{
				Name: "gpu-a", Kind: "vllm", Policy: "auto",
				Metrics: selfHosted.Metrics, Health: selfHosted.Health, RetryBudget: 0.2,
				Endpoints: []catalog.Endpoint{
					{Name: "a7", URL: "http://10.0.0.7:8000/v1", Weight: 2}, {Name: "10.0.0.8:8000", URL: "http://10.0.0.8:8000/v1", Weight: 1}},
			},
			{
				Name: "gpu-b", Kind: "sglang", Policy: "auto", Metrics: selfHosted.Metrics, Health: selfHosted.Health, RetryBudget: 0.2,
				Hedge:     catalog.Hedge{After: 3, MinWait: 250 * time.Millisecond},
				Endpoints: []catalog.Endpoint{{Name: "10.0.1.7:30000", URL: "http://10.0.1.7:30000/v1", Weight: 1}},
			},
			{
				Name: "llm-d", Kind: "vllm", Policy: "epp", Metrics: selfHosted.Metrics, Health: selfHosted.Health, RetryBudget: 0.2,
				EPP:       catalog.EPP{Address: "10.0.2.1:9002", FailureMode: "fail_close", Timeout: 5 * time.Second},
				Endpoints: []catalog.Endpoint{{Name: "10.0.2.7:8000", URL: "http://10.0.2.7:8000/v1", Weight: 1}},
			},
			{
				Name: "openai", Kind: "openai", APIKeyEnv: "OPENAI_API_KEY", Policy: "auto", Metrics: hosted.Metrics, Health: hosted.Health, RetryBudget: 0.2,
				Endpoints: []catalog.Endpoint{{Name: "api.openai.com", URL: "https://api.openai.com/v1", Weight: 1}},
			},
			{
				Name: "claude", Kind: "anthropic", APIKeyEnv: "ANTHROPIC_API_KEY", APIVersion: "2023-06-01", Policy: "auto", Metrics: hosted.Metrics, Health: hosted.Health, RetryBudget: 0.2,
				Endpoints: []catalog.Endpoint{{Name: "api.anthropic.com", URL: "https://api.anthropic.com/v1", Weight: 1}},
			},
			{
				Name: "azure", Kind: "azure", APIKeyEnv: "AZURE_OPENAI_API_KEY", APIVersion: "2024-10-21", Policy: "auto", Metrics: hosted.Metrics, Health: hosted.Health, RetryBudget: 0.2,
				Endpoints: []catalog.Endpoint{{Name: "my-resource.openai.azure.com", URL: "https://my-resource.openai.azure.com", Weight: 1}},
			},
			{
				Name: "bedrock", Kind: "bedrock", Region: "us-east-1", Role: "arn:aws:iam::123456789012:role/llmgw-bedrock", Policy: "auto",
				Metrics: hosted.Metrics, Health: hosted.Health, RetryBudget: 0.2,
				Endpoints: []catalog.Endpoint{{Name: "bedrock-runtime.us-east-1.amazonaws.com", URL: "https://bedrock-runtime.us-east-1.amazonaws.com", Weight: 1}},
			},
			{
				Name: "gemini", Kind: "gemini", APIKeyEnv: "GEMINI_API_KEY", Policy: "auto", Metrics: hosted.Metrics, Health: hosted.Health, RetryBudget: 0.2,
				Endpoints: []catalog.Endpoint{{Name: "generativelanguage.googleapis.com", URL: "https://generativelanguage.googleapis.com/v1", Weight: 1}},
			},
			{
				Name: "vertex", Kind: "vertex", Project: "my-project", Location: "us-central1", CredentialsFile: "/etc/llmgw/vertex-sa.json", Policy: "auto",
				Metrics: hosted.Metrics, Health: hosted.Health, RetryBudget: 0.2,
				Endpoints: []catalog.Endpoint{{Name: "us-central1-aiplatform.googleapis.com", URL: "https://us-central1-aiplatform.googleapis.com/v1", Weight: 1}},
			},
			{
				Name: "vertex-claude", Kind: "vertex", Project: "my-project", Location: "us-east5", Publisher: "anthropic",
				CredentialsFile: "/etc/llmgw/vertex-sa.json", Policy: "auto",
				Metrics: hosted.Metrics, Health: hosted.Health, RetryBudget: 0.2,
				Endpoints: []catalog.Endpoint{{Name: "us-east5-aiplatform.googleapis.com", URL: "https://us-east5-aiplatform.googleapis.com/v1", Weight: 1}},
			},
			{
				Name: "edge", Kind: "llamacpp", Policy: "auto", Slots: 4, RetryBudget: 0.2,
				Metrics:   catalog.Scrape{Path: "/metrics", Interval: 100 * time.Millisecond, MaxAge: time.Second},
				Health:    catalog.HealthCheck{Path: "/health", Interval: time.Second, Timeout: 500 * time.Millisecond},
				Endpoints: []catalog.Endpoint{{Name: "10.0.2.7:8080", URL: "http://10.0.2.7:8080/v1", Weight: 1}},
			},
		},
		Models: []catalog.Model{
			{
				Name: "llama-3.1-70b", Aliases: []string{"default", "llama-70b"}, Pool: "gpu-a",
				Upstream:  "meta-llama/Llama-3.1-70B-Instruct",
				SLO:       catalog.SLO{TTFTp99: 2 * time.Second, TPOTp99: 80 * time.Millisecond},
				Price:     catalog.Price{InputPerMillion: 0.60, OutputPerMillion: 0.80},
				Fallbacks: []string{"gpt-4o-mini"}, FirstTokenTimeout: 30 * time.Second,
				Admission: catalog.Admission{Enabled: true, Queue: 64,
					Classes: map[string]catalog.SLO{
						"critical":  {TTFTp99: time.Second, TPOTp99: 50 * time.Millisecond},
						"sheddable": {TTFTp99: 10 * time.Second},
					},
					TenantWeights: map[string]float64{"acme/search": 2},
				},
				HostedTools: "drop",
			},
			{
				Name: "qwen3-32b", Pool: "gpu-b", Upstream: "Qwen/Qwen3-32B",
				SLO:       catalog.SLO{TTFTp99: 1500 * time.Millisecond},
				Price:     catalog.Price{InputPerMillion: 0.20, OutputPerMillion: 0.40},
				Fallbacks: []string{"llama-70b"}, FallbacksByClass: map[catalog.ErrorClass][]string{catalog.ClassContextWindow: {"gpt-4o-mini"}},
			},
			{Name: "gpt-4o-mini", Pool: "openai", Price: catalog.Price{InputPerMillion: 0.15, OutputPerMillion: 0.60,
				ServiceTiers: map[string]catalog.TierPrice{"priority": {InputPerMillion: 0.25, OutputPerMillion: 1.00}}},
				BilledFields: catalog.BilledFields{Allow: []string{"service_tier", "store"}, Others: "drop"}},
		},
		MCP: MCP{AllowStdio: true, Servers: []MCPServer{
			{Name: "github", URL: "https://mcp.example.com/mcp",
				HeadersEnv:     map[string]string{"Authorization": "GITHUB_MCP_AUTH"},
				HeadersFile:    map[string]string{"X-Api-Token": "/run/secrets/mcp-token"},
				IdentityHeader: "X-Llmgw-Caller", Timeout: time.Minute},
			{Name: "files", Command: []string{"npx", "-y", "@modelcontextprotocol/server-filesystem", "/srv/shared"},
				EnvFrom: map[string]string{"GITHUB_TOKEN": "FILES_TOKEN"}},
		}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("full.good.yaml (-want +got):\n%s", diff)
	}
}

// TestFullExampleSetsEveryField keeps the annotated example complete: each
// field of the YAML shape appears in it, but for the admin token, which
// belongs in the environment and so is shown only in a comment.
func TestFullExampleSetsEveryField(t *testing.T) {
	data, err := os.ReadFile("testdata/full.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		t.Fatal(err)
	}
	seen := make(map[string]bool)
	for p := range walkFields(&root).lines {
		seen[stripIndexes(p)] = true
	}
	var missing []string
	for _, p := range fieldPaths(configType, "") {
		if !seen[p] && p != "admin.token" && p != "router.cache_secret" && p != "admin.oidc.client_secret_file" && p != "pools[].api_key_file" {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		t.Errorf("full.good.yaml does not set %s", strings.Join(missing, ", "))
	}
}

// fieldPaths lists every field path of t, lists written with [].
func fieldPaths(t reflect.Type, path string) []string {
	var out []string
	for t.Kind() == reflect.Slice {
		t = t.Elem()
		path += "[]"
	}
	if t.Kind() != reflect.Struct || t == reflect.TypeFor[time.Duration]() {
		return nil
	}
	for name, ft := range yamlFields(t) {
		p := join(path, name)
		out = append(out, p)
		out = append(out, fieldPaths(ft, p)...)
	}
	sort.Strings(out)
	return out
}

func stripIndexes(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '[' {
			j := strings.IndexByte(p[i:], ']')
			b.WriteString("[]")
			i += j
			continue
		}
		b.WriteByte(p[i])
	}
	return b.String()
}

// The pool defaults: a self-hosted kind is scraped and probed, a hosted
// one is not.
var (
	selfHosted = catalog.Pool{
		Metrics: catalog.Scrape{Path: "/metrics", Interval: 100 * time.Millisecond, MaxAge: time.Second},
		Health:  catalog.HealthCheck{Path: "/health", Interval: time.Second, Timeout: 500 * time.Millisecond},
	}
	hosted = catalog.Pool{
		Metrics: catalog.Scrape{Interval: 100 * time.Millisecond, MaxAge: time.Second},
		Health:  catalog.HealthCheck{Interval: time.Second, Timeout: 500 * time.Millisecond},
	}
)

func TestParseDefaults(t *testing.T) {
	c, err := Load("testdata/minimal.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Pools = []catalog.Pool{{
		Name: "local", Kind: catalog.KindOpenAI, Policy: catalog.PolicyAuto,
		Metrics: hosted.Metrics, Health: hosted.Health, RetryBudget: DefaultRetryBudget,
		Endpoints: []catalog.Endpoint{{Name: "127.0.0.1:8000", URL: "http://127.0.0.1:8000/v1", Weight: 1}},
	}}
	want.Models = []catalog.Model{{Name: "qwen3-8b", Pool: "local"}}
	if diff := cmp.Diff(&want, c); diff != "" {
		t.Errorf("minimal config (-want +got):\n%s", diff)
	}
	if got := c.Models[0].UpstreamName(); got != "qwen3-8b" {
		t.Errorf("UpstreamName() = %q; want the model's own name", got)
	}
}

func TestParseDurations(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
	}{
		{`"500ms"`, 500 * time.Millisecond},
		{`1s`, time.Second},
		{`1m30s`, 90 * time.Second},
		{`2h`, 2 * time.Hour},
	}
	for _, tt := range tests {
		doc := "server:\n  idle_timeout: " + tt.in + "\n" + minimalPoolsAndModels
		c, err := Parse([]byte(doc))
		if err != nil {
			t.Errorf("idle_timeout: %s: %v", tt.in, err)
			continue
		}
		if got := c.Server.IdleTimeout; got != tt.want {
			t.Errorf("idle_timeout: %s = %v; want %v", tt.in, got, tt.want)
		}
	}
}

const minimalPoolsAndModels = `
pools:
  - name: p
    endpoints: [{url: "http://127.0.0.1:1/v1"}]
models:
  - name: m
    pool: p
`

func TestParseYAMLFeatures(t *testing.T) {
	// Anchors and merge keys are plain YAML and must keep working, and
	// a field misspelt inside a merged mapping is still named.
	doc := `
pools:
  - &base
    name: a
    kind: vllm
    endpoints: [{url: "http://10.0.0.1/v1"}]
  - <<: *base
    name: b
models:
  - {name: m, pool: b}
`
	c, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Pools[1]; got.Kind != "vllm" || len(got.Endpoints) != 1 {
		t.Errorf("merged pool = %+v; want kind vllm and one endpoint", got)
	}

	bad := strings.Replace(doc, "kind: vllm", "knid: vllm", 1)
	_, err = Parse([]byte(bad))
	want := `pools[0].knid: unknown field; did you mean "kind"? (line 5)`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("misspelt merged field: got %v; want it to include %q", err, want)
	}
}

func TestParseBillionLaughs(t *testing.T) {
	// laughs is a server block of merge keys of aliases of aliases,
	// depth deep and ten wide, every anchor defined where it is first
	// used so that every key is a server field: 10^depth mappings if
	// expanded, and nothing else wrong with the file.
	laughs := func(depth int) string {
		m := `&x0 {listen: "127.0.0.1:18081"}`
		for i := 1; i <= depth; i++ {
			m = fmt.Sprintf("&x%d {<<: [%s%s]}", i, m, strings.Repeat(fmt.Sprintf(", *x%d", i-1), 9))
		}
		return "server: " + m + "\n" + minimalPoolsAndModels
	}

	// Two deep, a hundred mappings: an ordinary file.
	c, err := Parse([]byte(laughs(2)))
	if err != nil {
		t.Fatalf("Parse refused a hundred merged mappings: %v", err)
	}
	if c.Server.Listen != "127.0.0.1:18081" {
		t.Errorf("merged server.listen = %q, want 127.0.0.1:18081", c.Server.Listen)
	}

	// Nine deep, a billion: the walk that names fields stops at its
	// bound, and the decoder refuses the aliasing.
	doc := laughs(9)
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(doc), &root); err != nil {
		t.Fatal(err)
	}
	if w := walkFields(&root); !w.cut || w.visited > 2*maxWalk || len(w.unknown) > 0 {
		t.Errorf("walk: cut %v after %d nodes, unknown fields %v; want it cut near %d, none unknown", w.cut, w.visited, w.unknown, maxWalk)
	}
	_, err = Parse([]byte(doc))
	if err == nil || !strings.Contains(err.Error(), "excessive aliasing") {
		t.Fatalf("Parse of a billion laughs: got %v, want the aliasing refused", err)
	}
}

// FuzzParse feeds Parse arbitrary bytes: it must never panic, and a config
// it accepts must always build a catalog.
func FuzzParse(f *testing.F) {
	for _, pattern := range []string{"*.good.yaml", "*.bad.yaml"} {
		for _, file := range glob(f, pattern) {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			if _, ok := AsProblems(err); !ok {
				t.Fatalf("Parse error %v (%T) holds no Problems", err, err)
			}
			return
		}
		if _, err := c.Catalog(); err != nil {
			t.Fatalf("Parse accepted a config whose Catalog fails: %v", err)
		}
	})
}

// BenchmarkParse measures a reload's decode and validation of the full
// example file.
func BenchmarkParse(b *testing.B) {
	data, err := os.ReadFile("testdata/full.good.yaml")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}

// TestHedgeDefaults: hedging stays off unless after is set, and then
// waits at least DefaultHedgeMinWait unless min_wait says otherwise.
func TestHedgeDefaults(t *testing.T) {
	for _, tc := range []struct {
		name      string
		set, want catalog.Hedge
	}{
		{"off", catalog.Hedge{}, catalog.Hedge{}},
		{"after alone", catalog.Hedge{After: 3}, catalog.Hedge{After: 3, MinWait: DefaultHedgeMinWait}},
		{"both", catalog.Hedge{After: 2, MinWait: time.Second}, catalog.Hedge{After: 2, MinWait: time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := catalog.Pool{Name: "p", Hedge: tc.set}
			PoolDefaults(&p)
			if diff := cmp.Diff(tc.want, p.Hedge); diff != "" {
				t.Errorf("hedge (-want +got):\n%s", diff)
			}
		})
	}
}
