package app

import (
	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router"
)

// serverOptions is what the router takes of the server block: every value
// as the configuration gives it, its defaults already applied.
func serverOptions(s config.Server) router.ServerOptions {
	return router.ServerOptions{
		MaxBodyBytes:      s.MaxBodyBytes,
		ConnectTimeout:    s.ConnectTimeout,
		FirstTokenTimeout: s.FirstTokenTimeout,
		IdleTimeout:       s.IdleTimeout,
		RequestTimeout:    s.RequestTimeout,
		KeepAlive:         s.KeepAlive,
		Retries:           s.Retries,
	}
}

// routerOptions is what the router takes of the router block. The cache
// isolation levels are the same words on both sides, none included.
func routerOptions(r config.Router) router.RouterOptions {
	return router.RouterOptions{
		TenantLabel:      r.TenantLabel,
		TenantLabelLimit: r.TenantLabelLimit,
		DefaultMaxTokens: r.DefaultMaxTokens,
		CacheIsolation:   r.CacheIsolation,
	}
}
