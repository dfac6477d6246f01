package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestApplyEnv: a variable set takes the place of the file's value, and
// one unset or empty leaves the file's.
func TestApplyEnv(t *testing.T) {
	const (
		fileStore = "sqlite:/var/lib/llmgw/llmgw.db"
		fileRedis = "redis://file:6379/0"
		envStore  = "postgres://llmgw:pw@db:5432/llmgw"
		envRedis  = "rediss://:pw@cache:6380/1"
	)
	tests := []struct {
		name      string
		env       map[string]string
		wantStore string
		wantRedis string
	}{
		{"neither", nil, fileStore, fileRedis},
		{"both", map[string]string{EnvStoreURL: envStore, EnvRedisURL: envRedis}, envStore, envRedis},
		{"store alone", map[string]string{EnvStoreURL: envStore}, envStore, fileRedis},
		{"redis alone", map[string]string{EnvRedisURL: envRedis}, fileStore, envRedis},
		{"empty is unset", map[string]string{EnvStoreURL: "", EnvRedisURL: ""}, fileStore, fileRedis},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			c.Store.URL, c.Limits.Redis = fileStore, fileRedis
			c.ApplyEnv(func(k string) string { return tt.env[k] })
			got := [2]string{c.Store.URL, c.Limits.Redis}
			if diff := cmp.Diff([2]string{tt.wantStore, tt.wantRedis}, got); diff != "" {
				t.Errorf("store.url, limits.redis (-want +got):\n%s", diff)
			}
		})
	}
}
