package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

// TestReadDiscovery reads llm-d's file-discovery shape, in YAML and in
// JSON, and refuses a file with any bad entry whole, naming the entry.
func TestReadDiscovery(t *testing.T) {
	tests := []struct {
		name, data string
		want       []string // URLs; nil: refused
		wantErr    string
	}{
		{"yaml", "endpoints:\n  - name: vllm-0\n    address: \"10.0.0.1\"\n    port: \"8000\"\n  - name: vllm-1\n    namespace: llm\n    address: 10.0.0.2\n    port: 8001\n    labels: {zone: a}\n",
			[]string{"http://10.0.0.1:8000/v1", "http://10.0.0.2:8001/v1"}, ""},
		{"json", `{"endpoints":[{"name":"a","address":"192.168.1.5","port":"9000"}]}`, []string{"http://192.168.1.5:9000/v1"}, ""},
		{"empty", "", nil, "lists no endpoint"},
		{"no endpoints", "endpoints: []\n", nil, "lists no endpoint"},
		{"not yaml", "endpoints: [\n", nil, "yaml"},
		{"hostname", `{"endpoints":[{"name":"a","address":"vllm.local","port":"8000"}]}`, nil, "endpoints[0].address: must be an IPv4 address"},
		{"ipv6", `{"endpoints":[{"name":"a","address":"::1","port":"8000"}]}`, nil, "endpoints[0].address"},
		{"port", `{"endpoints":[{"name":"a","address":"10.0.0.1","port":"8000"},{"name":"b","address":"10.0.0.1","port":"70000"}]}`, nil, "endpoints[1].port"},
		{"no name", `{"endpoints":[{"address":"10.0.0.1","port":"8000"}]}`, nil, "endpoints[0].name"},
		{"twice", `{"endpoints":[{"name":"a","address":"10.0.0.1","port":"8000"},{"name":"a","address":"10.0.0.2","port":"8000"}]}`, nil, `"a" is listed twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "endpoints.yaml")
			if err := os.WriteFile(path, []byte(tt.data), 0o600); err != nil {
				t.Fatal(err)
			}
			eps, err := ReadDiscovery(path)
			if tt.want == nil {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), path) {
					t.Fatalf("err %v, want one naming the file and %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var urls []string
			for _, e := range eps {
				urls = append(urls, e.URL)
			}
			if strings.Join(urls, " ") != strings.Join(tt.want, " ") {
				t.Fatalf("URLs %v, want %v", urls, tt.want)
			}
		})
	}
	big := filepath.Join(t.TempDir(), "big.yaml")
	os.WriteFile(big, make([]byte, MaxDiscoveryFileBytes+1), 0o600)
	if _, err := ReadDiscovery(big); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("a file past 1 MiB: %v", err)
	}
}

// TestDiscoveryCatalog: the file's endpoints become the named pool's,
// which must list none of its own; the settings are checked by name.
func TestDiscoveryCatalog(t *testing.T) {
	c := validConfig()
	c.Pools[0].Endpoints = nil
	c.EPP.DiscoveryFile, c.EPP.DiscoveryPool = "/nonexistent/endpoints.yaml", c.Pools[0].Name
	if err := c.Validate(); err != nil {
		t.Fatalf("a pool of discovered endpoints: %v", err)
	}
	cat, err := c.CatalogWith([]catalog.Endpoint{{Name: "a", URL: "http://10.0.0.1:8000/v1", Weight: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := cat.Pool(c.Pools[0].Name); len(p.Endpoints) != 1 || p.Endpoints[0].URL != "http://10.0.0.1:8000/v1" {
		t.Fatalf("pool %+v, want the file's endpoint", p)
	}
	if _, err := c.Catalog(); err == nil || !strings.Contains(err.Error(), "epp.discovery_file") {
		t.Errorf("an unreadable file at start: %v", err)
	}
	for _, tt := range []struct {
		name    string
		mutate  func(*Config)
		wantErr string
	}{
		{"no pool", func(c *Config) { c.EPP.DiscoveryPool = "" }, "epp.discovery_pool: must name"},
		{"unknown pool", func(c *Config) { c.EPP.DiscoveryPool = "nope" }, `epp.discovery_pool: "nope" is not`},
		{"pool without file", func(c *Config) { c.EPP.DiscoveryFile = "" }, "epp.discovery_pool: is only read"},
		{"pool lists its own", func(c *Config) {
			c.Pools[0].Endpoints = []catalog.Endpoint{{URL: "http://10.0.0.9:8000/v1"}}
		}, "pools[0].endpoints: must be empty"},
	} {
		d := *c
		d.Pools = append([]catalog.Pool(nil), c.Pools...)
		tt.mutate(&d)
		if err := d.Validate(); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.wantErr)
		}
	}
}
