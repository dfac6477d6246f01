package app

// Opening the store for commands that work on it directly, such as
// `llmgw keys` and `llmgw usage`: from a --store URL, or the store a
// configuration file names, or the default one.

import (
	"context"
	"fmt"
	"os"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/store"
)

// openStore opens the store storeURL names; without one, the store
// LLMGW_STORE_URL names; without that, the store the configuration file
// at configPath names; without any, the default store
// (config.DefaultStoreURL). The configuration is returned as well:
// the file's when configPath is set, else the defaults, with Store.URL
// being the store opened.
func openStore(ctx context.Context, configPath, storeURL string) (store.Store, *config.Config, error) {
	var cfg *config.Config
	if configPath != "" {
		c, err := config.Load(configPath)
		if err != nil {
			return nil, nil, err
		}
		cfg = c
	} else {
		d := config.Default()
		cfg = &d
	}
	cfg.ApplyEnv(os.Getenv)
	if storeURL != "" {
		cfg.Store.URL = storeURL
	}
	if cfg.Store.URL == "" {
		cfg.Store.URL = config.Default().Store.URL
	}
	st, err := store.Open(ctx, cfg.Store.URL)
	if err != nil {
		return nil, nil, fmt.Errorf("open store: %w", err)
	}
	return st, cfg, nil
}
