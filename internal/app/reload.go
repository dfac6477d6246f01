package app

// Reloading on SIGHUP and whenever the configuration file changes: what a
// reload puts in service, and the fields it leaves for a restart.

import (
	"context"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/mcpgw"
)

// watchConfig reloads on SIGHUP and on changes to the file until ctx ends.
// A gateway configured by flags alone has nothing to reload: SIGHUP is then
// noted in the log rather than ending the process, as it would by default.
func (g *Gateway) watchConfig(ctx context.Context) error {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	if g.configPath == "" {
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-hup:
				g.log.Info("SIGHUP: nothing to reload, the configuration came from flags")
			}
		}
	}
	changed := make(chan struct{}, 1)
	go func() {
		err := config.Watch(ctx, g.configPath, func() {
			select {
			case changed <- struct{}{}:
			default:
			}
		})
		if err != nil && ctx.Err() == nil {
			g.log.Warn("not watching the configuration file; SIGHUP still reloads it", "err", err)
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-hup:
			g.reload()
		case <-changed:
			g.reload()
		}
	}
}

// reload reads the configuration file again, as serve read it at start,
// and puts in service what a reload applies (config.Reloaded): the
// catalog, the file's tenant limits, the admin token and the MCP
// servers. A file that does not load is refused and everything in
// service stays. A changed field
// that takes effect only at start is named in a warning, its value in
// service kept.
func (g *Gateway) reload() error {
	g.disc.mu.Lock()
	defer g.disc.mu.Unlock()
	cfg, err := g.loadConfig()
	var cat *catalog.Catalog
	if err == nil {
		cat, err = cfg.CatalogWith(g.disc.eps)
	}
	var servers []mcpgw.Server
	if err == nil {
		servers, err = mcpServers(cfg, g.cfg.MCP.AllowStdio)
	}
	g.router.ReloadFailed(err != nil)
	if err != nil {
		g.noteReload(time.Now(), err, nil)
		noteReloadAudit(g.store, g.log, g.configPath, err, nil)
		g.log.Error("configuration reload refused; the previous catalog keeps serving",
			"file", g.configPath, "err", strings.ReplaceAll(err.Error(), "\n", "; "))
		return err
	}
	g.router.SetCatalog(cat)
	g.disc.cfg = cfg
	g.mcp.Set(servers)
	if g.keyring != nil {
		g.keyring.SetConfigTenants(cfg.Tenants)
	}
	g.reloadAdminToken(cfg)
	restart := config.NeedRestart(g.cfg, cfg)
	g.noteReload(time.Now(), nil, restart)
	noteReloadAudit(g.store, g.log, g.configPath, nil, restart)
	if len(restart) > 0 {
		g.log.Warn("configuration reloaded, but changed fields that take effect only at a restart keep their values in service",
			"file", g.configPath, "needs_restart", strings.Join(restart, ", "))
	}
	g.log.Info("configuration reloaded", "file", g.configPath)
	return nil
}

// loadConfig reads the configuration file with serve's values from the
// environment and flags over it, as at start.
func (g *Gateway) loadConfig() (*config.Config, error) {
	cfg, err := config.Load(g.configPath)
	if err != nil || g.overrides == nil {
		return cfg, err
	}
	g.overrides(cfg)
	return cfg, cfg.Validate()
}

// reloadAdminToken puts the admin token cfg gives in service; console
// sessions signed in with the one before end. A configuration that gives
// none keeps the token in service, and says so: only a restart takes it
// away.
func (g *Gateway) reloadAdminToken(cfg *config.Config) {
	token := adminToken(cfg)
	if strings.TrimSpace(token) == "" {
		if g.guard.TokenSet() {
			g.log.Warn("the reloaded configuration gives no admin token (admin.token is empty and " + envAdminToken + " unset): the token in service is kept until a restart")
		}
		return
	}
	if g.guard.SetToken(token) {
		g.log.Info("the admin token changed: the new one opens /admin, /debug and the console; console sessions signed in with the old one have ended")
	}
}
