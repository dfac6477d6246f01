package app

// The MCP gateway's wiring: the configuration's servers, their
// credentials read from the environment and files, handed to the router's
// /mcp as plain values, at start and on each reload.

import (
	"fmt"
	"net/http"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/mcpgw"
)

// newMCP makes the MCP gateway /mcp answers, with cfg's servers.
func (g *Gateway) newMCP(cfg *config.Config) (*mcpgw.Gateway, error) {
	servers, err := mcpServers(cfg, cfg.MCP.AllowStdio)
	if err != nil {
		return nil, err
	}
	opts := mcpgw.Options{MaxBodyBytes: cfg.Server.MaxBodyBytes, Logger: g.log}
	if g.keyring != nil {
		opts.Limits, opts.TenantLimits = g.limiter, g.keyring.TenantLimits
	}
	m := mcpgw.New(opts)
	m.Set(servers)
	return m, nil
}

// mcpServers is cfg's MCP servers as the gateway takes them, with their
// references read. allowStdio is mcp.allow_stdio as llmgw started with
// it, which a reload does not change.
func mcpServers(cfg *config.Config, allowStdio bool) ([]mcpgw.Server, error) {
	resolved, err := cfg.MCP.Resolve(nil)
	if err != nil {
		return nil, err
	}
	out := make([]mcpgw.Server, 0, len(resolved))
	for i, r := range resolved {
		if len(r.Command) > 0 && !allowStdio {
			return nil, fmt.Errorf("mcp.servers[%d].command: needs mcp.allow_stdio: true when llmgw starts", i)
		}
		s := mcpgw.Server{Name: r.Name, URL: r.URL, Command: r.Command, Env: r.Env, IdentityHeader: r.IdentityHeader, Timeout: r.Timeout}
		if len(r.Headers) > 0 {
			s.Headers = http.Header{}
			for k, v := range r.Headers {
				s.Headers.Set(k, v)
			}
		}
		out = append(out, s)
	}
	return out, nil
}
