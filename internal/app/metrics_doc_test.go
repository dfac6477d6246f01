package app

// docs/reference/metrics.md's table, written from the registry of a
// running gateway: every llmgw_ and gen_ai_ metric it registers, with its type,
// labels, help and buckets. The test fails when the table and the
// registry differ, or when a page names a metric that is not registered;
// -update writes the table again.

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/keys"
	"gitea.mynodes.xyz/ilker/llmgw/internal/sim"
)

var update = flag.Bool("update", false, "write docs/reference/metrics.md's table from the registry")

const metricsDoc = "../../docs/reference/metrics.md"

// The generated part of metricsDoc lies between these lines.
const (
	generatedBegin = "<!-- generated: go test ./internal/app -run TestMetricsReference -update -->"
	generatedEnd   = "<!-- end of generated -->"
)

// recorder is a registry that keeps every collector registered with it,
// so that metrics no request has touched yet can be listed too.
type recorder struct {
	*prometheus.Registry
	collectors []prometheus.Collector
}

func (r *recorder) Register(c prometheus.Collector) error {
	if err := r.Registry.Register(c); err != nil {
		return err
	}
	r.collectors = append(r.collectors, c)
	return nil
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// metricsGatewayConfig turns on every part that registers metrics: keys
// and limits on Redis (which need not answer: requests go through while
// it does not), the shared prefix index and loads, admission, and the
// endpoint's scrapes and probes (a vllm pool).
const metricsGatewayConfig = `
server: {listen: "127.0.0.1:0", admin_listen: "127.0.0.1:0"}
router: {auth: keys}
store: {url: "memory:"}
limits: {redis: "redis://127.0.0.1:1/0", on_redis_error: open}
pools:
  - name: sim
    kind: vllm
    endpoints: [{url: %q}]
models:
  - name: chat
    pool: sim
    slo: {ttft_p99: 1s, tpot_p99: 100ms}
    admission: {enabled: true}
`

// gatewayMetrics starts a gateway that registers every metric it can,
// sends one streamed request through it, gives every labelled metric
// still without a series one, and gathers.
func gatewayMetrics(t *testing.T) []*dto.MetricFamily {
	t.Helper()
	rec := &recorder{Registry: prometheus.NewRegistry()}
	defer func(f func() registry) { newRegistry = f }(newRegistry)
	newRegistry = func() registry { return rec }

	ctx := t.Context()
	rep, err := sim.Start(ctx, sim.Config{Model: "chat", FixedTiming: true, TTFT: time.Millisecond, TPOT: time.Millisecond}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rep.Close)
	cfg, err := config.Parse(fmt.Appendf(nil, metricsGatewayConfig, rep.URL()))
	if err != nil {
		t.Fatal(err)
	}
	g, err := newGateway(ctx, cfg, "", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	t.Cleanup(func() { <-done })

	key, _, err := keys.Create(ctx, g.store, keys.Spec{Tenant: "acme/search"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+g.apiLn.Addr().String()+"/v1/chat/completions",
		strings.NewReader(`{"model":"chat","stream":true,"max_tokens":8,"messages":[{"role":"user","content":"hello"}]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200", resp.StatusCode)
	}

	// The endpoint's load shows once a scrape has read it.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if n, err := testutil.GatherAndCount(rec, "llmgw_endpoint_requests_waiting"); err == nil && n > 0 {
			break
		}
	}

	described := make(map[string]bool)
	for _, c := range rec.collectors {
		ch := make(chan *prometheus.Desc, 64)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			if name, labels := descName(d); ours(name) {
				described[name] = true
				touch(c, len(labels))
			}
		}
	}
	mfs, err := rec.Gather()
	if err != nil {
		t.Fatal(err)
	}
	mfs = slices.DeleteFunc(mfs, func(mf *dto.MetricFamily) bool { return !ours(mf.GetName()) })
	for _, mf := range mfs {
		delete(described, mf.GetName())
	}
	for name := range described {
		t.Errorf("%s is registered but exported nothing: give this test's gateway what it takes to export it", name)
	}
	return mfs
}

// ours reports whether name is a metric of llmgw's own: llmgw_, or the
// OpenTelemetry GenAI ones, gen_ai_.
func ours(name string) bool {
	return strings.HasPrefix(name, "llmgw_") || strings.HasPrefix(name, "gen_ai_")
}

var descRE = regexp.MustCompile(`fqName: "([^"]*)".*variableLabels: \{([^}]*)\}`)

// descName is d's name and variable labels, read from its String, the
// only way client_golang shows them.
func descName(d *prometheus.Desc) (string, []string) {
	m := descRE.FindStringSubmatch(d.String())
	if m == nil {
		return "", nil
	}
	if m[2] == "" {
		return m[1], nil
	}
	return m[1], strings.Split(m[2], ",")
}

// touch gives a labelled metric of c a series, with "x" for every
// label, so that it is gathered though nothing has counted into it.
func touch(c prometheus.Collector, labels int) {
	if labels == 0 {
		return
	}
	lvs := slices.Repeat([]string{"x"}, labels)
	switch v := c.(type) {
	case *prometheus.CounterVec:
		v.WithLabelValues(lvs...)
	case *prometheus.GaugeVec:
		v.WithLabelValues(lvs...)
	case *prometheus.HistogramVec:
		v.WithLabelValues(lvs...)
	case *prometheus.SummaryVec:
		v.WithLabelValues(lvs...)
	}
}

// metricsTable is the generated part of metricsDoc for mfs.
func metricsTable(mfs []*dto.MetricFamily) string {
	slices.SortFunc(mfs, func(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) })
	var b strings.Builder
	b.WriteString("| metric | type | labels | help |\n|---|---|---|---|\n")
	var buckets strings.Builder
	for _, mf := range mfs {
		var labels []string
		if ms := mf.GetMetric(); len(ms) > 0 {
			for _, l := range ms[0].GetLabel() {
				labels = append(labels, l.GetName())
			}
		}
		typ := strings.ToLower(mf.GetType().String())
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", mf.GetName(), typ, strings.Join(labels, ", "),
			strings.ReplaceAll(mf.GetHelp(), "|", `\|`))
		if mf.GetType() == dto.MetricType_HISTOGRAM && len(mf.GetMetric()) > 0 {
			var bounds []string
			for _, bk := range mf.GetMetric()[0].GetHistogram().GetBucket() {
				bounds = append(bounds, strconv.FormatFloat(bk.GetUpperBound(), 'g', -1, 64))
			}
			fmt.Fprintf(&buckets, "| `%s` | %s |\n", mf.GetName(), strings.Join(bounds, ", "))
		}
	}
	b.WriteString("\nHistogram buckets (upper bounds; `+Inf` besides):\n\n| metric | buckets |\n|---|---|\n")
	b.WriteString(buckets.String())
	return b.String()
}

// TestMetricsReference: docs/reference/metrics.md lists every metric the
// gateway registers, as it registers it.
func TestMetricsReference(t *testing.T) {
	want := metricsTable(gatewayMetrics(t))

	doc, err := os.ReadFile(metricsDoc)
	if err != nil {
		t.Fatal(err)
	}
	head, rest, ok := strings.Cut(string(doc), generatedBegin+"\n")
	got, tail, ok2 := strings.Cut(rest, generatedEnd)
	if !ok || !ok2 {
		t.Fatalf("%s has no generated part between %q and %q", metricsDoc, generatedBegin, generatedEnd)
	}
	if *update {
		if err := os.WriteFile(metricsDoc, []byte(head+generatedBegin+"\n"+want+generatedEnd+tail), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s differs from the registry (-registry +doc); run go test ./internal/app -run TestMetricsReference -update:\n%s", metricsDoc, diff)
	}
}

// metricNameRE finds what reads as a metric of llmgw's in a page.
var metricNameRE = regexp.MustCompile("`((?:llmgw|gen_ai)_[a-z0-9_]+)")

// TestDocsNameRegisteredMetrics: every llmgw_ and gen_ai_ metric a page names in code
// type is one the gateway registers.
func TestDocsNameRegisteredMetrics(t *testing.T) {
	mfs := gatewayMetrics(t)
	registered := make(map[string]bool)
	for _, mf := range mfs {
		registered[mf.GetName()] = true
	}
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob("../../docs/*/*.md")
	pages = append(append(pages, more...), "../../README.md")
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range metricNameRE.FindAllStringSubmatch(string(b), -1) {
			name := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m[1], "_bucket"), "_sum"), "_count")
			if strings.HasSuffix(name, "_") { // a family: llmgw_limits_*
				if !slices.ContainsFunc(slices.Collect(maps.Keys(registered)), func(r string) bool { return strings.HasPrefix(r, name) }) {
					t.Errorf("%s names %s*, and the gateway registers no metric so named", filepath.Base(p), name)
				}
				continue
			}
			if !registered[name] {
				t.Errorf("%s names %s, which the gateway does not register", filepath.Base(p), m[1])
			}
		}
	}
}
