package router

// What admission exports: time queued, queue depth and decisions by model
// and class, each model's SLO pressure, and goodput — the share of recent
// requests that met both of their class's SLOs, refusals counted as
// misses. Pressure and goodput are read from admission's own state when
// scraped; decisions never read the metrics back.

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"gitea.mynodes.xyz/ilker/llmgw/internal/router/proxy"
)

// queueBuckets span a wait too short to notice to one past any TTFT SLO.
var queueBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

type admissionMetrics struct {
	wait      *prometheus.HistogramVec
	depth     *prometheus.GaugeVec
	decisions *prometheus.CounterVec
	pressure  *prometheus.Desc
	goodput   *prometheus.Desc

	resolved sync.Map // key: goodputKey; value: classAdmission, resolved once
}

func newAdmissionMetrics() *admissionMetrics {
	return &admissionMetrics{
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "llmgw_queue_seconds",
			Help:    "Time a request waited in its model's admission queue, by model and priority class, whatever came of it.",
			Buckets: queueBuckets,
		}, []string{"model", "class"}),
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "llmgw_queue_depth",
			Help: "Requests waiting in a model's admission queue now, by model and priority class.",
		}, []string{"model", "class"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmgw_admission_total",
			Help: "Admission decisions by model, priority class and decision: admitted, queued, rejected, expired, fell_back.",
		}, []string{"model", "class", "decision"}),
		pressure: prometheus.NewDesc("llmgw_slo_pressure",
			"How far a model's recent p99 TTFT or TPOT is over its SLO: 1 at it, above 1 past it, 0 with no SLO or too few samples.",
			[]string{"model"}, nil),
		goodput: prometheus.NewDesc("llmgw_goodput_ratio",
			"Share of a model's recent requests of a priority class that met both of the class's SLOs, refusals counted as misses; models with admission enabled.",
			[]string{"model", "class"}, nil),
	}
}

func (m *admissionMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.wait, m.depth, m.decisions}
}

// classAdmission is one model and class's admission metrics.
type classAdmission struct {
	wait      prometheus.Observer
	depth     prometheus.Gauge
	decisions map[string]prometheus.Counter // key: decision
}

// of is model and class's metrics, resolved on first use. Models a reload
// removed keep theirs: a catalog names few.
func (m *admissionMetrics) of(model string, c class) classAdmission {
	k := goodputKey{model, c}
	if ca, ok := m.resolved.Load(k); ok {
		return ca.(classAdmission)
	}
	ca := classAdmission{
		wait:      m.wait.WithLabelValues(model, c.String()),
		depth:     m.depth.WithLabelValues(model, c.String()),
		decisions: make(map[string]prometheus.Counter, len(allDecisions)),
	}
	for _, d := range allDecisions {
		ca.decisions[d] = m.decisions.WithLabelValues(model, c.String(), d)
	}
	m.resolved.Store(k, ca)
	return ca
}

// goodputKept is how many recent requests a model and class's goodput is
// over.
const goodputKept = 256

// goodputTracker keeps, per model and class, whether each recent request
// met its SLOs.
type goodputTracker struct {
	mu sync.Mutex
	by map[goodputKey]*goodputRing
}

type goodputKey struct {
	model string // canonical name
	class class
}

type goodputRing struct {
	met  [goodputKept]bool
	n    int // filled, up to goodputKept
	next int
}

func (t *goodputTracker) add(k goodputKey, met bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.by == nil {
		t.by = make(map[goodputKey]*goodputRing)
	}
	r := t.by[k]
	if r == nil {
		r = &goodputRing{}
		t.by[k] = r
	}
	r.met[r.next] = met
	r.next = (r.next + 1) % goodputKept
	r.n = min(r.n+1, goodputKept)
}

// ratios is every tracked model and class's share of requests that met.
func (t *goodputTracker) ratios(f func(k goodputKey, ratio float64)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, r := range t.by {
		met := 0
		for _, m := range r.met[:r.n] {
			if m {
				met++
			}
		}
		f(k, float64(met)/float64(r.n))
	}
}

// metSLO reports whether a finished request met its class's SLOs: it was
// answered, its first token came within the TTFT SLO and, when streamed
// with more than one token, its tokens within the TPOT SLO. A request
// refused or failed missed.
func (r *Router) metSLO(req *parsedRequest, o proxy.Outcome) bool {
	if o.Status != 200 {
		return false
	}
	slo := req.model.ClassSLO(req.class.String())
	if slo.TTFTp99 > 0 && (o.TTFT <= 0 || o.TTFT > slo.TTFTp99) {
		return false
	}
	if tpot, _, ok := tokenTiming(req.Stream, o, 0); ok && tpot > 0 && slo.TPOTp99 > 0 && tpot > slo.TPOTp99 {
		return false
	}
	return true
}

// admissionCollector exports each model's SLO pressure and goodput, read
// when scraped.
type admissionCollector struct {
	r *Router
}

func (c admissionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.r.m.admission.pressure
	ch <- c.r.m.admission.goodput
}

func (c admissionCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.r.snap.Load()
	if s == nil {
		return
	}
	for _, m := range s.cat.Models() {
		if m.SLO.TTFTp99 > 0 || m.SLO.TPOTp99 > 0 {
			ch <- prometheus.MustNewConstMetric(c.r.m.admission.pressure, prometheus.GaugeValue, c.r.sloPressure(m.Name), m.Name)
		}
	}
	c.r.goodput.ratios(func(k goodputKey, ratio float64) {
		if _, ok := s.cat.Resolve(k.model); ok {
			ch <- prometheus.MustNewConstMetric(c.r.m.admission.goodput, prometheus.GaugeValue, ratio, k.model, k.class.String())
		}
	})
}
