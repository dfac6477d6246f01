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

// bench.go is the command: flags, the sweep over rates, and the outputs.

import (
	"bufio"
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/cli"
	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/sim"
	"gitea.mynodes.xyz/ilker/llmgw/internal/tokenize"
)

// Defaults of the command. A full run is a minute of arrivals at 10
// requests a second; --quick is about ten seconds, short enough that a
// whole quick run, target start and drain included, ends within 40.
const (
	defaultRate      = 10
	defaultDuration  = 60 * time.Second
	quickDuration    = 10 * time.Second
	quickSweepBudget = 20 * time.Second // arrivals of all of a quick sweep's runs together
	minQuickRun      = 2 * time.Second
	defaultDrain     = 60 * time.Second
	quickDrain       = 5 * time.Second
	quickSweepDrain  = 2 * time.Second
	defaultSLOTTFT   = 2 * time.Second
	defaultSLOTPOT   = 100 * time.Millisecond
	defaultModel     = "sim-8b" // the simulated replica's model
	maxSweepRuns     = 100
	// apiKeyEnv is read when --api-key is not given, so a key need not
	// appear on a command line.
	apiKeyEnv = "LLMGW_API_KEY"
)

// options are the parsed flags.
type options struct {
	workload, tracePath    string
	rate                   float64
	rates                  []float64 // from --sweep
	refine                 int       // --refine: runs added where a sweep crosses capacity
	duration, drain        time.Duration
	durationSet, drainSet  bool
	seed                   uint64
	quick                  bool
	jsonPath, plotPath     string
	targetURL              string
	spawn                  int
	direct                 bool
	policy, admission      string
	hedge                  float64
	timeScale, lengthScale float64
	traceFrom, traceTo     time.Duration // traceTo zero: the trace's end
	model                  string
	concurrencyCap         int
	apiKey                 string
	keys                   map[string]string // by tenant
	slo                    SLO
	simSpeed               float64
	simSpeeds              []float64 // from --sim-speeds: one per replica; nil means simSpeed for all
	simInstant             bool
	virtual                bool   // --virtual: routing and replicas on a virtual clock
	simProfile             string // --sim-profile: the replicas' engine profile
	simNumBlocks           int    // --sim-num-blocks: the replicas' KV-cache capacity; 0 for the default
	simFaults              []SimFault
	gateways               int
	redisURL               string // the spawned gateways' limits.redis; empty for none
	shareLoad              bool   // the spawned gateways' router.share_load, with redisURL
	outputTokens           int
	logLevel               slog.Level // of the in-process gateway
}

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
	texts := NewTexts(tokenize.Count)
	out := &Output{
		Workload: o.workload, Seed: o.seed, Model: o.model, Quick: o.quick,
		DurationS: o.duration.Seconds(), Direct: o.direct, Target: redactURL(o.targetURL),
	}
	trace := o.workload == WorkloadTrace
	if trace {
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
	// points are the sweep's values: offered rates, or a trace's time
	// scales; --refine adds to them as the runs show where capacity lies.
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
		spec := Spec{
			Workload: o.workload, Rate: x, Duration: o.duration, Seed: o.seed, Quick: o.quick, SLO: o.slo,
			TracePath: o.tracePath, TimeScale: o.timeScale, LengthScale: o.lengthScale, From: o.traceFrom, To: o.traceTo, OutputTokens: o.outputTokens,
		}
		label := fmt.Sprintf("%s rate %g", o.workload, x)
		if trace {
			spec.Rate, spec.TimeScale = 0, x
			label = "trace " + o.tracePath
			if sweep {
				label += fmt.Sprintf(" time scale %g", x)
			}
		}
		if sweep {
			label = fmt.Sprintf("[%d/%d] %s", i+1, runs, label)
		}
		run, err := runOnce(ctx, o, texts, spec, label, stderr)
		if err != nil {
			return err
		}
		writeErrors(stderr, run.results)
		all = append(all, run.results)
		ceiling.add(run.ceiling)
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

const about = `Sends a seeded, open-loop workload and reports latency, goodput and prefix
hits. --rate is requests a second averaged over the run, for every workload
(chat starts sessions at rate / mean turns); a trace's timestamps set its
arrivals instead. Latencies in the table are milliseconds; the --json file
has seconds.`

// parseFlags reads the command line; help goes to stdout.
func parseFlags(args []string, stdout io.Writer) (*options, error) {
	o := &options{}
	fs := cli.NewFlagSet("bench", "[flags] (--target URL | --spawn-sim N)", about, stdout)
	fs.ChoiceVar(&o.workload, "workload", WorkloadChat, []string{WorkloadChat, WorkloadBurst, WorkloadMixed, WorkloadNoisy, WorkloadFlat, WorkloadTrace}, "the workload to send")
	fs.StringVar(&o.tracePath, "trace", "", "trace `file` to replay with --workload trace: Mooncake .jsonl or Azure .csv")
	fs.Float64Var(&o.rate, "rate", defaultRate, "offered load in requests a second, averaged over the run")
	sweep := fs.String("sweep", "", "run once per rate `A:B:STEP` from A to B, instead of --rate; with a trace, once per time scale")
	fs.IntVar(&o.refine, "refine", 0, "after --sweep, `N` more runs, each halfway between the two loads capacity at SLO lies between, halving that interval")
	fs.DurationVar(&o.duration, "duration", defaultDuration, "how long arrivals go on per run (10s with --quick; for trace, unless set, to --trace-to or the trace's end)")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the workload: the same seed sends the same requests")
	fs.BoolVar(&o.quick, "quick", false, "a short representative run, under 40 seconds end to end")
	fs.StringVar(&o.jsonPath, "json", "", "write the figures as JSON to `file`")
	fs.StringVar(&o.plotPath, "plot", "", "write an SVG plot to `file` (.svg; .png is refused)")
	fs.StringVar(&o.targetURL, "target", "", "base `URL` of a gateway or backend, with or without /v1")
	fs.IntVar(&o.spawn, "spawn-sim", 0, "start `N` simulated replicas in-process behind an in-process gateway")
	fs.BoolVar(&o.virtual, "virtual", false, "with --spawn-sim, replay on a virtual clock: the gateway's routing in front of the replicas' engines, without HTTP, so a run takes the CPU time of its picks and steps rather than its length")
	fs.BoolVar(&o.direct, "direct", false, "with --spawn-sim, send straight to the first replica, without the gateway")
	fs.ChoiceVar(&o.policy, "policy", catalog.PolicyAuto, catalog.Policies, "with --spawn-sim, the gateway's routing policy")
	fs.ChoiceVar(&o.admission, "admission", "off", []string{"on", "off"}, "with --spawn-sim, the gateway's SLO-aware admission")
	fs.Float64Var(&o.hedge, "hedge", 0, "with --spawn-sim, hedge a request with no first token after `X` times its predicted TTFT (the pool's hedge.after; 0: off)")
	fs.Float64Var(&o.timeScale, "time-scale", 1, "trace replay: >1 sends faster (inter-arrival times divided by X)")
	fs.DurationVar(&o.traceFrom, "trace-from", 0, "trace replay: start at this point of the trace's own clock (before --time-scale); earlier requests are not sent")
	fs.DurationVar(&o.traceTo, "trace-to", 0, "trace replay: stop at this point of the trace's own clock; without --duration, every time scale of a sweep replays the same requests")
	fs.Float64Var(&o.lengthScale, "length-scale", 1, "trace replay: >1 shortens requests (token counts divided by X, a block becomes 512/X tokens)")
	fs.StringVar(&o.model, "model", defaultModel, "model `name` sent in every request")
	fs.IntVar(&o.concurrencyCap, "concurrency-cap", 0, "most requests in flight; arrivals past it are dropped and counted (0: no cap)")
	fs.StringVar(&o.apiKey, "api-key", "", "bearer `key` for every request (unset: $"+apiKeyEnv+")")
	keysPath := fs.String("api-keys", "", "`file` of tenant=key lines: each tenant's requests use its key")
	fs.DurationVar(&o.slo.TTFT, "slo-ttft", defaultSLOTTFT, "TTFT objective of workloads without classes, and of a spawned gateway's model (0: none)")
	fs.DurationVar(&o.slo.TPOT, "slo-tpot", defaultSLOTPOT, "TPOT objective of workloads without classes, and of a spawned gateway's model (0: none)")
	fs.DurationVar(&o.drain, "drain", defaultDrain, "after the last arrival, how long requests in flight may finish before they are cut as errors (5s with --quick)")
	fs.Float64Var(&o.simSpeed, "sim-speed", 1, "with --spawn-sim, the replicas' speed: 2 is twice as fast")
	fs.IntVar(&o.outputTokens, "output-tokens", 0, "with --workload flat, every answer's length in tokens (default 16)")
	fs.BoolVar(&o.simInstant, "sim-instant", false, "with --spawn-sim, replicas answer as fast as they can (for overhead)")
	fs.ChoiceVar(&o.simProfile, "sim-profile", sim.DefaultProfile, sim.ProfileNames(), "with --spawn-sim, the replicas' engine profile (see llmgw sim --help)")
	fs.IntVar(&o.simNumBlocks, "sim-num-blocks", 0, "with --spawn-sim, each replica's KV-cache capacity in blocks of 16 tokens (0: "+strconv.Itoa(sim.DefaultNumBlocks)+")")
	logLevel := fs.LogLevel(slog.LevelWarn, "with --spawn-sim, the least severe log lines the gateway writes to stderr")
	fs.Func("sim-speeds", "with --spawn-sim, each replica's speed, a `list` with one per replica such as 1,1,1,0.667 (instead of --sim-speed)", func(v string) error {
		speeds, err := parseSpeeds(v)
		o.simSpeeds = speeds
		return err
	})
	fs.Func("sim-fault", "with --spawn-sim, a `fault` from each run's start: R:kill@T crashes replica R (0-based) for good, R:stall@T+D hangs it for D; repeatable", func(v string) error {
		f, err := parseSimFault(v)
		o.simFaults = append(o.simFaults, f)
		return err
	})
	fs.IntVar(&o.gateways, "gateways", 1, "with --spawn-sim, `N` gateways in front of the same replicas; each request goes to one at random (from --seed)")
	fs.StringVar(&o.redisURL, "redis", "", "with --spawn-sim, a Redis `URL` (redis://host:port/db) the gateways share, as limits.redis: each routes by where any of them sent a prompt, and by what all of them have in flight")
	fs.BoolVar(&o.shareLoad, "share-load", true, "with --redis, the gateways share what each has in flight at each replica (router.share_load)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if err := fs.NoArgs(); err != nil {
		return nil, err
	}
	o.logLevel = *logLevel
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	o.durationSet, o.drainSet = set["duration"], set["drain"]

	switch o.workload {
	case WorkloadChat, WorkloadBurst, WorkloadMixed, WorkloadNoisy, WorkloadFlat:
		if o.tracePath != "" {
			return nil, fmt.Errorf("--trace needs --workload trace")
		}
	case WorkloadTrace:
		if o.tracePath == "" {
			return nil, fmt.Errorf("--workload trace needs --trace FILE")
		}
		if set["rate"] {
			return nil, fmt.Errorf("--rate does not apply to a trace: its timestamps set the arrivals; use --time-scale, or --sweep over time scales")
		}
		if set["sweep"] && set["time-scale"] {
			return nil, fmt.Errorf("give --time-scale or --sweep, not both: a trace's sweep is over time scales")
		}
	default:
		return nil, fmt.Errorf("--workload: unknown workload %q: want chat, burst, mixed, noisy, flat or trace", o.workload)
	}
	if o.workload != WorkloadTrace && (set["time-scale"] || set["length-scale"] || set["trace-from"] || set["trace-to"]) {
		return nil, fmt.Errorf("--time-scale, --length-scale, --trace-from and --trace-to apply only to --workload trace")
	}
	if o.traceFrom < 0 {
		return nil, fmt.Errorf("--trace-from must not be negative, got %v", o.traceFrom)
	}
	if set["trace-to"] && o.traceTo <= o.traceFrom {
		return nil, fmt.Errorf("--trace-to must be later than --trace-from, got %v and %v", o.traceTo, o.traceFrom)
	}
	if !(o.timeScale > 0) || !(o.lengthScale > 0) || math.IsInf(o.timeScale, 0) || math.IsInf(o.lengthScale, 0) {
		return nil, fmt.Errorf("--time-scale and --length-scale must be positive")
	}
	if !(o.rate > 0) || math.IsInf(o.rate, 0) {
		return nil, fmt.Errorf("--rate must be a positive number of requests a second, got %v", o.rate)
	}
	if *sweep != "" {
		if set["rate"] {
			return nil, fmt.Errorf("give --rate or --sweep, not both")
		}
		rates, err := parseSweep(*sweep)
		if err != nil {
			return nil, fmt.Errorf("--sweep: %w", err)
		}
		o.rates = rates
	}
	if o.refine < 0 {
		return nil, fmt.Errorf("--refine must not be negative, got %d", o.refine)
	}
	if o.refine > 0 && len(o.rates) < 2 {
		return nil, fmt.Errorf("--refine applies only to a --sweep of two loads or more")
	}
	if o.duration < 0 || (o.durationSet && o.duration == 0 && o.workload != WorkloadTrace) {
		return nil, fmt.Errorf("--duration must be positive, got %v", o.duration)
	}
	if o.drain < 0 {
		return nil, fmt.Errorf("--drain must not be negative, got %v", o.drain)
	}
	if o.slo.TTFT < 0 || o.slo.TPOT < 0 {
		return nil, fmt.Errorf("--slo-ttft and --slo-tpot must not be negative")
	}
	if o.concurrencyCap < 0 {
		return nil, fmt.Errorf("--concurrency-cap must not be negative, got %d", o.concurrencyCap)
	}
	if o.model == "" {
		return nil, fmt.Errorf("--model must not be empty")
	}
	if o.plotPath != "" && strings.ToLower(filepath.Ext(o.plotPath)) != ".svg" {
		return nil, fmt.Errorf("%w, got %q", ErrPlotFormat, o.plotPath)
	}
	if err := o.checkTarget(set); err != nil {
		return nil, err
	}
	o.applyQuick()
	if o.apiKey == "" {
		o.apiKey = os.Getenv(apiKeyEnv)
	}
	if *keysPath != "" {
		keys, err := readKeys(*keysPath)
		if err != nil {
			return nil, err
		}
		o.keys = keys
	}
	return o, nil
}

// checkTarget checks that exactly one target is named and that the
// spawn-only flags come with --spawn-sim.
func (o *options) checkTarget(set map[string]bool) error {
	switch {
	case o.targetURL == "" && o.spawn == 0:
		return fmt.Errorf("name a target: --target URL or --spawn-sim N")
	case o.targetURL != "" && o.spawn != 0:
		return fmt.Errorf("give --target or --spawn-sim, not both")
	case o.spawn < 0:
		return fmt.Errorf("--spawn-sim must be a positive number of replicas, got %d", o.spawn)
	}
	if o.targetURL != "" {
		for _, f := range []string{"virtual", "direct", "policy", "admission", "hedge", "sim-speed", "sim-speeds", "sim-instant", "sim-profile", "sim-num-blocks", "sim-fault", "gateways", "redis"} {
			if set[f] {
				return fmt.Errorf("--%s applies only with --spawn-sim", f)
			}
		}
		u, err := normaliseURL(o.targetURL)
		if err != nil {
			return err
		}
		o.targetURL = u
	}
	if o.simNumBlocks < 0 {
		return fmt.Errorf("--sim-num-blocks must not be negative, got %d", o.simNumBlocks)
	}
	if o.simInstant && set["sim-profile"] {
		return fmt.Errorf("give --sim-instant or --sim-profile, not both: instant replicas have no engine timing")
	}
	if o.admission != "on" && o.admission != "off" {
		return fmt.Errorf("--admission must be on or off, got %q", o.admission)
	}
	if !(o.simSpeed > 0) || math.IsInf(o.simSpeed, 0) {
		return fmt.Errorf("--sim-speed must be positive, got %v", o.simSpeed)
	}
	if o.simSpeeds != nil {
		if set["sim-speed"] {
			return fmt.Errorf("give --sim-speed or --sim-speeds, not both")
		}
		if len(o.simSpeeds) != o.spawn {
			return fmt.Errorf("--sim-speeds lists %d speeds for --spawn-sim %d: give one per replica", len(o.simSpeeds), o.spawn)
		}
	}
	if err := checkFaults(o.simFaults, o.spawn); err != nil {
		return err
	}
	if o.gateways < 1 {
		return fmt.Errorf("--gateways must be at least 1, got %d", o.gateways)
	}
	if o.direct && (set["policy"] || set["admission"] || set["hedge"] || set["gateways"] || set["redis"]) {
		return fmt.Errorf("--direct bypasses the gateway: --policy, --admission, --hedge, --gateways and --redis do not apply")
	}
	if o.virtual && (o.direct || o.simInstant || o.admission == "on" || o.hedge != 0 || o.gateways != 1 || o.redisURL != "" || len(o.simFaults) > 0) {
		return fmt.Errorf("--virtual replays routing alone, through one gateway: --direct, --sim-instant, --admission on, --hedge, --gateways, --redis and --sim-fault do not apply")
	}
	if o.hedge != 0 && !(o.hedge > 1 && o.hedge <= config.MaxHedgeAfter) {
		return fmt.Errorf("--hedge must be 0 (off) or above 1 and at most %v, got %v", config.MaxHedgeAfter, o.hedge)
	}
	if set["output-tokens"] && (o.workload != WorkloadFlat || o.outputTokens <= 0) {
		return fmt.Errorf("--output-tokens takes a positive length, and applies only to --workload flat")
	}
	return nil
}

// applyQuick shortens the run for --quick where the flags left the
// defaults: a single run's arrivals to quickDuration, a sweep's to a share
// of quickSweepBudget each, and the drain.
func (o *options) applyQuick() {
	if !o.quick {
		if o.workload == WorkloadTrace && !o.durationSet {
			o.duration = 0 // the whole trace
		}
		return
	}
	if !o.durationSet {
		o.duration = quickDuration
		if n := len(o.rates) + o.refine; n > 1 {
			o.duration = max(minQuickRun, quickSweepBudget/time.Duration(n))
		}
	}
	if !o.drainSet {
		o.drain = quickDrain
		if len(o.rates) > 1 {
			o.drain = quickSweepDrain
		}
	}
}

// parseSpeeds reads a comma-separated list of positive speeds.
func parseSpeeds(s string) ([]float64, error) {
	var speeds []float64
	for _, p := range strings.Split(s, ",") {
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || !(f > 0) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("want positive speeds separated by commas, such as 1,1,0.5, got %q", s)
		}
		speeds = append(speeds, f)
	}
	return speeds, nil
}

// parseSweep reads A:B:STEP as the rates A, A+STEP, ... up to B.
func parseSweep(s string) ([]float64, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return nil, fmt.Errorf("want A:B:STEP, got %q", s)
	}
	var v [3]float64
	for i, p := range parts {
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || !(f > 0) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("want positive numbers A:B:STEP, got %q", s)
		}
		v[i] = f
	}
	from, to, step := v[0], v[1], v[2]
	if to < from {
		return nil, fmt.Errorf("B must not be below A in %q", s)
	}
	var rates []float64
	// Rates are computed from the index, not summed, so 0.1 steps do not
	// drift; the epsilon keeps B itself when it lies on the grid.
	for i := 0; ; i++ {
		r := from + float64(i)*step
		if r > to*(1+1e-9) {
			break
		}
		if len(rates) == maxSweepRuns {
			return nil, fmt.Errorf("%q makes more than %d runs", s, maxSweepRuns)
		}
		rates = append(rates, math.Round(r*1e9)/1e9)
	}
	return rates, nil
}

// normaliseURL makes a target base URL end in /v1, without a trailing
// slash.
func normaliseURL(raw string) (string, error) {
	u := strings.TrimRight(strings.TrimSpace(raw), "/")
	if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		return "", fmt.Errorf("--target must be an http:// or https:// URL, got %q", raw)
	}
	u = strings.TrimSuffix(u, "/chat/completions")
	if !strings.HasSuffix(u, "/v1") {
		u += "/v1"
	}
	return u, nil
}

// readKeys reads tenant=key lines; blank lines and lines starting with #
// are skipped. Errors name the line, never the key.
func readKeys(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--api-keys: %w", err)
	}
	defer f.Close()
	keys := map[string]string{}
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' {
			continue
		}
		tenant, key, ok := strings.Cut(text, "=")
		tenant, key = strings.TrimSpace(tenant), strings.TrimSpace(key)
		if !ok || tenant == "" || key == "" {
			return nil, fmt.Errorf("--api-keys %s line %d: want tenant=key", path, line)
		}
		if _, dup := keys[tenant]; dup {
			return nil, fmt.Errorf("--api-keys %s line %d: tenant %q given twice", path, line, tenant)
		}
		keys[tenant] = key
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--api-keys: %w", err)
	}
	return keys, nil
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
