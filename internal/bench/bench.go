// Package bench is `llmgw bench`: a seeded, open-loop workload driver that
// every performance figure of llmgw is measured with. It generates a
// workload (chat sessions, bursts, mixed tenants and classes, a noisy
// tenant among equals, a flat overhead load, or a replayed production
// trace), sends it on schedule to a
// gateway or backend, or to simulated replicas it starts itself, streams
// every answer, and reports TTFT, TPOT, inter-token latency, end-to-end
// latency, goodput against SLOs and the prefix hit rate, overall, per class
// and per tenant.
package bench

// bench.go is the command: the sweep over rates, each run, and the
// outputs. flags.go reads its command line.

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sync"

	"gitea.mynodes.xyz/ilker/llmgw/internal/cli"
	"gitea.mynodes.xyz/ilker/llmgw/internal/tokenize"
)

// Command runs `llmgw bench` with args (the flags after "bench"): the
// table goes to stdout, progress and diagnostics to stderr.
func Command(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	// Progress, faults and the in-process gateways' logs all write to
	// stderr from goroutines of their own.
	stderr = &lockedWriter{w: stderr}
	o, err := parseFlags(args, stdout)
	if err != nil {
		return cli.BadUsage("bench", err)
	}
	out := newOutput(o)
	single, err := runSweep(ctx, o, out, stderr)
	if err != nil {
		return err
	}
	if o.jsonPath != "" {
		if err := WriteJSON(o.jsonPath, out); err != nil {
			return err
		}
	}
	if o.plotPath != "" {
		if err := WritePlot(o.plotPath, out, single); err != nil {
			return err
		}
	}
	if err := WriteTable(stdout, out); err != nil {
		return err
	}
	return ctx.Err()
}

// newOutput is the report as the flags set it out, before any run: the
// workload, the target, and the pool a spawned target has.
func newOutput(o *options) *Output {
	out := &Output{
		Workload: o.workload, Seed: o.seed, Model: o.model, Quick: o.quick,
		DurationS: o.duration.Seconds(), Direct: o.direct, Target: redactURL(o.targetURL),
	}
	if o.workload == WorkloadTrace {
		out.Trace, out.TimeScale, out.LenScale = o.tracePath, o.timeScale, o.lengthScale
		out.TraceFromS, out.TraceToS = o.traceFrom.Seconds(), o.traceTo.Seconds()
	}
	if o.spawn > 0 {
		out.Target = fmt.Sprintf("spawn-sim:%d", o.spawn)
		out.Pool = &Pool{Replicas: o.spawn, Speeds: o.replicaSpeeds(), Instant: o.simInstant, Virtual: o.virtual}
		if !o.simInstant {
			out.Pool.Profile = o.simProfile
		}
		out.Pool.NumBlocks = o.simNumBlocks
		if !o.direct {
			out.Policy, out.Admission, out.Pool.Gateways = o.policy, o.admission, o.gateways
			out.Pool.SharedIndex = o.redisURL != ""
			out.Pool.SharedLoad = o.redisURL != "" && o.shareLoad
		}
		out.Faults = o.simFaults
	}
	return out
}

// runSweep runs the workload once at each of the sweep's points, offered
// rates or a trace's time scales, or once at --rate or --time-scale, and
// puts what the runs measured in out. --refine adds points as the runs
// show where capacity lies. It returns a single run's results; nil for a
// sweep.
func runSweep(ctx context.Context, o *options, out *Output, stderr io.Writer) ([]Result, error) {
	texts := NewTexts(tokenize.Count)
	trace := o.workload == WorkloadTrace
	points := o.rates
	if points == nil {
		points = []float64{o.rate}
		if trace {
			points = []float64{o.timeScale}
		}
	}
	sweep := len(points) > 1
	if sweep && trace {
		out.TimeScale = 0 // each run has its own
	}
	var all [][]Result // each run's results
	var single []Result
	var ceiling prefixCeiling
	runs := len(points) + o.refine // at most
	for i := 0; i < len(points); i++ {
		x := points[i]
		spec, label := o.point(x, i, runs, sweep)
		run, err := runOnce(ctx, o, texts, spec, label, stderr)
		if err != nil {
			return nil, err
		}
		writeErrors(stderr, run.results)
		all = append(all, run.results)
		ceiling.add(run.ceiling)
		addShares(out, o, &run)
		if sweep {
			r := Run{Rate: x, Report: Summarise(run.results)}
			if trace {
				r.Rate, r.TimeScale, r.PrefixHitCeiling = run.offered, x, run.ceiling.share()
			}
			out.Runs = append(out.Runs, r)
			fmt.Fprintln(stderr, runLine(label, &r))
			if i == len(points)-1 && i+1 < runs {
				if next, ok := refinement(out.Runs, trace); ok {
					points = append(points, next)
				}
			}
		} else {
			single = run.results
		}
		if ctx.Err() != nil {
			break
		}
	}
	// Runs added by --refine go among the swept ones, by load.
	slices.SortStableFunc(out.Runs, func(a, b Run) int { return cmp.Compare(a.load(trace), b.load(trace)) })
	out.Report = SummariseRuns(all...)
	if trace {
		out.PrefixHitCeiling = ceiling.share()
	}
	if !sweep && !trace {
		out.Rate = points[0]
	}
	if sweep {
		c := capacityOf(out.Runs, trace)
		out.Capacity = &c
	}
	return single, nil
}

// point is the workload and the progress label of the run at x, an
// offered rate or a trace's time scale. In a sweep, the label counts the
// run, the i-th from 0, among at most runs.
func (o *options) point(x float64, i, runs int, sweep bool) (Spec, string) {
	spec := Spec{
		Workload: o.workload, Rate: x, Duration: o.duration, Seed: o.seed, Quick: o.quick, SLO: o.slo,
		TracePath: o.tracePath, TimeScale: o.timeScale, LengthScale: o.lengthScale, From: o.traceFrom, To: o.traceTo, OutputTokens: o.outputTokens,
	}
	label := fmt.Sprintf("%s rate %g", o.workload, x)
	if o.workload == WorkloadTrace {
		spec.Rate, spec.TimeScale = 0, x
		label = "trace " + o.tracePath
		if sweep {
			label += fmt.Sprintf(" time scale %g", x)
		}
	}
	if sweep {
		label = fmt.Sprintf("[%d/%d] %s", i+1, runs, label)
	}
	return spec, label
}

// addShares adds to out's totals what a run's hedges raced, with
// --hedge, and what its gateways shared, with --redis.
func addShares(out *Output, o *options, run *oneRun) {
	if o.hedge > 0 {
		if out.Hedges == nil {
			out.Hedges = &Hedges{}
		}
		out.Hedges.add(run.hedges)
	}
	if o.redisURL != "" {
		if out.Placements == nil {
			out.Placements = &Shared{}
		}
		out.Placements.add(run.placements)
		if o.shareLoad {
			if out.LoadMessages == nil {
				out.LoadMessages = &Shared{}
			}
			out.LoadMessages.add(run.loadMessages)
		}
	}
}

// runLine is a sweep's progress line for one finished run.
func runLine(label string, r *Run) string {
	return fmt.Sprintf("%s: goodput %.3f, ttft p99 %sms, tpot p99 %sms, %d errors, %d rejected, %d dropped",
		label, r.Goodput, ms(r.TTFTp99), ms(r.TPOTp99), r.Errors, r.Rejected, r.Dropped)
}

// oneRun is what runOnce measured.
type oneRun struct {
	results []Result
	// offered is the requests a second the workload scheduled: its count
	// over the time from the run's start to its last arrival.
	offered float64
	ceiling prefixCeiling
	hedges  Hedges // with --hedge
	// placements and loadMessages are what the gateways shared, with
	// --redis.
	placements, loadMessages Shared
}

// runOnce generates the workload of spec, starts the target, sends the
// workload with the faults scheduled from its start, and stops the target.
func runOnce(ctx context.Context, o *options, texts *Texts, spec Spec, label string, stderr io.Writer) (oneRun, error) {
	reqs, err := Generate(spec, texts)
	if err != nil {
		return oneRun{}, err
	}
	if len(reqs) == 0 {
		if spec.Workload == WorkloadTrace {
			return oneRun{}, fmt.Errorf("no request of %s lies between --trace-from and --trace-to, or within --duration", spec.TracePath)
		}
		return oneRun{}, fmt.Errorf("the %s workload at rate %g over %v has no requests; raise --rate or --duration", o.workload, spec.Rate, o.duration)
	}
	run := oneRun{offered: spec.Rate, ceiling: ceilingOf(reqs)}
	if last := reqs[len(reqs)-1].At; spec.Workload == WorkloadTrace && last > 0 {
		run.offered = float64(len(reqs)) / last.Seconds()
	}
	if o.virtual {
		run.results, err = runVirtual(o, reqs)
		return run, err
	}
	tgt, err := openTarget(ctx, o, stderr)
	if err != nil {
		return oneRun{}, err
	}
	defer tgt.Close()
	urls := make([]string, len(tgt.URLs))
	for i, u := range tgt.URLs {
		urls[i] = u + "/chat/completions"
	}
	d := &Driver{
		Client: newClient(), URLs: urls, Seed: o.seed, Model: o.model,
		APIKey: o.apiKey, Keys: o.keys, Cap: o.concurrencyCap, Drain: o.drain,
		Progress: NewProgress(len(reqs)),
	}
	defer d.Client.CloseIdleConnections()
	showCtx, stopShow := context.WithCancel(ctx)
	shown := make(chan struct{})
	go func() { d.Progress.Show(showCtx, stderr, label); close(shown) }()
	stopFaults := tgt.startFaults(o.simFaults, stderr)
	run.results = d.Run(ctx, reqs)
	stopFaults()
	stopShow()
	<-shown
	if o.hedge > 0 {
		if run.hedges, err = tgt.hedges(); err != nil {
			return oneRun{}, err
		}
	}
	if o.redisURL != "" {
		if run.placements, run.loadMessages, err = tgt.quietShares(ctx); err != nil {
			return oneRun{}, err
		}
		if !o.shareLoad {
			run.loadMessages = Shared{}
		}
	}
	return run, nil
}

// newClient is an HTTP client for many concurrent streams to one host:
// connections are kept for reuse, no body is compressed, and requests are
// bounded by their contexts rather than a client timeout.
func newClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 0
	tr.MaxIdleConnsPerHost = 4096
	tr.DisableCompression = true
	tr.ForceAttemptHTTP2 = false
	return &http.Client{Transport: tr}
}

// redactURL is a URL fit for a report: a password in it is masked.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// lockedWriter makes w safe to write from several goroutines, one write
// at a time.
type lockedWriter struct {
	mu sync.Mutex // protects w
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
