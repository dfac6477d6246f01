// Validation: every rule a decoded file must keep before llmgw will serve
// from it, checked all at once so an operator sees every mistake in one
// pass, each named by its field path: "models[1].slo.tpot_p99: must be
// positive, got -1s".

package config

import (
	"errors"
	"fmt"
	"maps"
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
	validateTenants(&ps, c.Tenants)
	validatePools(&ps, c.Pools)
	validateModels(&ps, c.Models, c.Pools)
	return ps.err()
}

// Catalog builds the catalog of c's pools and models, reading each pool's
// API key from its environment variable. It validates c first, so its
// only errors are c's problems.
func (c *Config) Catalog() (*catalog.Catalog, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	cat, err := catalog.New(c.Pools, c.Models)
	if err != nil {
		return nil, fmt.Errorf("build catalog: %w", err)
	}
	return cat, nil
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
	}{{"rpm", l.RPM}, {"tpm", l.TPM}, {"budget_tokens", l.BudgetTokens}} {
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

// isAPIVersion reports whether v looks like a provider's API version: a
// date, perhaps with a suffix such as -preview, and nothing that would
// need escaping in a query or a header.
func isAPIVersion(v string) bool {
	if len(v) < 10 || len(v) > 40 {
		return false
	}
	for _, c := range v {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

func validatePools(ps *problems, pools []catalog.Pool) {
	seen := make(map[string]int, len(pools)) // key: pool name; value: index in pools
	for i := range pools {
		p := &pools[i]
		at := fmt.Sprintf("pools[%d]", i)
		if p.Name == "" {
			ps.add(at+".name", "must not be empty")
		} else if j, dup := seen[p.Name]; dup {
			ps.add(at+".name", "%q is already the name of pools[%d]", p.Name, j)
		} else {
			seen[p.Name] = i
		}
		if p.Kind != "" && !slices.Contains(catalog.Kinds, p.Kind) {
			ps.add(at+".kind", "must be one of %s, got %q", strings.Join(catalog.Kinds, ", "), p.Kind)
		}
		switch {
		case p.Kind == catalog.KindAzure && p.APIVersion == "":
			ps.add(at+".api_version", "must be set for a pool of kind azure, such as \"2024-10-21\"")
		case p.APIVersion != "" && p.Kind != catalog.KindAzure && p.Kind != catalog.KindAnthropic:
			ps.add(at+".api_version", "is only for pools of kind azure or anthropic, not %q", p.Kind)
		case p.APIVersion != "" && !isAPIVersion(p.APIVersion):
			ps.add(at+".api_version", "must be a version such as 2024-10-21, got %q", p.APIVersion)
		}
		if p.APIKeyEnv != "" && !isEnvName(p.APIKeyEnv) {
			// Not echoed: a key pasted here by mistake must not reach a log.
			ps.add(at+".api_key_env", "must be the name of an environment variable (letters, digits, _), not the key itself")
		}
		if p.Policy != "" && !slices.Contains(catalog.Policies, p.Policy) {
			ps.add(at+".policy", "must be one of %s, got %q", strings.Join(catalog.Policies, ", "), p.Policy)
		}
		checkProbePath(ps, at+".metrics.path", p.Metrics.Path)
		notNegative(ps, at+".metrics.interval", p.Metrics.Interval)
		notNegative(ps, at+".metrics.max_age", p.Metrics.MaxAge)
		if p.Metrics.MaxAge > 0 && p.Metrics.MaxAge < p.Metrics.Interval {
			ps.add(at+".metrics.max_age", "must be at least metrics.interval (%s), got %s", p.Metrics.Interval, p.Metrics.MaxAge)
		}
		checkProbePath(ps, at+".health.path", p.Health.Path)
		notNegative(ps, at+".health.interval", p.Health.Interval)
		notNegative(ps, at+".health.timeout", p.Health.Timeout)
		if p.Health.Timeout > 0 && p.Health.Interval > 0 && p.Health.Timeout > p.Health.Interval {
			ps.add(at+".health.timeout", "must not be above health.interval (%s), got %s", p.Health.Interval, p.Health.Timeout)
		}
		if !(p.RetryBudget >= 0 && p.RetryBudget <= 1) {
			ps.add(at+".retry_budget", "must be a share from 0 to 1, got %v", p.RetryBudget)
		}
		checkHedge(ps, at+".hedge", p.Hedge)
		if len(p.Endpoints) == 0 {
			ps.add(at+".endpoints", "must list at least one endpoint")
		}
		if len(p.Endpoints) > MaxEndpoints {
			ps.add(at+".endpoints", "must list at most %d endpoints, got %d", MaxEndpoints, len(p.Endpoints))
		}
		names := make(map[string]int, len(p.Endpoints)) // key: endpoint name; value: index
		for k, e := range p.Endpoints {
			if e.Name == "" {
				continue
			}
			eat := fmt.Sprintf("%s.endpoints[%d].name", at, k)
			if !isLabel(e.Name) {
				ps.add(eat, "must be 1 to 64 letters, digits and . _ : -, got %q", e.Name)
			} else if j, dup := names[e.Name]; dup {
				ps.add(eat, "%q is already the name of endpoints[%d] of this pool", e.Name, j)
			} else {
				names[e.Name] = k
			}
		}
		urls := make(map[string]int, len(p.Endpoints)) // key: endpoint URL; value: index
		for k, e := range p.Endpoints {
			eat := fmt.Sprintf("%s.endpoints[%d]", at, k)
			if checkEndpointURL(ps, eat+".url", e.URL) {
				if j, dup := urls[e.URL]; dup {
					ps.add(eat+".url", "%q is already endpoints[%d] of this pool", e.URL, j)
				} else {
					urls[e.URL] = k
				}
			}
			if e.Weight < 0 {
				ps.add(eat+".weight", "must not be negative, got %d", e.Weight)
			}
		}
	}
}

// Bounds on a pool's hedge. Waiting less than the prediction itself
// (after at most 1) would hedge a request that is on time. A request
// MaxHedgeAfter times later than predicted is stuck, not slow: the
// first-token timeout's business. MaxHedgeMinWait is the default
// first-token timeout, past which no hedge would be sent.
const (
	MaxHedgeAfter   = 20
	MaxHedgeMinWait = DefaultFirstTokenTimeout
)

// checkHedge checks a pool's hedge: off (after zero, and no min_wait), or
// after above 1 and within bounds.
func checkHedge(ps *problems, path string, h catalog.Hedge) {
	switch {
	case h.After == 0 && h.MinWait != 0:
		ps.add(path+".min_wait", "is set but hedge.after is not, so hedging is off; set after (such as 3) or drop min_wait")
	case h.After == 0:
	case !(h.After > 1 && h.After <= MaxHedgeAfter):
		ps.add(path+".after", "must be above 1 and at most %d (times the predicted time to first token), got %v", MaxHedgeAfter, h.After)
	}
	if h.MinWait < 0 || h.MinWait > MaxHedgeMinWait {
		ps.add(path+".min_wait", "must be from 0 to %s, got %s", MaxHedgeMinWait, h.MinWait)
	}
}

// MaxEndpoints is the most endpoints a pool may have: routing keeps the
// endpoints that hold a prompt block as bits of one 64-bit word.
const MaxEndpoints = 64

// checkProbePath checks a path probed on an endpoint's host: empty, or
// absolute without a query.
func checkProbePath(ps *problems, path, v string) {
	if v != "" && (!strings.HasPrefix(v, "/") || strings.ContainsAny(v, "?# ")) {
		ps.add(path, "must be a path such as /metrics, without a query, got %q", v)
	}
}

// isLabel reports whether s may be a metric label value chosen by an
// operator: short, and of characters that need no quoting anywhere.
func isLabel(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return false
		}
	}
	return true
}

// checkEndpointURL checks an endpoint's base URL and reports whether it
// is good.
func checkEndpointURL(ps *problems, path, raw string) bool {
	if raw == "" {
		ps.add(path, "must not be empty")
		return false
	}
	u, err := url.Parse(raw)
	if err == nil && u.User != nil {
		// Not echoed: it holds a password. Keys belong in api_key_env.
		ps.add(path, "must not hold a user or password; put the key in the pool's api_key_env")
		return false
	}
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		ps.add(path, "must be an http or https URL, got %q", raw)
		return false
	}
	if u.RawQuery != "" || u.Fragment != "" {
		ps.add(path, "must be a base URL without a query or fragment, got %q", raw)
		return false
	}
	return true
}

// isEnvName reports whether s is a portable environment variable name.
func isEnvName(s string) bool {
	for i, r := range s {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return s != ""
}

func validateModels(ps *problems, models []catalog.Model, pools []catalog.Pool) {
	if len(models) == 0 {
		ps.add("models", "must list at least one model")
	}
	poolNames := make(map[string]bool, len(pools))
	for _, p := range pools {
		poolNames[p.Name] = true
	}
	owner := make(map[string]int, 2*len(models)) // key: model name or alias; value: index in models
	claim := func(at, name string, i int) {
		if name == "" {
			ps.add(at, "must not be empty")
		} else if j, dup := owner[name]; dup {
			ps.add(at, "%q is already the name or alias of models[%d]", name, j)
		} else {
			owner[name] = i
		}
	}
	for i := range models {
		m := &models[i]
		at := fmt.Sprintf("models[%d]", i)
		claim(at+".name", m.Name, i)
		for k, a := range m.Aliases {
			claim(fmt.Sprintf("%s.aliases[%d]", at, k), a, i)
		}
		switch {
		case m.Pool == "":
			ps.add(at+".pool", "must not be empty")
		case !poolNames[m.Pool]:
			ps.add(at+".pool", "pool %q is not defined", m.Pool)
		}
		if m.SLO.TTFTp99 < 0 {
			ps.add(at+".slo.ttft_p99", "must be positive, got %s", m.SLO.TTFTp99)
		}
		if m.SLO.TPOTp99 < 0 {
			ps.add(at+".slo.tpot_p99", "must be positive, got %s", m.SLO.TPOTp99)
		}
		money(ps, at+".price.input_per_million", m.Price.InputPerMillion)
		money(ps, at+".price.output_per_million", m.Price.OutputPerMillion)
		validateBilledFields(ps, at, m)
		if m.FirstTokenTimeout < 0 {
			ps.add(at+".first_token_timeout", "must be positive, got %s", m.FirstTokenTimeout)
		}
		validateAdmission(ps, at+".admission", m)
		if m.HostedTools != "" && m.HostedTools != catalog.HostedToolsDrop && m.HostedTools != catalog.HostedToolsRefuse {
			ps.add(at+".hosted_tools", "must be %s or %s, got %q", catalog.HostedToolsDrop, catalog.HostedToolsRefuse, m.HostedTools)
		}
	}
	// Fallbacks may name models defined later in the file, so they are
	// checked once every name is known.
	for i := range models {
		m := &models[i]
		listed := make(map[int]int, len(m.Fallbacks)) // key: model index; value: fallback index
		for k, f := range m.Fallbacks {
			at := fmt.Sprintf("models[%d].fallbacks[%d]", i, k)
			j, ok := owner[f]
			switch {
			case !ok:
				ps.add(at, "%q is not a model", f)
			case j == i:
				ps.add(at, "%q is this model itself", f)
			default:
				if prev, dup := listed[j]; dup {
					ps.add(at, "%q is the same model as fallbacks[%d]", f, prev)
				} else {
					listed[j] = k
				}
			}
		}
	}
}

// validateBilledFields checks a model's billed_fields, and the service
// tiers its price lists: a field allowed must be one the ledger prices,
// and service_tier is allowed only with the tiers it prices.
func validateBilledFields(ps *problems, at string, m *catalog.Model) {
	b := m.BilledFields
	if b.Others != "" && b.Others != catalog.BilledFieldsDrop && b.Others != catalog.BilledFieldsRefuse {
		ps.add(at+".billed_fields.others", "must be %s or %s, got %q", catalog.BilledFieldsDrop, catalog.BilledFieldsRefuse, b.Others)
	}
	for k, f := range b.Allow {
		if !slices.Contains(catalog.AllowableFields, f) {
			ps.add(fmt.Sprintf("%s.billed_fields.allow[%d]", at, k), "must be one of %s, whose cost the ledger prices, got %q",
				strings.Join(catalog.AllowableFields, ", "), f)
		}
	}
	if slices.Contains(b.Allow, catalog.FieldServiceTier) && len(m.Price.ServiceTiers) == 0 {
		ps.add(at+".billed_fields.allow", "service_tier needs price.service_tiers, the tiers it lets through and their prices")
	}
	for _, tier := range slices.Sorted(maps.Keys(m.Price.ServiceTiers)) {
		p := m.Price.ServiceTiers[tier]
		if tier == "" {
			ps.add(at+".price.service_tiers", "a tier's name must not be empty")
		}
		money(ps, at+".price.service_tiers."+tier+".input_per_million", p.InputPerMillion)
		money(ps, at+".price.service_tiers."+tier+".output_per_million", p.OutputPerMillion)
	}
}

// validateAdmission checks a model's admission settings. Every class must
// end up with a TTFT SLO when admission is on, since a request's deadline
// is its arrival plus its class's.
func validateAdmission(ps *problems, at string, m *catalog.Model) {
	a := m.Admission
	if a.Queue < 0 {
		ps.add(at+".queue", "must not be negative, got %d", a.Queue)
	}
	for _, c := range slices.Sorted(maps.Keys(a.Classes)) {
		s := a.Classes[c]
		cat := at + ".classes." + c
		if !tenant.ValidPriority(c) {
			ps.add(cat, "%q is not a priority class: critical, standard or sheddable", c)
			continue
		}
		if s.TTFTp99 < 0 {
			ps.add(cat+".ttft_p99", "must be positive, got %s", s.TTFTp99)
		}
		if s.TPOTp99 < 0 {
			ps.add(cat+".tpot_p99", "must be positive, got %s", s.TPOTp99)
		}
	}
	for _, t := range slices.Sorted(maps.Keys(a.TenantWeights)) {
		if _, err := tenant.ParsePath(t); err != nil {
			ps.add(at+".tenant_weights", "%v", err)
			continue
		}
		if w := a.TenantWeights[t]; !(w > 0) || math.IsInf(w, 0) {
			ps.add(at+".tenant_weights."+t, "must be positive, got %v", w)
		}
	}
	if !a.Enabled {
		return
	}
	for _, c := range []string{tenant.PriorityCritical, tenant.PriorityStandard, tenant.PrioritySheddable} {
		if m.ClassSLO(c).TTFTp99 <= 0 && a.Classes[c].TTFTp99 == 0 {
			ps.add(at+".classes."+c+".ttft_p99", "must be set when admission is enabled and the model has no slo.ttft_p99")
		}
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
