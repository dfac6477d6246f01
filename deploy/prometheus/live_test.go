package prometheus

// TestRealPrometheus: a real Prometheus, with llmgw.rules.yml loaded,
// scrapes a real gateway in front of two simulated vLLM replicas while
// llmgw bench loads it. Every dashboard panel's query, every dashboard
// variable and every recording rule must return data, but those listed in
// expectedEmpty (traffic a healthy run cannot make) and those reading an
// announced metric the gateway does not export yet; no alert may fire or
// be pending; and killing one replica must fire LlmgwEndpointDown within
// its for and evaluationSlack.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// emptyReason says why a query may come back empty. afterKill: it must
// have data once a replica has been killed.
type emptyReason struct {
	why       string
	afterKill bool
}

// expectedEmpty are the queries a healthy run cannot give data, by
// "dashboard file: panel title" or recording rule name, with the reason.
var expectedEmpty = map[string]emptyReason{
	"llmgw-overview.json: Errors a second by error_type": {why: "no request fails on a healthy run"},
	"llmgw-overview.json: Alerts firing":                 {why: "no alert fires on a healthy run"},
	"llmgw-models.json: Fallbacks":                       {why: "the model has no fallbacks"},
	"llmgw-endpoints.json: Ejections":                    {why: "no endpoint is taken out until a replica is killed", afterKill: true},
	"llmgw-endpoints.json: Scrape failures":              {why: "every scrape succeeds until a replica is killed", afterKill: true},
	"llmgw-endpoints.json: Health-probe failures":        {why: "every probe succeeds until a replica is killed", afterKill: true},
	"llmgw-endpoints.json: Upstream errors":              {why: "no upstream call fails on a healthy run"},
	"llmgw-endpoints.json: Retries and hedges":           {why: "no call fails, so none is retried, and hedging is off"},
	"llmgw-tenants.json: Refused by limits and budgets":  {why: "the run's key has no limit it reaches"},
	"llmgw-tenants.json: Redis errors":                   {why: "Redis answers every admission, or limits.redis is unset (without LLMGW_TEST_REDIS)"},
	"llmgw-tenants.json: Settlements lost":               {why: "Redis answers every settlement, or limits.redis is unset (without LLMGW_TEST_REDIS)"},
	"llmgw-admission.json: Refused by admission":         {why: "the run stays within the pool's capacity, so admission refuses nothing"},
}

// evaluationSlack is how long after its for an alert may take to fire:
// the health probe's interval and timeout, a scrape and an evaluation
// (1 s each here), and a loaded machine's delays.
const evaluationSlack = 30 * time.Second

func TestRealPrometheus(t *testing.T) {
	prom := requireTool(t, "prometheus")
	if testing.Short() {
		t.Skip("a run of a few minutes; not with -short")
	}
	start := time.Now()
	progress := func(format string, args ...any) {
		t.Logf("[%5.1fs] %s", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	dir := t.TempDir()
	bin := buildLlmgw(t, dir)
	progress("built llmgw")
	sims := []*proc{startSim(t, bin, dir, "sim-0"), startSim(t, bin, dir, "sim-1")}
	progress("replicas at %s and %s", sims[0].url, sims[1].url)
	key := run(t, dir, bin, "keys", "create", "--store", "sqlite:"+filepath.Join(dir, "llmgw.db"),
		"--tenant", "acme/search/alice", "--rpm", "100000")
	gw := startGateway(t, bin, dir, sims)
	progress("gateway: API %s, admin %s", gw.api, gw.admin)
	p := startPrometheus(t, prom, dir, gw.admin)
	progress("prometheus at %s", p)
	p.waitFor(t, `up{job="llmgw"} == 1`, 30*time.Second)
	progress("prometheus scrapes the gateway")

	bench := run(t, dir, bin, "bench", "--workload", "chat", "--target", "http://"+gw.api,
		"--model", "sim-8b", "--rate", "4", "--duration", "20s", "--drain", "10s", "--api-key", key, "--seed", "1")
	progress("bench done:\n%s", bench)
	time.Sleep(5 * time.Second) // two scrapes and evaluations after the last request
	exported := gatewayFamilies(t, gw.admin)
	queries := panelQueries(t)
	queries = append(queries, ruleQueries(t)...)
	checkQueries(t, p, queries, exported, false, progress)

	if firing := p.query(t, `ALERTS`); len(firing) > 0 {
		t.Errorf("alerts on the healthy run: %v", firing)
	}
	if ever := p.query(t, fmt.Sprintf(`max_over_time(ALERTS{alertstate="firing"}[%ds])`, int(time.Since(start).Seconds())+1)); len(ever) > 0 {
		t.Errorf("alerts fired during the healthy run: %v", ever)
	}
	progress("no alert firing or pending on the healthy run")

	down := alertFor(t, "LlmgwEndpointDown")
	killed := time.Now()
	sims[1].kill()
	progress("killed replica sim-1; LlmgwEndpointDown has for %v, so it must fire within %v", down, down+evaluationSlack)
	p.waitFor(t, `ALERTS{alertname="LlmgwEndpointDown", alertstate="firing", endpoint="sim-1"}`, down+evaluationSlack)
	took := time.Since(killed)
	progress("LlmgwEndpointDown fired for sim-1 %.1fs after the kill", took.Seconds())
	if took < down {
		t.Errorf("LlmgwEndpointDown fired %v after the kill, before its for of %v", took, down)
	}
	var afterKill []query
	for _, q := range queries {
		if expectedEmpty[q.name].afterKill {
			afterKill = append(afterKill, q)
		}
	}
	checkQueries(t, p, afterKill, gatewayFamilies(t, gw.admin), true, progress)
	progress("done")
}

// query is one PromQL query a dashboard or the rules make: name says
// where it is from.
type query struct {
	name, expr string
}

// Variables a panel's query holds, and what they become here: every
// value, and a rate window of 1m (four scrapes at least, as Grafana's
// $__rate_interval is, and within the run).
var dashboardVars = strings.NewReplacer(`$__rate_interval`, `1m`, `$model`, `.*`, `$pool`, `.*`, `$tenant`, `.*`)

// labelValuesRE is a query variable's label_values(metric, label).
var labelValuesRE = regexp.MustCompile(`^label_values\((\w+), (\w+)\)$`)

// panelQueries are the queries of every panel and variable of the
// dashboards in ../grafana.
func panelQueries(t *testing.T) []query {
	t.Helper()
	files, _ := filepath.Glob("../grafana/*.json")
	if len(files) < 5 {
		t.Fatalf("%d dashboards in ../grafana", len(files))
	}
	var out []query
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			Panels []struct {
				Title   string
				Targets []struct{ Expr string }
			}
			Templating struct {
				List []struct{ Name, Definition string }
			}
		}
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		base := filepath.Base(f)
		for _, p := range d.Panels {
			for _, tg := range p.Targets {
				out = append(out, query{base + ": " + p.Title, dashboardVars.Replace(tg.Expr)})
			}
		}
		for _, v := range d.Templating.List {
			if m := labelValuesRE.FindStringSubmatch(v.Definition); m != nil {
				out = append(out, query{base + ": variable " + v.Name, fmt.Sprintf("count by (%s) (%s)", m[2], m[1])})
			}
		}
	}
	return out
}

// ruleQueries are the series each recording rule makes.
func ruleQueries(t *testing.T) []query {
	t.Helper()
	var out []query
	for _, r := range loadRules(t, rulesFile) {
		if r.Record != "" {
			out = append(out, query{r.Record, r.Record})
		}
	}
	return out
}

// alertFor is the for of the alert named name.
func alertFor(t *testing.T, name string) time.Duration {
	t.Helper()
	for _, a := range alerts(loadRules(t, rulesFile)) {
		if a.Alert == name {
			d, err := time.ParseDuration(a.For)
			if err != nil {
				t.Fatalf("%s: for %q: %v", name, a.For, err)
			}
			return d
		}
	}
	t.Fatalf("no alert %s", name)
	return 0
}

// announcedMetrics are the names of testdata/announced-metrics.txt.
func announcedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("testdata/announced-metrics.txt")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out[l] = true
		}
	}
	return out
}

// The metrics a query reads: metricRE, once labelsRE has taken out label
// names; a recording rule's name (level:metric:operations) is not one.
var (
	metricRE = regexp.MustCompile(`(?:^|[^a-zA-Z0-9_:])((?:llmgw|gen_ai)_[a-z0-9_]+)`)
	labelsRE = regexp.MustCompile(`(?:\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\))|\{[^}]*\}`)
)

// awaited are the announced metrics expr reads that the gateway does not
// export; the names the rules read stand for their rules' records.
func awaited(t *testing.T, expr string, exported, announced map[string]bool) []string {
	t.Helper()
	var out []string
	reads := metricRE.FindAllStringSubmatch(labelsRE.ReplaceAllString(expr, ""), -1)
	for _, r := range loadRules(t, rulesFile) {
		if r.Record != "" && strings.Contains(expr, r.Record) {
			reads = append(reads, metricRE.FindAllStringSubmatch(labelsRE.ReplaceAllString(r.Expr, ""), -1)...)
		}
	}
	for _, m := range reads {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m[1], "_bucket"), "_sum"), "_count")
		if announced[base] && !exported[base] && !slices.Contains(out, base) {
			out = append(out, base)
		}
	}
	return out
}

// checkQueries runs each query and reports those that came back empty:
// expected (with the reason, unless afterKill, when they must have data),
// awaiting an announced metric the gateway does not export, or a failure.
func checkQueries(t *testing.T, p promAPI, qs []query, exported map[string]bool, afterKill bool, progress func(string, ...any)) {
	t.Helper()
	announced := announcedMetrics(t)
	var ok, expected, awaiting int
	for _, q := range qs {
		if len(p.query(t, q.expr)) > 0 {
			ok++
			continue
		}
		if a := awaited(t, q.expr, exported, announced); len(a) > 0 {
			awaiting++
			progress("empty, awaiting %s, which this gateway does not export: %s: %s", strings.Join(a, ", "), q.name, q.expr)
			continue
		}
		if r, found := expectedEmpty[q.name]; found && !afterKill {
			expected++
			progress("empty, as expected (%s): %s", r.why, q.name)
			continue
		}
		t.Errorf("no data: %s: %s", q.name, q.expr)
	}
	progress("%d queries: %d with data, %d empty as expected, %d awaiting a metric", len(qs), ok, expected, awaiting)
}

// promAPI is a Prometheus's address.
type promAPI string

// query is an instant query's samples, as text; a scalar is one sample.
func (p promAPI) query(t *testing.T, expr string) []string {
	t.Helper()
	resp, err := http.Get("http://" + string(p) + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		t.Fatalf("query %s: %v", expr, err)
	}
	defer resp.Body.Close()
	var r struct {
		Status, Error string
		Data          struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r.Status != "success" {
		t.Fatalf("query %s: %v %s %s", expr, err, r.Status, r.Error)
	}
	if r.Data.ResultType == "scalar" {
		return []string{string(r.Data.Result)}
	}
	var samples []json.RawMessage
	if err := json.Unmarshal(r.Data.Result, &samples); err != nil {
		t.Fatalf("query %s: %v", expr, err)
	}
	out := make([]string, len(samples))
	for i, s := range samples {
		out[i] = string(s)
	}
	return out
}

// waitFor waits until expr has a sample, for at most d.
func (p promAPI) waitFor(t *testing.T, expr string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for len(p.query(t, expr)) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s had no sample within %v", expr, d)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// gatewayFamilies are the metric families on the gateway's /metrics.
func gatewayFamilies(t *testing.T, admin string) map[string]bool {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 3 && f[0] == "#" && f[1] == "TYPE" {
			out[f[2]] = true
		}
	}
	return out
}

// proc is a process the test started; it is killed at the test's end.
type proc struct {
	cmd  *exec.Cmd
	url  string
	done chan struct{}
}

func (p *proc) kill() {
	p.cmd.Process.Kill()
	<-p.done
}

// start starts a process, its output to dir/name.log, and kills it at
// the test's end; the log's tail is printed when the test fails.
func start(t *testing.T, dir, name string, cmd *exec.Cmd) *proc {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if cmd.Stdout == nil {
		cmd.Stdout = log
	}
	cmd.Stderr = log
	cmd.Env = gatewayEnv()
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.kill()
		log.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			t.Logf("%s's log ends:\n%s", name, b)
		}
	})
	return p
}

// gatewayEnv is the test's environment without the variables that would
// take the place of the configuration's store and Redis.
func gatewayEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "LLMGW_STORE_URL=") || strings.HasPrefix(kv, "LLMGW_REDIS_URL=")
	})
}

// run runs the llmgw binary to its end and returns its stdout.
func run(t *testing.T, dir, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env = dir, gatewayEnv()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("llmgw %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// buildLlmgw builds ./cmd/llmgw into dir.
func buildLlmgw(t *testing.T, dir string) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build llmgw: %v", err)
	}
	bin := filepath.Join(dir, "llmgw")
	cmd := exec.Command(goTool, "build", "-o", bin, "./cmd/llmgw")
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// simURLRE is the URL llmgw sim prints for its replica.
var simURLRE = regexp.MustCompile(`http://\S+/v1`)

// startSim starts one simulated replica and waits for its URL.
func startSim(t *testing.T, bin, dir, name string) *proc {
	t.Helper()
	cmd := exec.Command(bin, "sim", "--listen", "127.0.0.1:0", "--replicas", "1", "--model", "sim-8b", "--log-level", "warn")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := start(t, dir, name, cmd)
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	select {
	case l := <-lines:
		if p.url = simURLRE.FindString(l); p.url == "" {
			t.Fatalf("%s printed %q, no URL", name, l)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s printed no URL in 30s", name)
	}
	go func() {
		for range lines {
		}
	}()
	return p
}

// freeAddr is a loopback address with a port nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// gateway is a running llmgw serve's listeners.
type gateway struct {
	api, admin string
}

// gatewayConfig is the run's configuration: keys in a SQLite store, the
// two replicas in one vllm pool probed every 250ms, one model with SLOs
// it meets and admission on; with LLMGW_TEST_REDIS, limits on Redis on a
// channel of its own.
const gatewayConfig = `
server:
  listen: %q
  admin_listen: %q
router:
  auth: keys
  share_channel: %q
store:
  url: %q
  spool_dir: %q
%s
pools:
  - name: sim
    kind: vllm
    health: {interval: 250ms, timeout: 200ms}
    endpoints:
      - {url: %q, name: sim-0}
      - {url: %q, name: sim-1}
models:
  - name: sim-8b
    pool: sim
    slo: {ttft_p99: 10s, tpot_p99: 500ms}
    admission: {enabled: true}
`

// startGateway starts llmgw serve in front of sims and waits until it is
// ready.
func startGateway(t *testing.T, bin, dir string, sims []*proc) gateway {
	t.Helper()
	gw := gateway{api: freeAddr(t), admin: freeAddr(t)}
	redis := ""
	if u := os.Getenv("LLMGW_TEST_REDIS"); u != "" {
		redis = fmt.Sprintf("limits:\n  redis: %q\n", u)
	}
	cfg := fmt.Sprintf(gatewayConfig, gw.api, gw.admin, fmt.Sprintf("llmgw-promtest-%d", os.Getpid()),
		"sqlite:"+filepath.Join(dir, "llmgw.db"), filepath.Join(dir, "spool"), redis, sims[0].url, sims[1].url)
	path := filepath.Join(dir, "llmgw.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	start(t, dir, "gateway", exec.Command(bin, "serve", "--config", path))
	waitHTTP(t, "http://"+gw.admin+"/readyz")
	return gw
}

// prometheusConfig scrapes the gateway's admin listener and evaluates the
// rules every second.
const prometheusConfig = `
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - %q
scrape_configs:
  - job_name: llmgw
    static_configs:
      - targets: [%q]
`

// startPrometheus starts Prometheus with llmgw.rules.yml, scraping admin,
// and waits until it is ready.
func startPrometheus(t *testing.T, prom, dir, admin string) promAPI {
	t.Helper()
	rules, err := filepath.Abs(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(prometheusConfig, rules, admin)), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	start(t, dir, "prometheus", exec.Command(prom, "--config.file="+path,
		"--storage.tsdb.path="+filepath.Join(dir, "tsdb"), "--web.listen-address="+addr))
	waitHTTP(t, "http://"+addr+"/-/ready")
	return promAPI(addr)
}

// waitHTTP waits for u to answer 200, for at most 30s.
func waitHTTP(t *testing.T, u string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(u)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer 200 within 30s: %v", u, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
