package app

import (
	"os"
	"path/filepath"
	"testing"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/store"
)

// writeConfig writes a minimal configuration whose store is storeURL.
func writeConfig(t *testing.T, dir, storeURL string) string {
	t.Helper()
	path := filepath.Join(dir, "llmgw.yaml")
	body := "store:\n  url: " + storeURL + "\npools:\n  - name: local\n    endpoints:\n      - url: http://127.0.0.1:8000/v1\nmodels:\n  - name: m\n    pool: local\n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestOpenStore(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	fromConfig := "sqlite:" + filepath.Join(dir, "config.db")
	fromFlag := "sqlite:" + filepath.Join(dir, "flag.db")
	fromEnv := "sqlite:" + filepath.Join(dir, "env.db")
	cfgPath := writeConfig(t, dir, fromConfig)

	tests := []struct {
		name                      string
		configPath, storeURL, env string
		wantURL, wantFile         string
	}{
		{"the flag wins over the config", cfgPath, fromFlag, "", fromFlag, "flag.db"},
		{"the config's store", cfgPath, "", "", fromConfig, "config.db"},
		{"the flag alone", "", fromFlag, "", fromFlag, "flag.db"},
		{"neither: the default", "", "", "", config.DefaultStoreURL, "llmgw.db"},
		{"LLMGW_STORE_URL wins over the config", cfgPath, "", fromEnv, fromEnv, "env.db"},
		{"the flag wins over LLMGW_STORE_URL", cfgPath, fromFlag, fromEnv, fromFlag, "flag.db"},
		{"LLMGW_STORE_URL alone", "", "", fromEnv, fromEnv, "env.db"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, f := range []string{"flag.db", "config.db", "llmgw.db", "env.db"} {
				os.Remove(filepath.Join(dir, f))
			}
			t.Setenv(config.EnvStoreURL, tt.env)
			st, cfg, err := openStore(t.Context(), tt.configPath, tt.storeURL)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if _, ok := st.(*store.SQLite); !ok {
				t.Errorf("opened a %T, want *store.SQLite", st)
			}
			if cfg.Store.URL != tt.wantURL {
				t.Errorf("cfg.Store.URL = %q, want %q", cfg.Store.URL, tt.wantURL)
			}
			for _, f := range []string{"flag.db", "config.db", "llmgw.db", "env.db"} {
				_, err := os.Stat(filepath.Join(dir, f))
				if exists := err == nil; exists != (f == tt.wantFile) {
					t.Errorf("%s exists: %v, want %v", f, exists, f == tt.wantFile)
				}
			}
			if tt.configPath != "" && len(cfg.Models) != 1 {
				t.Errorf("the config's models were not returned: %+v", cfg.Models)
			}
		})
	}
}
