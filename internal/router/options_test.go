package router

import "gitea.mynodes.xyz/ilker/llmgw/internal/config"

// serverOptions and routerOptions are the options a configuration file
// gives the router, as internal/app builds them, for tests that start
// from config.Default.
func serverOptions(s config.Server) ServerOptions {
	return ServerOptions{
		MaxBodyBytes:      s.MaxBodyBytes,
		ConnectTimeout:    s.ConnectTimeout,
		FirstTokenTimeout: s.FirstTokenTimeout,
		IdleTimeout:       s.IdleTimeout,
		RequestTimeout:    s.RequestTimeout,
		KeepAlive:         s.KeepAlive,
		Retries:           s.Retries,
	}
}

func routerOptions(r config.Router) RouterOptions {
	return RouterOptions{TenantLabel: r.TenantLabel, TenantLabelLimit: r.TenantLabelLimit, DefaultMaxTokens: r.DefaultMaxTokens, CacheIsolation: r.CacheIsolation}
}
