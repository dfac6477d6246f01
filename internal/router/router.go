// Package router is llmgw's data plane: it takes an OpenAI API request,
// finds the model, checks who is asking and whether they may, picks an
// endpoint, relays the answer and accounts for it. It reads the control
// plane only through an immutable snapshot swapped in whole on reload.
package router

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/admission"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/extproc"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/mcpgw"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/observe"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/placement"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/pool"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/proxy"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/scrape"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/status"
)

// Authenticator checks an API key and says whose it is.
type Authenticator interface {
	Authenticate(ctx context.Context, plaintext string) (*tenant.Key, error)
}

// Recorder takes one usage record per request, off the hot path.
type Recorder = observe.Recorder

// Options is what a Router is built from. Server and Router are used as
// given, a zero meaning what each field says rather than a default:
// llmgw's defaults are its configuration's.
type Options struct {
	Server ServerOptions
	Router RouterOptions
	// Auth checks keys; nil serves without authentication.
	Auth Authenticator
	// Limits enforces rate limits and budgets; nil enforces none.
	Limits Limiter
	// TenantLimits gives the limits set on each level of a tenant path,
	// outermost first; nil means none.
	TenantLimits func(path string) []tenant.TenantLimits
	// Recorder takes usage records; nil drops them.
	Recorder Recorder
	// Self answers a key's questions about its own usage; nil answers 404.
	Self       SelfUsage
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	// Transport carries upstream calls; nil means llmgw's own, tuned for
	// many long-lived streams.
	Transport http.RoundTripper
	// ProbeClient scrapes endpoints' metrics and probes their health; nil
	// means a client of its own, apart from the upstream calls'.
	ProbeClient *http.Client
	// Placements, when not nil, takes where each prompt was sent, for the
	// other gateways in front of the same pools; what they send comes
	// back through Place.
	Placements Placements
	// CacheSecret is the key cache salts are made with: the same for every
	// gateway whose requests may reach the same servers. Nil means one of
	// this process's alone.
	CacheSecret []byte
	// Telemetry is what the router emits besides its metrics: spans and
	// an access log; the zero value emits neither.
	Telemetry TelemetryOptions
	// MCP answers /mcp once its request is authenticated; nil answers
	// 404.
	MCP *mcpgw.Gateway
}

// TelemetryOptions is what the router emits besides its metrics. The zero
// value emits nothing.
type TelemetryOptions struct {
	// Tracer makes the spans; nil traces nothing.
	Tracer trace.TracerProvider
	// RecordContent puts each request's prompt messages on its span as
	// gen_ai.input.messages; off, no message content is recorded.
	RecordContent bool
	// ContinueClientTrace continues a client's traceparent: the request's
	// spans join the client's trace, its tracestate goes on to the
	// upstream, and a parent-based sampler follows its sampled flag.
	// False, each request starts a trace of its own, linked to the
	// client's span.
	ContinueClientTrace bool
	// AccessLog takes one JSON line per request, each in one Write; nil
	// writes none.
	AccessLog io.Writer
}

// ServerOptions bounds a request and each call it makes upstream.
type ServerOptions struct {
	// MaxBodyBytes is the largest request body read; a larger one gets
	// 413. Zero or less lets no body in.
	MaxBodyBytes int64
	// ConnectTimeout bounds dialling an endpoint; zero means the system's
	// bound alone.
	ConnectTimeout time.Duration
	// FirstTokenTimeout bounds the wait for an upstream's first byte; a
	// model's own first_token_timeout overrides it. Zero means no bound.
	FirstTokenTimeout time.Duration
	// IdleTimeout is the longest silence allowed between two streamed
	// events once the answer has begun. Zero means no bound.
	IdleTimeout time.Duration
	// RequestTimeout bounds a whole request, end to end; it must be
	// positive, or every upstream call is out of time when it starts.
	RequestTimeout time.Duration
	// KeepAlive, when positive, sends an SSE comment to a streaming client
	// after this long without an event.
	KeepAlive time.Duration
	// Retries is how many other endpoints are tried after a failure before
	// the first byte; zero tries one alone.
	Retries int
}

// RouterOptions says how tenants are labelled and kept apart, and what a
// request that names no max_tokens reserves.
type RouterOptions struct {
	// TenantLabel is the tenant level, org, team or user, that becomes the
	// tenant label of the per-tenant metrics; empty means org.
	TenantLabel string
	// TenantLabelLimit is how many tenants get a tenant label value of
	// their own (internal/router/observe's tenant.go); zero or less means
	// 100.
	TenantLabelLimit int
	// DefaultMaxTokens is the completion length reserved against token
	// limits for a request that names no max_tokens; zero reserves none.
	DefaultMaxTokens int64
	// CacheIsolation is the tenant level, org, team or user, within which
	// prompts may share a prefix cache, or CacheIsolationNone; empty
	// means org.
	CacheIsolation string
}

// CacheIsolationNone lets every tenant's prompts share the prefix cache.
const CacheIsolationNone = "none"

// Placements takes this gateway's placements to the others. Publish must
// not block.
type Placements interface {
	Publish(placement.Placement)
}

// Router serves the OpenAI API. Build it with New, give it a catalog with
// SetCatalog, and serve it as an http.Handler.
type Router struct {
	opts  Options
	log   *slog.Logger
	proxy *proxy.Proxy
	m     *metrics
	slo   admission.SLOTracker
	// gates are the pools' admission points; goodput is whether recent
	// requests met their SLOs.
	gates   *admission.Gates
	goodput admission.Goodput
	snap    atomic.Pointer[snapshot]
	// limits are what a request is held to (admit.go).
	limits keyLimits
	// sharing is what this gateway tells the other gateways in front of
	// the same pools, and believes of what they tell it.
	sharing *placement.Sharing
	ids     requestIDs
	// watch scrapes and probes every endpoint of the catalog in service.
	watch watching
	// iso keeps isolation domains' prompts apart in the prefix caches.
	iso *isolation
	// board is the read model: the status the console shows, and what
	// routing sees of each endpoint.
	board *status.Board
	// metrics are the request metrics; tracing makes the requests' spans,
	// nil when tracing is off; observers take each request's Completed
	// (account.go).
	metrics   *observe.Metrics
	tracing   *observe.Tracing
	observers observe.Observers
	// wrapWork, set by tests alone, wraps the context a request's
	// translation runs under, to watch it look and to end it on cue.
	wrapWork func(context.Context) context.Context
}

// New builds a Router and registers its metrics.
func New(opts Options) (*Router, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Registerer == nil {
		opts.Registerer = prometheus.NewRegistry()
	}
	tel := opts.Telemetry
	r := &Router{
		opts:    opts,
		log:     opts.Logger,
		proxy:   proxy.New(opts.Server.ConnectTimeout, opts.Transport),
		m:       newMetrics(),
		ids:     newRequestIDs(),
		iso:     newIsolation(opts.Router.CacheIsolation, opts.CacheSecret),
		limits:  keyLimits{limiter: opts.Limits, tenantLimits: opts.TenantLimits, defaultMax: opts.Router.DefaultMaxTokens},
		metrics: observe.NewMetrics(opts.Router.TenantLabel, opts.Router.TenantLabelLimit),
		tracing: observe.NewTracing(tel.Tracer, tel.RecordContent, tel.ContinueClientTrace),
	}
	if opts.ProbeClient == nil {
		// Probes have their own connections: a pool of streams busy to
		// the last connection must not delay its health check.
		opts.ProbeClient = &http.Client{Transport: proxy.StdTransport(opts.Server.ConnectTimeout)}
	}
	current := func() admission.Catalog {
		if s := r.snap.Load(); s != nil {
			return s
		}
		return nil
	}
	pressure := func(model string) float64 { return r.snap.Load().sloPressure(&r.slo, model) }
	r.sharing = placement.NewSharing(func() *placement.Pools {
		if s := r.snap.Load(); s != nil {
			return s.shared
		}
		return nil
	})
	r.gates = admission.NewGates(current, pressure, r.m.admission)
	r.board = status.New(&r.slo, &r.goodput, r.gates)
	r.watch = watching{w: scrape.NewWatcher(opts.ProbeClient), board: r.board, ejections: r.m.ejections, log: r.log}
	r.observers = observers(opts, r.metrics, r.tracing, r.board, observe.NewAdmission(&r.slo, &r.goodput, r.gates))
	if err := r.m.register(opts.Registerer); err != nil {
		return nil, err
	}
	if err := r.observers.Register(opts.Registerer); err != nil {
		return nil, err
	}
	if err := opts.Registerer.Register(admissionCollector{r}); err != nil {
		return nil, err
	}
	if opts.MCP != nil {
		tools, err := toolObservers(opts, r.tracing)
		if err != nil {
			return nil, err
		}
		opts.MCP.SetObservers(tools)
	}
	return r, nil
}

// snapshot is everything a request reads of the control plane, immutable.
type snapshot struct {
	cat    *catalog.Catalog
	pools  map[string]*servedPool // key: pool name
	models []byte                 // the /v1/models answer, rendered once
	// shared is the pools as this gateway shares them with the others.
	shared *placement.Pools
}

// SetCatalog swaps in a new catalog. Pools keep what they learned of
// endpoints that stay, and a removed model stops being reported.
func (r *Router) SetCatalog(c *catalog.Catalog) {
	old := r.snap.Load()
	s := &snapshot{cat: c, pools: make(map[string]*servedPool, len(c.Pools()))}
	shown := make([]status.Pool, 0, len(c.Pools()))
	byName := make(map[string]*pool.Pool, len(c.Pools()))
	for _, p := range c.Pools() {
		var prev *servedPool
		if old != nil {
			prev = old.pools[p.Name]
		}
		sp := newServedPool(p, prev, r.m, r.log)
		if r.opts.Placements != nil {
			sp.OnPlace(placement.PublishTo(r.opts.Placements, sp.name, sp.Pool))
		}
		s.pools[p.Name], byName[p.Name] = sp, sp.Pool
		shown = append(shown, status.Pool{Pool: sp.Pool, Name: sp.name, Kind: sp.kind})
	}
	s.shared = placement.NewPools(c, byName, r.opts.Server.MaxBodyBytes)
	s.models = renderModels(c, nil)
	r.snap.Store(s)
	r.board.SetCatalog(c, shown)
	r.watch.set(c, s)
	r.observers.SetCatalog(c)
	if old != nil {
		for name, p := range old.pools {
			if p.epp == nil {
				continue
			}
			var to *extproc.Picker // the pool's picker now; nil when it has none
			if np := s.pools[name]; np != nil {
				to = np.epp
			}
			p.epp.HandOver(to)
		}
		// An endpoint the catalog no longer has keeps no connections:
		// idle ones close now, busy ones when their answer ends.
		kept := s.hosts()
		for h := range old.hosts() {
			if !kept[h] {
				r.proxy.CloseIdleTo(h)
			}
		}
	}
}

// hosts is the host:port of every endpoint in s, as upstream connections
// are kept by.
func (s *snapshot) hosts() map[string]bool {
	hosts := make(map[string]bool)
	for _, p := range s.pools {
		for _, ep := range p.Endpoints() {
			if h, ok := ep.Host(); ok {
				hosts[h] = true
			}
		}
	}
	return hosts
}

// Catalog is the catalog being served, nil before the first SetCatalog.
func (r *Router) Catalog() *catalog.Catalog {
	if s := r.snap.Load(); s != nil {
		return s.cat
	}
	return nil
}

// ReloadFailed notes whether the last reload of the configuration worked.
func (r *Router) ReloadFailed(failed bool) {
	if failed {
		r.m.reloadOK.Set(0)
	} else {
		r.m.reloadOK.Set(1)
		r.m.reloadTime.SetToCurrentTime()
	}
}

// Close stops scraping and probing the endpoints, and closes idle
// upstream connections. The Router serves on, on what it last learned.
func (r *Router) Close() {
	r.watch.w.Close()
	r.proxy.CloseIdle()
}

// renderModels is the /v1/models answer: every model and alias key may
// use; with a nil key, every one.
func renderModels(c *catalog.Catalog, key *tenant.Key) []byte {
	type entry struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	list := struct {
		Object string  `json:"object"`
		Data   []entry `json:"data"`
	}{Object: "list", Data: []entry{}}
	for i := range c.Models() {
		m := &c.Models()[i]
		if !visible(key, m) {
			continue
		}
		for _, n := range append([]string{m.Name}, m.Aliases...) {
			list.Data = append(list.Data, entry{ID: n, Object: "model", OwnedBy: "llmgw"})
		}
	}
	b, _ := json.Marshal(list)
	return b
}

// requestIDs makes request ids unique across processes and restarts: a
// random prefix per process and a counter.
type requestIDs struct {
	prefix string
	n      atomic.Uint64
}

func newRequestIDs() requestIDs {
	return requestIDs{prefix: randomPrefix()}
}

// next is a new request id, made in one allocation: the prefix of 17
// bytes and the counter in base 36, at most 13, fit the buffer.
func (g *requestIDs) next() string {
	var b [32]byte
	return string(strconv.AppendUint(append(b[:0], g.prefix...), g.n.Add(1), 36))
}

// randomPrefix is 8 random bytes in hex and a dash: a process's share of
// the request id space.
func randomPrefix() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:]) + "-"
}

// Sharing is what this gateway shares with the others in front of the
// same pools, for a bus to carry (placement.Redis.Run): the placements and
// loads of the catalog in service.
func (r *Router) Sharing() *placement.Sharing { return r.sharing }

// Status is the router's status at now, as the console shows it; empty
// before the first catalog.
func (r *Router) Status(now time.Time) status.Status { return r.board.Status(now) }

// watching is the scrapes and probes of every endpoint of the catalog in
// service, and what comes of them: each scrape sets its endpoint's load,
// each probe whether it is down, and the board's sights see both.
type watching struct {
	w         *scrape.Watcher
	board     *status.Board
	ejections *prometheus.CounterVec // llmgw_ejections_total
	log       *slog.Logger
}

// set watches every endpoint of s, by c's settings for its pool.
func (wt watching) set(c *catalog.Catalog, s *snapshot) {
	wt.w.Set(wt.targets(c, s))
}

// targets is what to scrape and probe for every endpoint of s, by c's
// settings for its pool.
func (wt watching) targets(c *catalog.Catalog, s *snapshot) []scrape.Target {
	var ts []scrape.Target
	sights := wt.board.Watch()
	defer sights.Done()
	for _, cp := range c.Pools() {
		p := s.pools[cp.Name]
		for _, ep := range p.Endpoints() {
			root := hostRoot(ep.URL())
			sight := sights.Of(ep)
			t := scrape.Target{
				Name:           p.name + " " + ep.URL(),
				Interval:       cp.Metrics.Interval,
				MaxAge:         cp.Metrics.MaxAge,
				HealthInterval: cp.Health.Interval,
				HealthTimeout:  cp.Health.Timeout,
				Format:         scrapeFormat(cp.Kind),
				OnLoad: func(l scrape.Load) {
					ep.SetLoad(l.Waiting, l.KVUsage, l.At)
					ep.SetModels(l.Models, l.At)
					p.SetKVBlock(l.BlockSize)
					p.SetSlots(ep, l.Slots)
					sight.Loaded(l)
				},
				OnScrapeError: sight.ScrapeFailed,
				OnHealth: func(up bool, err error) {
					wt.probed(p, ep, up, err)
					sight.Probed(err)
				},
			}
			if cp.Metrics.Path != "" && root != "" {
				t.MetricsURL = root + cp.Metrics.Path
				if cp.Kind == catalog.KindLlamaCpp {
					t.SlotsURL = root + "/slots"
				}
			}
			if cp.Health.Path != "" && root != "" {
				t.HealthURL = root + cp.Health.Path
			}
			sight.Watched(t.MetricsURL != "", t.HealthURL != "")
			if t.MetricsURL != "" || t.HealthURL != "" {
				ts = append(ts, t)
			}
		}
	}
	return ts
}

// scrapeFormat is what the metrics path of a pool of kind answers with:
// the models loaded on Ollama, Prometheus text on every other kind.
func scrapeFormat(kind string) scrape.Format {
	if kind == catalog.KindOllama {
		return scrape.FormatOllama
	}
	return scrape.FormatPrometheus
}

// probed notes a health probe of ep: a failure takes it out of the pool,
// a success brings it back.
func (wt watching) probed(p *servedPool, ep *pool.Endpoint, up bool, err error) {
	wasDown := ep.SetDown(!up)
	switch {
	case !up && !wasDown:
		wt.ejections.WithLabelValues(p.name, ep.Name(), "health_check").Inc()
		wt.log.Warn("endpoint failed its health check", "pool", p.name, "endpoint", ep.Name(), "err", err)
	case up && wasDown:
		wt.log.Info("endpoint passed its health check", "pool", p.name, "endpoint", ep.Name())
	}
}

// hostRoot is a base URL's scheme and host, where a server's /metrics and
// /health are; empty for one that does not parse.
func hostRoot(base string) string {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}
