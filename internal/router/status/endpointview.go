package status

// What routing sees of each endpoint, shown to the operator: the load its
// last good scrape read, when that was, the first-token time routing would
// predict for a new request there now, and how often its scrapes and
// health probes failed and why. An endpoint whose /metrics cannot be read
// still shows, with its failures counted.

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"gitea.mynodes.xyz/ilker/llmgw/internal/router/pool"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/scrape"
)

// endpointMetrics are the descriptions of what the endpoint collector
// exports.
type endpointMetrics struct {
	up, inflight                                     *prometheus.Desc
	waiting, running, kvUsage, lastScrape, predicted *prometheus.Desc
	scrapeFailures, probeFailures                    *prometheus.Desc
}

func newEndpointMetrics() *endpointMetrics {
	labels := []string{"pool", "endpoint"}
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &endpointMetrics{
		up: desc("llmgw_endpoint_up",
			"Whether routing sends to the endpoint (1) or has taken it out (0): its health check fails, or it failed requests in a row.", labels...),
		inflight: desc("llmgw_endpoint_inflight",
			"Requests this gateway has sent to the endpoint and not yet seen end.", labels...),
		waiting: desc("llmgw_endpoint_requests_waiting",
			"Requests queued at the endpoint, as its last scrape read them while routing believes it (no older than the pool's metrics.max_age).", labels...),
		running: desc("llmgw_endpoint_requests_running",
			"Requests in the endpoint's running batch, as its last scrape read them while routing believes it.", labels...),
		kvUsage: desc("llmgw_endpoint_kv_cache_usage_ratio",
			"Share of the endpoint's KV cache in use, 0 to 1, as its last scrape read it while routing believes it.", labels...),
		lastScrape: desc("llmgw_endpoint_last_scrape_success_timestamp_seconds",
			"When the endpoint's /metrics was last read with a load in it, in seconds since the Unix epoch; 0 before the first. Only for pools whose metrics are scraped.", labels...),
		predicted: desc("llmgw_endpoint_predicted_ttft_seconds",
			"The time to first token routing predicts now for a new request at the endpoint whose uncached prompt is the pool's mean, from the prefill ahead of it and the endpoint's learned cost.", labels...),
		scrapeFailures: desc("llmgw_endpoint_scrape_failures_total",
			"Scrapes of the endpoint's /metrics that failed, by reason: connect, timeout, status (not 2xx), parse (malformed, protobuf, too long, or none of the load metrics read).", "pool", "endpoint", "reason"),
		probeFailures: desc("llmgw_endpoint_probe_failures_total",
			"Health probes of the endpoint that failed, by reason: connect, timeout, status (not 2xx).", "pool", "endpoint", "reason"),
	}
}

func (m *endpointMetrics) describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.up, m.inflight, m.waiting, m.running, m.kvUsage, m.lastScrape, m.predicted, m.scrapeFailures, m.probeFailures} {
		ch <- d
	}
}

// Sight is what the gateway saw of one endpoint's scrapes and probes. It
// lives as long as its endpoint: across reloads that keep the endpoint's
// URL.
type Sight struct {
	scraped atomic.Pointer[scrape.Load] // the last good scrape; nil before the first
	// scrapes and probes report whether the endpoint is scraped and
	// probed, as its pool is configured now.
	scrapes, probes atomic.Bool
	scrapeFailures  [len(scrape.Reasons)]atomic.Uint64 // by index into scrape.Reasons
	probeFailures   [len(scrape.Reasons)]atomic.Uint64
}

// Loaded takes a scrape that read l. A scrape that read none of the load
// metrics, nor the models loaded, counts as a failure to parse: routing
// learns nothing from it.
func (s *Sight) Loaded(l scrape.Load) {
	if l.Waiting < 0 && l.Running < 0 && l.KVUsage < 0 && l.Models == nil {
		s.scrapeFailures[reasonIndex(scrape.ReasonParse)].Add(1)
		return
	}
	s.scraped.Store(&l)
}

// ScrapeFailed counts a failed scrape by its reason.
func (s *Sight) ScrapeFailed(err error) {
	s.scrapeFailures[reasonIndex(scrape.Reason(err))].Add(1)
}

// Probed counts a failed probe by its reason; nil is a probe that passed.
func (s *Sight) Probed(err error) {
	if err != nil {
		s.probeFailures[reasonIndex(scrape.Reason(err))].Add(1)
	}
}

func reasonIndex(reason string) int {
	for i, r := range scrape.Reasons {
		if r == reason {
			return i
		}
	}
	return 0
}

// Watched notes whether the endpoint is scraped and probed, as its pool
// is configured now.
func (s *Sight) Watched(scrapes, probes bool) {
	s.scrapes.Store(scrapes)
	s.probes.Store(probes)
}

// endpointSights holds a Sight for each endpoint of the catalog in
// service. Only a Watch replaces it, as the router replaces its snapshot,
// one at a time.
type endpointSights struct {
	by atomic.Pointer[map[*pool.Endpoint]*Sight] // replaced whole, never written
}

// Watch is the sights of the endpoints of a catalog being put in
// service, made one at a time.
type Watch struct {
	b    *Board
	next map[*pool.Endpoint]*Sight
}

// Watch starts the sights of the next catalog's endpoints.
func (b *Board) Watch() *Watch {
	return &Watch{b: b, next: make(map[*pool.Endpoint]*Sight)}
}

// Of is ep's sight: kept from the catalog in service, or new.
func (w *Watch) Of(ep *pool.Endpoint) *Sight {
	if by := w.b.sights.by.Load(); by != nil {
		if v := (*by)[ep]; v != nil {
			w.next[ep] = v
			return v
		}
	}
	v := &Sight{}
	w.next[ep] = v
	return v
}

// Done puts the sights in service: endpoints not among them are
// forgotten.
func (w *Watch) Done() {
	w.b.sights.by.Store(&w.next)
}

// get is ep's sight, or nil when it is not watched.
func (s *endpointSights) get(ep *pool.Endpoint) *Sight {
	if by := s.by.Load(); by != nil {
		return (*by)[ep]
	}
	return nil
}

// Collectors is the collector of what routing sees of each endpoint,
// read from the catalog in service when scraped: an endpoint a reload
// removed is gone from the next scrape.
func (b *Board) Collectors() []prometheus.Collector {
	return []prometheus.Collector{endpointCollector{b}}
}

// endpointCollector exports each endpoint's state as routing sees it.
type endpointCollector struct {
	b *Board
}

func (c endpointCollector) Describe(ch chan<- *prometheus.Desc) {
	c.b.m.describe(ch)
}

func (c endpointCollector) Collect(ch chan<- prometheus.Metric) {
	v := c.b.view.Load()
	if v == nil {
		return
	}
	now := time.Now().UnixNano()
	at := time.Unix(0, now)
	for _, p := range v.pools {
		for i, e := range p.Endpoints() {
			up := 1.0
			if e.Out(now) {
				up = 0
			}
			ch <- prometheus.MustNewConstMetric(c.b.m.up, prometheus.GaugeValue, up, p.Name, e.Name())
			ch <- prometheus.MustNewConstMetric(c.b.m.inflight, prometheus.GaugeValue, float64(e.Counts().Inflight), p.Name, e.Name())
			c.collectEndpoint(ch, p, i, at)
		}
	}
}

// collectEndpoint sends what routing sees of endpoint i of p at now.
func (c endpointCollector) collectEndpoint(ch chan<- prometheus.Metric, p Pool, i int, now time.Time) {
	m, e := c.b.m, p.Endpoints()[i]
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	st := p.StateOf(i, now)
	gauge(m.predicted, st.PredictTTFT(int64(p.MeanPrompt()), p.MeanPrompt()), p.Name, e.Name())
	sight := c.b.sights.get(e)
	if sight == nil {
		return
	}
	if l := sight.scraped.Load(); l != nil && st.Load != nil {
		for _, g := range []struct {
			d *prometheus.Desc
			v float64
		}{{m.waiting, l.Waiting}, {m.running, l.Running}, {m.kvUsage, l.KVUsage}} {
			if g.v >= 0 {
				gauge(g.d, g.v, p.Name, e.Name())
			}
		}
	}
	if sight.scrapes.Load() {
		at := 0.0
		if l := sight.scraped.Load(); l != nil {
			at = float64(l.At.UnixNano()) / 1e9
		}
		gauge(m.lastScrape, at, p.Name, e.Name())
		for j, reason := range scrape.Reasons {
			ch <- prometheus.MustNewConstMetric(m.scrapeFailures, prometheus.CounterValue, float64(sight.scrapeFailures[j].Load()), p.Name, e.Name(), reason)
		}
	}
	if sight.probes.Load() {
		for _, reason := range scrape.ProbeReasons {
			n := sight.probeFailures[reasonIndex(reason)].Load()
			ch <- prometheus.MustNewConstMetric(m.probeFailures, prometheus.CounterValue, float64(n), p.Name, e.Name(), reason)
		}
	}
}
