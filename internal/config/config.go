// Package config is the shape of llmgw's YAML file: the server's listeners
// and timeouts, routing and auth, the store and limits, tenant-level limits,
// and the catalog's pools and models. A file is decoded over Default,
// strictly (unknown fields are errors), then validated.
package config

import (
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
)

// Config is one whole configuration file.
type Config struct {
	Server  Server                `yaml:"server"`
	Router  Router                `yaml:"router"`
	Store   Store                 `yaml:"store"`
	Limits  Limits                `yaml:"limits"`
	Admin   Admin                 `yaml:"admin"`
	EPP     EPP                   `yaml:"epp"`
	Tenants []tenant.TenantLimits `yaml:"tenants,omitempty"`
	Pools   []catalog.Pool        `yaml:"pools"`
	Models  []catalog.Model       `yaml:"models"`

	// Telemetry is what llmgw emits besides its metrics: traces and an
	// access log.
	Telemetry Telemetry `yaml:"telemetry"`
	// Alerts is where spend alerts are sent (admin.go).
	Alerts Alerts `yaml:"alerts,omitempty"`

	// MCP is the MCP servers /mcp aggregates.
	MCP MCP `yaml:"mcp"`
}

// Server holds the listeners, body limit and upstream timeouts.
type Server struct {
	Listen       string `yaml:"listen"`         // the OpenAI API
	AdminListen  string `yaml:"admin_listen"`   // metrics, health, admin API
	MaxBodyBytes int64  `yaml:"max_body_bytes"` // larger request bodies get 413
	// BodyTimeout bounds reading a request's body, from the end of its
	// headers to its last byte; a slower body gets 408.
	BodyTimeout time.Duration `yaml:"body_timeout"`
	// HTTP is the HTTP/1.1 implementation of the API listener and of
	// calls to plain-HTTP upstreams: llmgw (its own, which holds no
	// buffers while a stream waits) or net/http (Go's standard library).
	HTTP string `yaml:"http"`

	ConnectTimeout time.Duration `yaml:"connect_timeout"` // dialling an endpoint
	// FirstTokenTimeout bounds the wait for an upstream's first byte;
	// a model's own first_token_timeout overrides it.
	FirstTokenTimeout time.Duration `yaml:"first_token_timeout"`
	// IdleTimeout is the longest silence allowed between two streamed
	// events once the answer has begun.
	IdleTimeout    time.Duration `yaml:"idle_timeout"`
	RequestTimeout time.Duration `yaml:"request_timeout"` // a whole request, end to end
	// KeepAlive, when positive, sends an SSE comment to a streaming client
	// after this long without an event, so proxies in between keep the
	// connection open. Zero turns it off.
	KeepAlive time.Duration `yaml:"keepalive"`
	// Retries is how many other endpoints are tried after a failure before
	// the first byte.
	Retries int `yaml:"retries"`
	// DrainDelay is how long the API listener goes on taking requests
	// after a shutdown signal, while /readyz answers 503, so that load
	// balancers stop sending before it closes. Zero closes it at once.
	DrainDelay time.Duration `yaml:"drain_delay"`
	// ShutdownGrace is how long open requests may run on once the API
	// listener has closed before they are cut.
	ShutdownGrace time.Duration `yaml:"shutdown_grace"`
}

// CacheIsolationNone lets every tenant's prompts share the prefix cache.
const CacheIsolationNone = "none"

// MinCacheSecret is the shortest router.cache_secret taken: a secret that
// could be guessed would let a client make another domain's salt.
const MinCacheSecret = 16

// Router holds authentication and how tenants are labelled.
type Router struct {
	// Auth is keys (every request needs an API key) or none.
	Auth string `yaml:"auth"`
	// TenantLabel is the tenant level, org, team or user, that becomes the
	// tenant label of the per-tenant metrics.
	TenantLabel string `yaml:"tenant_label"`
	// TenantLabelLimit is how many tenants get a tenant label value of
	// their own; the others share the value other.
	TenantLabelLimit int `yaml:"tenant_label_limit"`
	// DefaultMaxTokens is the completion length reserved against token
	// limits for a request that names no max_tokens.
	DefaultMaxTokens int64 `yaml:"default_max_tokens"`
	// SharePrefixIndex, with limits.redis set, tells every gateway on the
	// same Redis where each prompt was sent, so that all of them route by
	// what any of them sent. Without Redis each gateway's prefix index
	// holds what it sent alone.
	SharePrefixIndex bool `yaml:"share_prefix_index"`
	// ShareLoad, with limits.redis set, tells every gateway on the same
	// Redis what each has in flight at each endpoint, every 10 ms, so
	// that each predicts a first token and weighs a stall by all of the
	// gateways' requests, not its own alone.
	ShareLoad bool `yaml:"share_load"`
	// ShareChannel is the Redis channel placements go out on (loads go on
	// the same name with ":load" after it); empty means
	// "llmgw:placements". Gateways share with those on the same channel
	// alone, so two deployments on one Redis keep apart by their
	// channels.
	ShareChannel string `yaml:"share_channel,omitempty"`
	// CacheIsolation is the tenant level, org, team or user, within which
	// prompts may share a backend's prefix cache, or none: prompts of two
	// tenants at that level never share a cached prefix, in the gateway's
	// prefix index or, on pools whose servers take a cache_salt, on the
	// servers.
	CacheIsolation string `yaml:"cache_isolation"`
	// CacheSecret is what cache salts are made from: gateways that send
	// to the same servers must share it, or a domain's prompts sent by
	// two of them share no cache. Empty means LLMGW_CACHE_SECRET, else a
	// secret the store makes once and every gateway on it reads.
	CacheSecret string `yaml:"cache_secret,omitempty"`
}

// Store says where keys, tenant limits and the ledger live.
type Store struct {
	// URL is sqlite:PATH, postgres://... or memory:.
	URL string `yaml:"url"`
	// SpoolDir holds ledger records while the store is unreachable, and
	// the journal of those not yet written.
	SpoolDir string `yaml:"spool_dir"`
}

// Limits says where rate and budget counters live.
type Limits struct {
	// Redis, when set (redis://host:port/db), shares counters among every
	// replica, where each prompt was sent (router.share_prefix_index) and
	// what each has in flight (router.share_load); without it each
	// process counts for itself alone. A user and password
	// (redis://user:password@host:port/db, or redis://:password@... for
	// the default user) are sent to Redis as AUTH; rediss:// speaks TLS.
	Redis string `yaml:"redis,omitempty"`
	// RedisCAFile, with a rediss:// URL, is a PEM file of the certificate
	// authorities that sign Redis's certificate, in place of the
	// system's; empty means the system's.
	RedisCAFile string `yaml:"redis_ca_file,omitempty"`
	// RedisCertFile and RedisKeyFile, with a rediss:// URL, are a PEM
	// client certificate and its key, for a Redis that asks for one
	// (tls-auth-clients); both or neither.
	RedisCertFile string `yaml:"redis_cert_file,omitempty"`
	RedisKeyFile  string `yaml:"redis_key_file,omitempty"`
	// OnRedisError is open (let requests through) or closed (refuse them)
	// while Redis does not answer.
	OnRedisError string `yaml:"on_redis_error"`
}

// Admin guards the admin listener: every path on it but /metrics,
// /healthz, /livez and /readyz asks for the token.
type Admin struct {
	// Token is the bearer token the admin API and profiles demand. Empty
	// means the LLMGW_ADMIN_TOKEN environment variable, and without that
	// every path but /metrics, /healthz, /livez and /readyz is refused.
	Token string `yaml:"token,omitempty"`
	// PProf serves Go's profiles at /debug/pprof/, behind the token. Off,
	// /debug/pprof/ answers 404 to whoever holds the token.
	PProf bool `yaml:"pprof"`
	// AuditRetention is how long the audit trail keeps an entry; older
	// ones are removed once an hour.
	AuditRetention time.Duration `yaml:"audit_retention"`
	// DisableToken turns the admin token off, the file's and
	// LLMGW_ADMIN_TOKEN alike: only identities from OIDC sign in.
	DisableToken bool `yaml:"disable_token,omitempty"`
	// OIDC signs people in to the console, and automation in to the admin
	// API, with an OpenID Connect provider; the zero OIDC for none
	// (admin.go).
	OIDC OIDC `yaml:"oidc,omitempty"`
}

// EPP is llmgw's Endpoint Picker (the Gateway API Inference Extension's
// protocol over ext_proc), which a proxy in front asks for each request's
// endpoint.
type EPP struct {
	// Listen is its gRPC listener's address; empty leaves it off.
	Listen string `yaml:"listen,omitempty"`
	// TLS serves it over TLS with a certificate made at start, signed by
	// itself, as the reference EPP does and the gateways in front of one
	// expect; off, in plain text (h2c).
	TLS bool `yaml:"tls,omitempty"`
	// DiscoveryFile is a file of endpoints in llm-d's file-discovery
	// shape, watched, whose endpoints are the pool DiscoveryPool names
	// (discovery.go); empty for none.
	DiscoveryFile string `yaml:"discovery_file,omitempty"`
	DiscoveryPool string `yaml:"discovery_pool,omitempty"`
}

// Defaults. Timeouts are generous enough for a long reasoning answer from a
// loaded pool, short enough that a dead endpoint is noticed.
const (
	DefaultListen       = ":8080"
	DefaultAdminListen  = "127.0.0.1:8081"
	DefaultMaxBodyBytes = 8 << 20 // 8 MiB: a 128k-token prompt is about 512 KiB of text, with room for images as data URLs
	// DefaultBodyTimeout lets a full 8 MiB body arrive at 2.3 Mbit/s, and
	// a 512 KiB prompt at 140 kbit/s.
	DefaultBodyTimeout       = 30 * time.Second
	DefaultConnectTimeout    = 5 * time.Second
	DefaultFirstTokenTimeout = 60 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
	DefaultRequestTimeout    = 10 * time.Minute
	DefaultShutdownGrace     = 30 * time.Second
	DefaultMaxTokens         = 1024
	// DefaultTenantLabelLimit names 100 tenants: each tenant value is 30
	// series (two histograms of 12 buckets, with their sums and counts),
	// so 3,000 at most, about what a dozen models make of the per-model
	// families, and enough for the teams of most organisations.
	DefaultTenantLabelLimit = 100
	// MaxTenantLabelLimit bounds router.tenant_label_limit at 300,000
	// tenant series, past what one Prometheus should take from one target.
	MaxTenantLabelLimit = 10_000
	DefaultStoreURL     = "sqlite:llmgw.db"
)

// The values of server.http.
const (
	HTTPLlmgw   = "llmgw"
	HTTPNetHTTP = "net/http"
)

// Default is the configuration a file is decoded over.
func Default() Config {
	return Config{
		Server: Server{
			Listen:            DefaultListen,
			AdminListen:       DefaultAdminListen,
			MaxBodyBytes:      DefaultMaxBodyBytes,
			BodyTimeout:       DefaultBodyTimeout,
			HTTP:              HTTPLlmgw,
			ConnectTimeout:    DefaultConnectTimeout,
			FirstTokenTimeout: DefaultFirstTokenTimeout,
			IdleTimeout:       DefaultIdleTimeout,
			RequestTimeout:    DefaultRequestTimeout,
			Retries:           1,
			ShutdownGrace:     DefaultShutdownGrace,
		},
		Router: Router{Auth: "keys", TenantLabel: tenant.LevelTeam, TenantLabelLimit: DefaultTenantLabelLimit, DefaultMaxTokens: DefaultMaxTokens, SharePrefixIndex: true, ShareLoad: true, CacheIsolation: tenant.LevelOrg},
		Store:  Store{URL: DefaultStoreURL},
		Limits: Limits{OnRedisError: "open"},

		Telemetry: Telemetry{ClientTrace: ClientTraceLink, AccessLog: AccessLogOff},
		Admin:     Admin{AuditRetention: DefaultAuditRetention},
	}
}
