// Package app wires llmgw together: configuration into the control plane
// (catalog, store, keyring, limits, ledger), the control plane into the
// router, and both onto the API and admin listeners. It is the only package
// that sees both sides.
package app

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/console"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/admin"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/alert"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/keys"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/ledger"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/oidc"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/store"
	"gitea.mynodes.xyz/ilker/llmgw/internal/h1"
	"gitea.mynodes.xyz/ilker/llmgw/internal/limits"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/mcpgw"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/placement"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/proxy"
	"gitea.mynodes.xyz/ilker/llmgw/internal/telemetry"
)

// Gateway is a running llmgw: its listeners, router and control plane.
type Gateway struct {
	cfg        *config.Config
	configPath string // empty when the configuration came from flags
	log        *slog.Logger
	reg        registry
	router     *router.Router

	store   store.Store
	ledger  *ledger.Ledger
	keyring *keys.Keyring // nil without authentication
	redis   *limits.Redis // nil with process-local limits
	// limitsClient is redis's client; nil without it.
	limitsClient *redis.Client
	// placements shares the prefix index and the loads with the other
	// gateways on limits.redis; nil when it is not set or both
	// router.share_prefix_index and router.share_load are off.
	placements *placement.Redis
	bus        *redis.Client // placements' client; nil without placements
	limiter    limits.Limiter
	mcp        *mcpgw.Gateway // /mcp's servers
	disc       *discovery     // the configuration in service and the endpoints file's (discovery.go)

	apiLn, adminLn net.Listener
	epp            eppListener // the Endpoint Picker's; off when epp.listen is empty
	api            apiServer
	admin          *http.Server
	ready          atomic.Bool // serving, and not draining
	tempSpool      string      // a spool directory to remove on close
	unlockSpool    func()      // lets go of the spool directory; nil until it is taken

	// guard holds the admin token every path of the admin listener but
	// the open ones asks for (admin.token, else LLMGW_ADMIN_TOKEN; none
	// refuses them all), and the one throttle on guessing it.
	guard *admin.Guard
	// oidc is the identity provider of admin.oidc, which the guard asks of
	// bearer tokens and the console signs in with; nil for none.
	oidc *oidc.Provider
	// alerter checks budgets and sends spend alerts (audit.go).
	alerter *alert.Alerter
	// overrides are the values serve set over the file's, from the
	// environment and flags, set again over each reload's; nil for none.
	overrides func(*config.Config)
	// console is the web console at /ui; lastReload the last load of the
	// configuration, which it shows (console.go).
	console    http.Handler
	lastReload atomic.Pointer[console.Reload]

	tracing   *telemetry.Tracing // nil when traces are off
	accessLog io.Closer          // nil when the access log is off
}

// registry is what a gateway's parts register their metrics with, and
// what /metrics serves.
type registry interface {
	prometheus.Registerer
	prometheus.Gatherer
}

// newRegistry makes a gateway's registry. docs/reference/metrics.md is
// written from one that also keeps every collector registered.
var newRegistry = func() registry { return prometheus.NewRegistry() }

// newGateway builds a gateway from cfg and opens its listeners; Run serves.
// The store and listeners it opened are closed again if it fails.
func newGateway(ctx context.Context, cfg *config.Config, configPath string, log *slog.Logger) (g *Gateway, err error) {
	disc, cat, err := startDiscovery(cfg)
	if err != nil {
		return nil, err
	}
	gw := &Gateway{cfg: cfg, configPath: configPath, log: log, reg: newRegistry(), disc: disc}
	g = gw
	defer func() {
		if err != nil {
			gw.close() // g is nil by now
		}
	}()
	g.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	if g.store, err = store.Open(ctx, cfg.Store.URL); err != nil {
		return nil, fmt.Errorf("opening the store: %w", err)
	}
	if err := g.openLedger(); err != nil {
		return nil, err
	}

	secret, err := cacheSecret(ctx, cfg.Router.CacheSecret, g.store)
	if err != nil {
		return nil, err
	}
	opts := router.Options{
		CacheSecret: secret,
		Transport:   upstreamTransport(cfg.Server),
		Server:      serverOptions(cfg.Server),
		Router:      routerOptions(cfg.Router),
		Recorder:    g.ledger,
		Registerer:  g.reg,
		Logger:      log,
	}
	if cfg.Router.Auth == "keys" {
		g.keyring = keys.NewKeyring(g.store, keys.Options{ConfigTenants: cfg.Tenants, Logger: log})
		if err := g.keyring.Refresh(ctx); err != nil {
			log.Warn("reading tenant limits from the store; serving with the config's alone until it answers", "err", err)
		}
		if g.limiter, err = g.newLimiter(ctx); err != nil {
			return nil, err
		}
		opts.Auth = keyAuth{g.keyring}
		opts.Limits = g.limiter
		opts.TenantLimits = g.keyring.TenantLimits
		opts.Self = selfUsage{admin.NewSelf(g.store)}
	}
	if err := g.openSharing(ctx, &opts); err != nil {
		return nil, err
	}
	if opts.Telemetry, err = g.openTelemetry(ctx, cfg.Telemetry); err != nil {
		return nil, err
	}
	if g.mcp, err = g.newMCP(cfg); err != nil {
		return nil, err
	}
	opts.MCP = g.mcp
	if g.router, err = router.New(opts); err != nil {
		return nil, err
	}
	g.router.SetCatalog(cat)

	if g.apiLn, err = net.Listen("tcp", cfg.Server.Listen); err != nil {
		return nil, fmt.Errorf("API listener: %w", err)
	}
	if g.adminLn, err = net.Listen("tcp", cfg.Server.AdminListen); err != nil {
		return nil, fmt.Errorf("admin listener: %w", err)
	}
	if err := g.openEPP(); err != nil {
		return nil, err
	}
	if g.oidc, err = oidcProvider(cfg); err != nil {
		return nil, err
	}
	gopts := admin.GuardOptions{Registerer: g.reg, Logger: log}
	if g.oidc != nil {
		gopts.Verifier = g.oidc
	}
	g.guard = admin.NewGuard(adminToken(cfg), gopts)
	g.noteReload(time.Now(), nil, nil)
	if g.alerter, err = g.newAlerter(cfg); err != nil {
		return nil, err
	}
	if g.console, err = g.newConsole(); err != nil {
		return nil, err
	}
	g.api = newAPIServer(cfg.Server, closeWhileDraining{g.router, &g.ready}, log)
	g.admin = h1.NewStdServer(g.adminMux(), adminDeadlines(cfg.Server))
	g.warnAdminExposed()
	return g, nil
}

// openLedger opens the usage ledger over the store, its spool directory
// held by this process alone: store.spool_dir, else the store's default
// (ledger.DefaultSpoolDir), or a directory of its own for a store in memory.
func (g *Gateway) openLedger() error {
	spool := g.cfg.Store.SpoolDir
	switch {
	case spool != "":
	case g.cfg.Store.URL == "memory:":
		// A store in memory never goes away, but a spool directory is
		// one process's alone: give this one its own.
		dir, err := os.MkdirTemp("", "llmgw-spool-")
		if err != nil {
			return err
		}
		spool = dir
		g.tempSpool = spool
	default:
		spool = ledger.DefaultSpoolDir(g.cfg.Store.URL)
	}
	var err error
	if g.unlockSpool, err = ledger.LockDir(spool); err != nil {
		return err
	}
	g.ledger = ledger.New(g.store, ledger.Options{SpoolDir: spool, Logger: g.log, Registerer: g.reg})
	return nil
}

// cacheSaltSecret names the store's secret cache salts are made under.
const cacheSaltSecret = "cache-salt"

// cacheSecret is the key cache salts are made under, which every gateway
// sending to the same servers must share, so that a domain's prompts hit
// the same cached prefix whichever gateway sends them: router.cache_secret
// or LLMGW_CACHE_SECRET, hashed, else the secret the store makes once for
// every gateway on it.
func cacheSecret(ctx context.Context, configured string, st store.Store) ([]byte, error) {
	if configured == "" {
		configured = os.Getenv("LLMGW_CACHE_SECRET")
		if n := len(configured); n > 0 && n < config.MinCacheSecret {
			return nil, fmt.Errorf("LLMGW_CACHE_SECRET: must be at least %d characters, got %d", config.MinCacheSecret, n)
		}
	}
	if configured != "" {
		sum := sha256.Sum256([]byte(configured))
		return sum[:], nil
	}
	secret, err := st.Secret(ctx, cacheSaltSecret)
	if err != nil {
		return nil, fmt.Errorf("reading the cache salt secret from the store: %w", err)
	}
	return secret, nil
}

// apiServer is the API listener's HTTP/1.1 server: llmgw's own or net/http's.
type apiServer interface {
	Serve(net.Listener) error
	Shutdown(context.Context) error
	Close() error
}

var (
	_ apiServer = (*h1.Server)(nil)
	_ apiServer = (*http.Server)(nil)
)

// The API listener's timeouts, the same on either server: a request's line
// and headers must arrive within apiReadHeaderTimeout, and a kept-alive
// connection sends its next request within apiIdleTimeout or is closed.
// Its body has server.body_timeout.
const (
	apiReadHeaderTimeout = 10 * time.Second
	apiIdleTimeout       = 2 * time.Minute
)

// maxAdminBodyTimeout bounds the admin listener's body deadline: its
// bodies, a sign-in's or a key's form, a key's spec or a tenant's limits,
// are at most 64 KiB, which arrive within it at 52 kbit/s.
const maxAdminBodyTimeout = 10 * time.Second

// adminDeadlines are the admin listener's: the API's for headers and
// idle connections, and for bodies server.body_timeout up to
// maxAdminBodyTimeout.
func adminDeadlines(s config.Server) h1.Deadlines {
	return h1.Deadlines{Header: apiReadHeaderTimeout, Body: min(s.BodyTimeout, maxAdminBodyTimeout), Idle: apiIdleTimeout}
}

// newAPIServer is the server that server.http names, serving h.
func newAPIServer(s config.Server, h http.Handler, log *slog.Logger) apiServer {
	d := h1.Deadlines{Header: apiReadHeaderTimeout, Body: s.BodyTimeout, Idle: apiIdleTimeout}
	if s.HTTP == config.HTTPNetHTTP {
		srv := h1.NewStdServer(h, d)
		srv.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelDebug)
		return srv
	}
	srv := h1.NewServer(h, d)
	srv.Logger = log
	return srv
}

// closeWhileDraining serves next, and once the gateway drains asks each
// client it answers to close its connection afterwards, so that no client
// keeps a connection alive to a listener about to close: its next request
// opens a new one, through the load balancer to a gateway that stays.
type closeWhileDraining struct {
	next  http.Handler
	ready *atomic.Bool // the gateway's readiness: false once it drains
}

func (h closeWhileDraining) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.ready.Load() {
		w.Header().Set("Connection", "close")
	}
	h.next.ServeHTTP(w, r)
}

// upstreamTransport is what carries upstream calls: nil for llmgw's own
// client, or net/http's Transport when server.http says so.
func upstreamTransport(s config.Server) http.RoundTripper {
	if s.HTTP == config.HTTPNetHTTP {
		return proxy.StdTransport(s.ConnectTimeout)
	}
	return nil
}

// newLimiter is a Redis limiter when limits.redis is set, else a
// process-local one seeded with this period's spend from the ledger.
func (g *Gateway) newLimiter(ctx context.Context) (limits.Limiter, error) {
	if g.cfg.Limits.Redis != "" {
		// Admission waits on Redis: a failed call must fail fast, to be let
		// through or refused as limits.on_redis_error says, not be retried
		// behind the client's back.
		c, err := newRedisClient(g.cfg.Limits, func(o *redis.Options) { o.MaxRetries, o.DialerRetries = -1, 1 })
		if err != nil {
			return nil, err
		}
		g.limitsClient = c
		if err := checkRedis(ctx, c, g.cfg.Limits, g.log); err != nil {
			return nil, err
		}
		g.redis = limits.NewRedis(c, limits.RedisOptions{
			FailOpen:   g.cfg.Limits.OnRedisError == "open",
			Registerer: g.reg,
			Logger:     g.log,
		})
		return g.redis, nil
	}
	l := limits.NewLocal()
	if err := seedBudgets(ctx, g.store, l, g.keyring, time.Now()); err != nil {
		g.log.Warn("budgets start from zero: the ledger could not be read", "err", err)
	}
	return l, nil
}

// adminMux serves the admin listener. /metrics, /healthz, /livez and
// /readyz answer anyone; every other path, the admin API, the console's
// sign-in and profiles among them, is behind the one guard of the admin
// token.
func (g *Gateway) adminMux() http.Handler {
	guarded := http.NewServeMux()
	if g.cfg.Admin.PProf {
		// Profiles, for finding where a gateway spends its CPU.
		guarded.HandleFunc("GET /debug/pprof/", pprof.Index)
		guarded.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		guarded.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	} else {
		guarded.HandleFunc("/debug/pprof/", func(w http.ResponseWriter, _ *http.Request) {
			openai.WriteError(w, &openai.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "unknown_url", Message: "Profiles are off: set admin.pprof: true in the config to serve them."})
		})
	}
	// Any other path is unknown, and not repeated: a key pasted into a URL
	// must not come back in the body.
	guarded.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		openai.WriteError(w, &openai.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "unknown_url", Message: "Unknown admin listener URL."})
	})

	mux := http.NewServeMux()
	// OpenMetrics when a scraper asks for it, so that the exemplars
	// linking latencies to traces show.
	mux.Handle("GET /metrics", promhttp.HandlerFor(g.reg, promhttp.HandlerOpts{Registry: g.reg, EnableOpenMetrics: true}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	// Liveness asks nothing of anything: not the store, Redis, the
	// upstreams or whether the gateway drains. A process that answers it
	// is alive, and restarting it would help nothing else.
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("live\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		// Readiness is the gateway's own: a store outage spools the ledger
		// and serves keys from the cache, so it does not make llmgw unready.
		// It ends when a drain begins.
		if !g.ready.Load() {
			http.Error(w, "not ready\n", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ready\n"))
	})
	// The console signs in with the admin token itself, through the
	// guard, and keeps a session in a cookie; the admin API puts itself
	// behind the guard.
	mux.Handle("/ui", g.console)
	mux.Handle("/ui/", g.console)
	mux.Handle("/admin/", admin.New(g.store, g.keyring, admin.Options{Guard: g.guard, Logger: g.log}))
	mux.Handle("/", g.guard.Wrap(admin.AdminOnly(guarded)))
	return mux
}

// warnAdminExposed logs a warning when the admin listener is reachable
// from beyond this host, saying what anyone who reaches it can read, and
// another when profiles are on with no token to open them.
func (g *Gateway) warnAdminExposed() {
	addr := g.adminLn.Addr().String()
	tokenSet := g.guard.Configured()
	if g.cfg.Admin.PProf && !tokenSet {
		g.log.Warn("admin.pprof is on but no admin token is configured: /debug/pprof/ is refused until LLMGW_ADMIN_TOKEN or admin.token is set")
	}
	if onLoopback(addr) {
		return
	}
	guarded := "/admin/ and /debug/ are refused until an admin token is set"
	if tokenSet {
		guarded = "whoever sends the admin token also manages keys and tenant limits and reads usage at /admin/"
		if g.cfg.Admin.PProf {
			guarded += ", and reads Go's profiles at /debug/pprof/"
		}
	}
	g.log.Warn("the admin listener is not on loopback: anyone who can reach it reads /metrics, /healthz, /livez and /readyz; "+guarded, "addr", addr)
}

// onLoopback reports whether addr, a host:port a listener has bound,
// is reachable from this host alone: localhost, 127.0.0.0/8 or ::1 (also
// as ::ffff:127.x). A wildcard host (":8081", "0.0.0.0", "[::]") and any
// other address are not.
func onLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// URL is the base URL of the OpenAI API, ending in /v1.
func (g *Gateway) URL() string { return "http://" + hostPort(g.apiLn.Addr()) + "/v1" }

// AdminURL is the base URL of the admin listener.
func (g *Gateway) AdminURL() string { return "http://" + hostPort(g.adminLn.Addr()) }

// hostPort is an address a client can dial: a wildcard host becomes
// localhost.
func hostPort(a net.Addr) string {
	host, port, _ := net.SplitHostPort(a.String())
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}

// Run serves until ctx ends, then drains: /readyz answers 503 at once, the
// API listener goes on taking requests for server.drain_delay while load
// balancers catch up, then closes; the requests in flight finish for up to
// server.shutdown_grace, and the ledger is flushed. A part that fails ends
// the run at once, with no delay.
func (g *Gateway) Run(ctx context.Context) error {
	defer g.close()
	// The parts below serve until the listeners have drained, not until
	// ctx ends: keys go on being read again, and the config watched,
	// for the requests still taken and those still in flight.
	life, endLife := context.WithCancel(context.WithoutCancel(ctx))
	defer endLife()
	grp, gctx := errgroup.WithContext(life)
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBG()

	serve := func(s interface{ Serve(net.Listener) error }, ln net.Listener) func() error {
		return func() error {
			if err := s.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		}
	}
	// Ready before the admin listener serves, so that no probe of a
	// gateway that has started can find it unready.
	g.ready.Store(true)
	grp.Go(serve(g.api, g.apiLn))
	grp.Go(serve(g.admin, g.adminLn))
	grp.Go(g.serveEPP)

	// The ledger and limit settlements outlive the listeners, so that what
	// the last requests used is written before the process ends.
	background := errgroup.Group{}
	background.Go(func() error { return g.ledger.Run(bg) })
	if g.redis != nil {
		background.Go(func() error { return g.redis.Run(bg) })
	}
	if g.keyring != nil {
		grp.Go(func() error { return g.keyring.Run(gctx) })
	}
	grp.Go(func() error { return g.watchConfig(gctx) })
	grp.Go(func() error { return g.watchDiscovery(gctx) })
	grp.Go(func() error { return newAuditPruner(g.store, g.cfg, g.log).Run(gctx) })
	grp.Go(func() error { return g.alerter.Run(gctx) })
	if g.placements != nil {
		grp.Go(func() error { return g.placements.Run(gctx, g.router.Sharing()) })
	}

	select {
	case <-ctx.Done():
		g.ready.Store(false)
		g.drainDelay(gctx)
	case <-gctx.Done():
		g.ready.Store(false) // a part failed: stop at once
	}
	g.log.Info("draining: the API listener closes; requests in flight may finish", "grace", g.cfg.Server.ShutdownGrace)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.cfg.Server.ShutdownGrace)
	defer cancel()
	if err := g.api.Shutdown(sctx); err != nil {
		g.log.Warn("requests still open at the end of the grace period were cut", "err", err)
		g.api.Close()
	}
	g.admin.Shutdown(sctx)
	g.stopEPP(sctx)
	endLife()
	err := grp.Wait()
	stopBG()
	if berr := background.Wait(); berr != nil && !errors.Is(berr, context.Canceled) {
		err = errors.Join(err, berr)
	}
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

// drainDelay waits server.drain_delay, or until failed ends (a part of
// the gateway failed, and there is nothing to wait for).
func (g *Gateway) drainDelay(failed context.Context) {
	d := g.cfg.Server.DrainDelay
	if d <= 0 {
		return
	}
	g.log.Info("draining: /readyz answers 503; requests are still taken until the delay is over", "delay", d)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-failed.Done():
	}
}

// close releases what newGateway opened.
func (g *Gateway) close() {
	if g.router != nil {
		g.router.Close()
	}
	if g.mcp != nil {
		g.mcp.Close()
	}
	for _, ln := range []net.Listener{g.apiLn, g.adminLn, g.epp.ln} {
		if ln != nil {
			ln.Close()
		}
	}
	if g.store != nil {
		g.store.Close()
	}
	for _, c := range []*redis.Client{g.bus, g.limitsClient} {
		if c != nil {
			c.Close()
		}
	}
	if g.unlockSpool != nil {
		g.unlockSpool()
	}
	g.closeTelemetry()
	if g.tempSpool != "" {
		os.RemoveAll(g.tempSpool)
	}
}
