package app

// The Endpoint Picker's endpoints from a file (epp.discovery_file, in
// llm-d's file-discovery shape): read at start, and again whenever the
// file changes, as the endpoints of the pool epp.discovery_pool names. A
// file that does not read is refused and the last good one's endpoints
// keep serving; a reload of the configuration takes them too.

import (
	"context"
	"strings"
	"sync"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

// discovery is what the catalog in service is made of: the configuration
// and the endpoints file's last good endpoints. Its lock makes a reload
// and a new file's catalog one at a time.
type discovery struct {
	mu  sync.Mutex
	cfg *config.Config     // the configuration in service
	eps []catalog.Endpoint // the file's last good endpoints; nil without a file
}

// startDiscovery is cfg's catalog at start, with the endpoints file read:
// a file that does not read stops the start.
func startDiscovery(cfg *config.Config) (*discovery, *catalog.Catalog, error) {
	d := &discovery{cfg: cfg}
	if cfg.EPP.DiscoveryFile != "" {
		eps, err := config.ReadDiscovery(cfg.EPP.DiscoveryFile)
		if err != nil {
			return nil, nil, err
		}
		d.eps = eps
	}
	cat, err := cfg.CatalogWith(d.eps)
	return d, cat, err
}

// watchDiscovery reads the endpoints file again whenever it changes,
// until ctx ends; nil at once without a file.
func (g *Gateway) watchDiscovery(ctx context.Context) error {
	path := g.cfg.EPP.DiscoveryFile
	if path == "" {
		return nil
	}
	if err := config.Watch(ctx, path, g.rediscover); err != nil && ctx.Err() == nil {
		g.log.Warn("not watching the endpoints file; a restart reads it", "file", path, "err", err)
	}
	return nil
}

// rediscover reads the endpoints file and puts its endpoints in service
// in the configuration in service; a file refused leaves the catalog as
// it is.
func (g *Gateway) rediscover() {
	path := g.cfg.EPP.DiscoveryFile
	eps, err := config.ReadDiscovery(path)
	d := g.disc
	d.mu.Lock()
	defer d.mu.Unlock()
	var cat *catalog.Catalog
	if err == nil {
		cat, err = d.cfg.CatalogWith(eps)
	}
	if err != nil {
		g.log.Error("endpoints file refused; the last good one's endpoints keep serving",
			"file", path, "err", strings.ReplaceAll(err.Error(), "\n", "; "))
		return
	}
	d.eps = eps
	g.router.SetCatalog(cat)
	g.log.Info("endpoints file read", "file", path, "pool", d.cfg.EPP.DiscoveryPool, "endpoints", len(eps))
}
