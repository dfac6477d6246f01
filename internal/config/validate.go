// Validation: every rule a decoded file must keep before llmgw will serve
// from it, checked all at once so an operator sees every mistake in one
// pass, each named by its field path: "models[1].slo.tpot_p99: must be
// positive, got -1s".

package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
)

// Problem is one thing wrong with a configuration.
type Problem struct {
	// Path is the field at fault, such as pools[0].endpoints[2].url; empty
	// when the fault is in the YAML itself rather than one field.
	Path string
	// Msg says what was wrong.
	Msg string
	// Line is the file line the field is on, or 0 when not known (a Config
	// built in code has no lines).
	Line int
}

// Error is "path: msg", with " (line N)" when the line is known.
func (p Problem) Error() string {
	s := p.Msg
	if p.Path != "" {
		s = p.Path + ": " + s
	}
	if p.Line > 0 {
		s += " (line " + strconv.Itoa(p.Line) + ")"
	}
	return s
}

// Problems is every problem found in a configuration, in file order. As an
// error it reads one problem a line.
type Problems []Problem

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap gives each problem, so errors.As finds a single Problem too.
func (ps Problems) Unwrap() []error {
	errs := make([]error, len(ps))
	for i, p := range ps {
		errs[i] = p
	}
	return errs
}

// problems collects Problems as validation walks the config.
type problems struct{ list Problems }

func (ps *problems) add(path, format string, args ...any) {
	ps.list = append(ps.list, Problem{Path: path, Msg: fmt.Sprintf(format, args...)})
}

// err is the collected problems as an error, or nil when there are none.
func (ps *problems) err() error {
	if len(ps.list) == 0 {
		return nil
	}
	return ps.list
}

// Validate checks c and returns every problem found as a Problems, or nil.
// It reads c only; per-field defaults (a pool's kind, an endpoint's weight)
// are applied by Parse, and their zero values are accepted here as meaning
// the default.
func (c *Config) Validate() error {
	var ps problems
	c.Server.validate(&ps)
	c.Router.validate(&ps)
	c.Store.validate(&ps)
	c.Limits.validate(&ps)
	c.Telemetry.validate(&ps)
	c.Admin.validate(&ps)
	c.Alerts.validate(&ps)
	c.EPP.validate(&ps, &c.Server, c.Pools)
	c.MCP.validate(&ps)
	validateTenants(&ps, c.Tenants)
	validatePools(&ps, c.Pools, c.EPP.DiscoveryPool)
	validateModels(&ps, c.Models, c.Pools)
	return ps.err()
}

// Catalog builds the catalog of c's pools and models, reading each pool's
// API key from its environment variable. It validates c first, so its
// only errors are c's problems.
func (c *Config) Catalog() (*catalog.Catalog, error) {
	var discovered []catalog.Endpoint
	if c.EPP.DiscoveryFile != "" {
		var err error
		if discovered, err = ReadDiscovery(c.EPP.DiscoveryFile); err != nil {
			return nil, err
		}
	}
	return c.CatalogWith(discovered)
}

func (s *Server) validate(ps *problems) {
	checkAddr(ps, "server.listen", s.Listen)
	checkAddr(ps, "server.admin_listen", s.AdminListen)
	// Port 0 asks for any free port, so two such listeners never clash.
	if s.Listen != "" && s.Listen == s.AdminListen && !strings.HasSuffix(s.Listen, ":0") {
		ps.add("server.admin_listen", "must differ from server.listen, both are %q", s.Listen)
	}
	if s.MaxBodyBytes <= 0 {
		ps.add("server.max_body_bytes", "must be positive, got %d", s.MaxBodyBytes)
	}
	positive(ps, "server.body_timeout", s.BodyTimeout)
	if s.HTTP != HTTPLlmgw && s.HTTP != HTTPNetHTTP {
		ps.add("server.http", "must be %s or %s, got %q", HTTPLlmgw, HTTPNetHTTP, s.HTTP)
	}
	positive(ps, "server.connect_timeout", s.ConnectTimeout)
	positive(ps, "server.first_token_timeout", s.FirstTokenTimeout)
	positive(ps, "server.idle_timeout", s.IdleTimeout)
	positive(ps, "server.request_timeout", s.RequestTimeout)
	notNegative(ps, "server.keepalive", s.KeepAlive)
	notNegative(ps, "server.drain_delay", s.DrainDelay)
	notNegative(ps, "server.shutdown_grace", s.ShutdownGrace)
	if s.Retries < 0 {
		ps.add("server.retries", "must not be negative, got %d", s.Retries)
	}
}

// checkAddr checks a listen address: host:port, where the host may be
// empty (every interface) and the port 0 (any free port).
func checkAddr(ps *problems, path, addr string) {
	if addr == "" {
		ps.add(path, "must not be empty")
		return
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		ps.add(path, "must be host:port, such as :8080, got %q", addr)
		return
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		ps.add(path, "port %q is not a port number", port)
	}
}

func (e *EPP) validate(ps *problems, s *Server, pools []catalog.Pool) {
	switch i := slices.IndexFunc(pools, func(p catalog.Pool) bool { return p.Name == e.DiscoveryPool }); {
	case e.DiscoveryFile == "" && e.DiscoveryPool != "":
		ps.add("epp.discovery_pool", "is only read with epp.discovery_file")
	case e.DiscoveryFile == "":
	case e.DiscoveryPool == "":
		ps.add("epp.discovery_pool", "must name the pool whose endpoints epp.discovery_file lists")
	case i < 0:
		ps.add("epp.discovery_pool", "%q is not the name of a pool", e.DiscoveryPool)
	case len(pools[i].Endpoints) > 0:
		ps.add(fmt.Sprintf("pools[%d].endpoints", i), "must be empty: the pool's endpoints are epp.discovery_file's")
	}
	if e.Listen == "" {
		return
	}
	checkAddr(ps, "epp.listen", e.Listen)
	if !strings.HasSuffix(e.Listen, ":0") && (e.Listen == s.Listen || e.Listen == s.AdminListen) {
		ps.add("epp.listen", "must differ from server.listen and server.admin_listen, got %q", e.Listen)
	}
}

// positive checks a duration that must be set: zero is as wrong as negative.
func positive(ps *problems, path string, d time.Duration) {
	if d <= 0 {
		ps.add(path, "must be positive, got %s", d)
	}
}

// notNegative checks a duration where zero means off or none.
func notNegative(ps *problems, path string, d time.Duration) {
	if d < 0 {
		ps.add(path, "must not be negative, got %s", d)
	}
}

func (r *Router) validate(ps *problems) {
	if r.Auth != "keys" && r.Auth != "none" {
		ps.add("router.auth", "must be keys or none, got %q", r.Auth)
	}
	switch r.TenantLabel {
	case tenant.LevelOrg, tenant.LevelTeam, tenant.LevelUser:
	default:
		ps.add("router.tenant_label", "must be org, team or user, got %q", r.TenantLabel)
	}
	switch {
	case r.TenantLabelLimit <= 0:
		ps.add("router.tenant_label_limit", "must be positive, got %d", r.TenantLabelLimit)
	case r.TenantLabelLimit > MaxTenantLabelLimit:
		ps.add("router.tenant_label_limit", "must be at most %d, got %d", MaxTenantLabelLimit, r.TenantLabelLimit)
	}
	if r.DefaultMaxTokens <= 0 {
		ps.add("router.default_max_tokens", "must be positive, got %d", r.DefaultMaxTokens)
	}
	switch r.CacheIsolation {
	case tenant.LevelOrg, tenant.LevelTeam, tenant.LevelUser, CacheIsolationNone:
	default:
		ps.add("router.cache_isolation", "must be org, team, user or none, got %q", r.CacheIsolation)
	}
	if n := len(r.CacheSecret); n > 0 && n < MinCacheSecret {
		// Not echoed: it is a secret.
		ps.add("router.cache_secret", "must be at least %d characters, got %d", MinCacheSecret, n)
	}
}

// storeForms are the store URL forms llmgw knows, as an operator reads them.
const storeForms = "sqlite:PATH, postgres://, postgresql:// or memory:"

func (s *Store) validate(ps *problems) {
	u := s.URL
	switch {
	case u == "":
		ps.add("store.url", "must not be empty; use "+storeForms)
	case strings.HasPrefix(u, "sqlite:"):
		if strings.TrimPrefix(u, "sqlite:") == "" {
			ps.add("store.url", "sqlite: needs a file path, such as sqlite:llmgw.db")
		}
	case strings.HasPrefix(u, "postgres://"), strings.HasPrefix(u, "postgresql://"):
		if _, err := url.Parse(u); err != nil {
			// The URL may hold a password, so it is not echoed.
			ps.add("store.url", "is not a valid postgres URL")
		}
	case strings.HasPrefix(u, "memory:"):
		if u != "memory:" {
			ps.add("store.url", "memory: takes nothing after the colon, got %q", u)
		}
	default:
		// Echo only the scheme: the rest may hold a password.
		scheme, _, _ := strings.Cut(u, ":")
		ps.add("store.url", "must be %s, got scheme %q", storeForms, scheme)
	}
}

// The URL of limits.redis may hold a password, so no problem echoes it.
func (l *Limits) validate(ps *problems) {
	tls := false
	if l.Redis != "" {
		u, err := url.Parse(l.Redis)
		switch {
		case err != nil:
			ps.add("limits.redis", "is not a valid URL")
		case u.Scheme != "redis" && u.Scheme != "rediss" && strings.Contains(l.Redis, "@"):
			// What reads as a scheme may be the start of a password.
			ps.add("limits.redis", "must be a redis:// or rediss:// URL")
		case u.Scheme != "redis" && u.Scheme != "rediss":
			ps.add("limits.redis", "must be a redis:// or rediss:// URL, got scheme %q", u.Scheme)
		case u.Host == "":
			ps.add("limits.redis", "must name a host, such as redis://127.0.0.1:6379/0")
		}
		tls = err == nil && u.Scheme == "rediss"
	}
	for _, f := range []struct{ path, file string }{
		{"limits.redis_ca_file", l.RedisCAFile},
		{"limits.redis_cert_file", l.RedisCertFile},
		{"limits.redis_key_file", l.RedisKeyFile},
	} {
		if f.file != "" && !tls {
			ps.add(f.path, "is for a rediss:// limits.redis alone, which speaks TLS")
		}
	}
	switch {
	case l.RedisCertFile != "" && l.RedisKeyFile == "":
		ps.add("limits.redis_key_file", "must be set with limits.redis_cert_file: the client certificate's key")
	case l.RedisKeyFile != "" && l.RedisCertFile == "":
		ps.add("limits.redis_cert_file", "must be set with limits.redis_key_file: the client certificate")
	}
	if l.OnRedisError != "open" && l.OnRedisError != "closed" {
		ps.add("limits.on_redis_error", "must be open or closed, got %q", l.OnRedisError)
	}
}

func validateTenants(ps *problems, ts []tenant.TenantLimits) {
	seen := make(map[string]int, len(ts)) // key: tenant path; value: index in ts
	for i, t := range ts {
		at := fmt.Sprintf("tenants[%d]", i)
		if _, err := tenant.ParsePath(t.Path); err != nil {
			ps.add(at+".path", "%v", err)
		} else if j, dup := seen[t.Path]; dup {
			ps.add(at+".path", "%q is already the path of tenants[%d]", t.Path, j)
		} else {
			seen[t.Path] = i
		}
		validateLimits(ps, at, t.Limits)
		if t.Limits.IsZero() {
			ps.add(at, "sets no limit; give at least one of rpm, tpm, budget_tokens, budget_usd")
		}
	}
}

func validateLimits(ps *problems, at string, l tenant.Limits) {
	for _, f := range []struct {
		name string
		v    int64
	}{{"rpm", l.RPM}, {"tpm", l.TPM}, {"budget_tokens", l.BudgetTokens}, {"tool_rpm", l.ToolRPM}} {
		if f.v < 0 {
			ps.add(at+"."+f.name, "must not be negative, got %d", f.v)
		}
	}
	money(ps, at+".budget_usd", l.BudgetUSD)
	if l.Period != "" && l.Period != tenant.PeriodDay && l.Period != tenant.PeriodMonth {
		ps.add(at+".period", "must be day or month, got %q", l.Period)
	}
}

// money checks an amount of US dollars: finite and not negative.
func money(ps *problems, path string, v float64) {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		ps.add(path, "must be a finite number, got %v", v)
	case v < 0:
		ps.add(path, "must not be negative, got %v", v)
	}
}

var (
	_ error = Problem{}
	_ error = Problems(nil)
)

// AsProblems finds the Problems in err, if err holds any.
func AsProblems(err error) (Problems, bool) {
	var ps Problems
	if errors.As(err, &ps) {
		return ps, true
	}
	return nil, false
}
