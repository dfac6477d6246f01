package admission

// What admission exports: time queued, queue depth and decisions by model
// and class, each model's SLO pressure, and goodput — the share of recent
// requests that met both of their class's SLOs, refusals counted as
// misses. Pressure and goodput are read from admission's own state when
// scraped; decisions never read the metrics back.

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

// queueBuckets span a wait too short to notice to one past any TTFT SLO.
var queueBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// Metrics is what admission exports, resolved per model and class as
// they come.
type Metrics struct {
	wait      *prometheus.HistogramVec
	depth     *prometheus.GaugeVec
	decisions *prometheus.CounterVec
	pressure  *prometheus.Desc
	goodput   *prometheus.Desc

	resolved sync.Map // key: goodputKey; value: classAdmission, resolved once
}

func NewMetrics() *Metrics {
	return &Metrics{
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

// Collectors is what the caller registers: the queue's waits, depths and
// decisions. Pressure and goodput are read when scraped (CollectFor).
func (m *Metrics) Collectors() []prometheus.Collector {
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
func (m *Metrics) of(model string, c Class) classAdmission {
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

// Goodput keeps, per model and class, whether each recent request
// met its SLOs.
type Goodput struct {
	mu sync.Mutex
	by map[goodputKey]*goodputRing
}

type goodputKey struct {
	model string // canonical name
	class Class
}

type goodputRing struct {
	met  [goodputKept]bool
	n    int // filled, up to goodputKept
	next int
}

// Add notes whether a finished request for model, of class c, met its
// SLOs.
func (t *Goodput) Add(model string, c Class, met bool) {
	k := goodputKey{model, c}
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
func (t *Goodput) ratios(f func(k goodputKey, ratio float64)) {
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

// Describe sends the descriptions of what CollectFor exports.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.pressure
	ch <- m.goodput
}

// CollectFor exports, as scraped now, the SLO pressure of every model of
// cat that has an SLO, as pressure says, and g's goodput of every model
// cat has.
func (m *Metrics) CollectFor(ch chan<- prometheus.Metric, cat *catalog.Catalog, pressure func(model string) float64, g *Goodput) {
	for _, model := range cat.Models() {
		if model.SLO.TTFTp99 > 0 || model.SLO.TPOTp99 > 0 {
			ch <- prometheus.MustNewConstMetric(m.pressure, prometheus.GaugeValue, pressure(model.Name), model.Name)
		}
	}
	g.ratios(func(k goodputKey, ratio float64) {
		if _, ok := cat.Resolve(k.model); ok {
			ch <- prometheus.MustNewConstMetric(m.goodput, prometheus.GaugeValue, ratio, k.model, k.class.String())
		}
	})
}
