package router

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

// endpointMetrics are the descriptions of what endpointCollector exports
// beside llmgw_endpoint_up and llmgw_endpoint_inflight.
type endpointMetrics struct {
	waiting, running, kvUsage, lastScrape, predicted *prometheus.Desc
	scrapeFailures, probeFailures                    *prometheus.Desc
}

func newEndpointMetrics() *endpointMetrics {
	labels := []string{"pool", "endpoint"}
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &endpointMetrics{
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
	for _, d := range []*prometheus.Desc{m.waiting, m.running, m.kvUsage, m.lastScrape, m.predicted, m.scrapeFailures, m.probeFailures} {
		ch <- d
	}
}

// endpointSight is what the gateway saw of one endpoint's scrapes and
// probes. It lives as long as its endpoint: across reloads that keep the
// endpoint's URL.
type endpointSight struct {
	scraped atomic.Pointer[scrape.Load] // the last good scrape; nil before the first
	// scrapes and probes report whether the endpoint is scraped and
	// probed, as its pool is configured now.
	scrapes, probes atomic.Bool
	scrapeFailures  [len(scrape.Reasons)]atomic.Uint64 // by index into scrape.Reasons
	probeFailures   [len(scrape.Reasons)]atomic.Uint64
}

// loaded takes a scrape that read l. A scrape that read none of the load
// metrics counts as a failure to parse: routing learns nothing from it.
func (s *endpointSight) loaded(l scrape.Load) {
	if l.Waiting < 0 && l.Running < 0 && l.KVUsage < 0 {
		s.scrapeFailures[reasonIndex(scrape.ReasonParse)].Add(1)
		return
	}
	s.scraped.Store(&l)
}

// scrapeFailed counts a failed scrape by its reason.
func (s *endpointSight) scrapeFailed(err error) {
	s.scrapeFailures[reasonIndex(scrape.Reason(err))].Add(1)
}

// probed counts a failed probe by its reason; nil is a probe that passed.
func (s *endpointSight) probed(err error) {
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

// endpointSights holds an endpointSight for each endpoint of the catalog
// in service. Only SetCatalog replaces it, as it replaces the snapshot,
// one call at a time.
type endpointSights struct {
	by atomic.Pointer[map[*pool.Endpoint]*endpointSight] // replaced whole, never written
}

// of is ep's sight, kept from the set in service or made new, and put in
// next: the set that replaces it.
func (s *endpointSights) of(ep *pool.Endpoint, next map[*pool.Endpoint]*endpointSight) *endpointSight {
	if by := s.by.Load(); by != nil {
		if v := (*by)[ep]; v != nil {
			next[ep] = v
			return v
		}
	}
	v := &endpointSight{}
	next[ep] = v
	return v
}

// set puts next in service: endpoints no longer in it are forgotten.
func (s *endpointSights) set(next map[*pool.Endpoint]*endpointSight) {
	s.by.Store(&next)
}

// get is ep's sight, or nil when it is not watched.
func (s *endpointSights) get(ep *pool.Endpoint) *endpointSight {
	if by := s.by.Load(); by != nil {
		return (*by)[ep]
	}
	return nil
}

// collectEndpoint sends what routing sees of endpoint i of p at now.
func (c endpointCollector) collectEndpoint(ch chan<- prometheus.Metric, p *servedPool, i int, now time.Time) {
	m, e := c.r.m.endpoints, p.Endpoints()[i]
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	st := p.StateOf(i, now)
	gauge(m.predicted, st.PredictTTFT(int64(p.MeanPrompt()), p.MeanPrompt()), p.name, e.Name())
	sight := c.r.sights.get(e)
	if sight == nil {
		return
	}
	if l := sight.scraped.Load(); l != nil && st.Load != nil {
		for _, g := range []struct {
			d *prometheus.Desc
			v float64
		}{{m.waiting, l.Waiting}, {m.running, l.Running}, {m.kvUsage, l.KVUsage}} {
			if g.v >= 0 {
				gauge(g.d, g.v, p.name, e.Name())
			}
		}
	}
	if sight.scrapes.Load() {
		at := 0.0
		if l := sight.scraped.Load(); l != nil {
			at = float64(l.At.UnixNano()) / 1e9
		}
		gauge(m.lastScrape, at, p.name, e.Name())
		for j, reason := range scrape.Reasons {
			ch <- prometheus.MustNewConstMetric(m.scrapeFailures, prometheus.CounterValue, float64(sight.scrapeFailures[j].Load()), p.name, e.Name(), reason)
		}
	}
	if sight.probes.Load() {
		for _, reason := range scrape.ProbeReasons {
			n := sight.probeFailures[reasonIndex(reason)].Load()
			ch <- prometheus.MustNewConstMetric(m.probeFailures, prometheus.CounterValue, float64(n), p.name, e.Name(), reason)
		}
	}
}
