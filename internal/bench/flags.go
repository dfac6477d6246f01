package bench

// flags.go is the command line: the flags, their defaults and what each
// may be given with.

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/cli"
	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/sim"
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
	poolKind               string // --pool-kind: the spawned gateways' pool kind; empty for the profile's
	simNumBlocks           int    // --sim-num-blocks: the replicas' KV-cache capacity; 0 for the default
	simFaults              []SimFault
	gateways               int
	redisURL               string // the spawned gateways' limits.redis; empty for none
	shareLoad              bool   // the spawned gateways' router.share_load, with redisURL
	outputTokens           int
	logLevel               slog.Level // of the in-process gateway
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
	sweep, keysPath, logLevel := o.define(fs)
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
	if err := o.checkWorkload(set, *sweep); err != nil {
		return nil, err
	}
	if err := o.checkRun(); err != nil {
		return nil, err
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

// define defines the command's flags in fs, each read into o as it is
// parsed but three: --sweep, --api-keys and --log-level, which it returns.
func (o *options) define(fs *cli.FlagSet) (sweep, keysPath *string, logLevel *slog.Level) {
	fs.ChoiceVar(&o.workload, "workload", WorkloadChat, []string{WorkloadChat, WorkloadBurst, WorkloadMixed, WorkloadNoisy, WorkloadFlat, WorkloadTrace}, "the workload to send")
	fs.StringVar(&o.tracePath, "trace", "", "trace `file` to replay with --workload trace: Mooncake .jsonl or Azure .csv")
	fs.Float64Var(&o.rate, "rate", defaultRate, "offered load in requests a second, averaged over the run")
	sweep = fs.String("sweep", "", "run once per rate `A:B:STEP` from A to B, instead of --rate; with a trace, once per time scale")
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
	keysPath = fs.String("api-keys", "", "`file` of tenant=key lines: each tenant's requests use its key")
	fs.DurationVar(&o.slo.TTFT, "slo-ttft", defaultSLOTTFT, "TTFT objective of workloads without classes, and of a spawned gateway's model (0: none)")
	fs.DurationVar(&o.slo.TPOT, "slo-tpot", defaultSLOTPOT, "TPOT objective of workloads without classes, and of a spawned gateway's model (0: none)")
	fs.DurationVar(&o.drain, "drain", defaultDrain, "after the last arrival, how long requests in flight may finish before they are cut as errors (5s with --quick)")
	fs.Float64Var(&o.simSpeed, "sim-speed", 1, "with --spawn-sim, the replicas' speed: 2 is twice as fast")
	fs.IntVar(&o.outputTokens, "output-tokens", 0, "with --workload flat, every answer's length in tokens (default 16)")
	fs.BoolVar(&o.simInstant, "sim-instant", false, "with --spawn-sim, replicas answer as fast as they can (for overhead)")
	fs.ChoiceVar(&o.simProfile, "sim-profile", sim.DefaultProfile, sim.ProfileNames(), "with --spawn-sim, the replicas' engine profile (see llmgw sim --help)")
	fs.ChoiceVar(&o.poolKind, "pool-kind", "", []string{catalog.KindVLLM, catalog.KindLlamaCpp}, "with --spawn-sim, the gateway's pool kind, which sets how it models the replicas' caches: vllm (blocks) or llamacpp (a prompt per slot, as many slots as the profile runs at once); default llamacpp for --sim-profile llamacpp, else vllm")
	fs.IntVar(&o.simNumBlocks, "sim-num-blocks", 0, "with --spawn-sim, each replica's KV-cache capacity in blocks of 16 tokens (0: "+strconv.Itoa(sim.DefaultNumBlocks)+")")
	logLevel = fs.LogLevel(slog.LevelWarn, "with --spawn-sim, the least severe log lines the gateway writes to stderr")
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
	return sweep, keysPath, logLevel
}

// checkWorkload checks the workload, the flags of a trace's replay, and
// the rates to run at, and reads --sweep into o.rates; set holds the
// flags given.
func (o *options) checkWorkload(set map[string]bool, sweep string) error {
	switch o.workload {
	case WorkloadChat, WorkloadBurst, WorkloadMixed, WorkloadNoisy, WorkloadFlat:
		if o.tracePath != "" {
			return fmt.Errorf("--trace needs --workload trace")
		}
	case WorkloadTrace:
		if o.tracePath == "" {
			return fmt.Errorf("--workload trace needs --trace FILE")
		}
		if set["rate"] {
			return fmt.Errorf("--rate does not apply to a trace: its timestamps set the arrivals; use --time-scale, or --sweep over time scales")
		}
		if set["sweep"] && set["time-scale"] {
			return fmt.Errorf("give --time-scale or --sweep, not both: a trace's sweep is over time scales")
		}
	default:
		return fmt.Errorf("--workload: unknown workload %q: want chat, burst, mixed, noisy, flat or trace", o.workload)
	}
	if o.workload != WorkloadTrace && (set["time-scale"] || set["length-scale"] || set["trace-from"] || set["trace-to"]) {
		return fmt.Errorf("--time-scale, --length-scale, --trace-from and --trace-to apply only to --workload trace")
	}
	if o.traceFrom < 0 {
		return fmt.Errorf("--trace-from must not be negative, got %v", o.traceFrom)
	}
	if set["trace-to"] && o.traceTo <= o.traceFrom {
		return fmt.Errorf("--trace-to must be later than --trace-from, got %v and %v", o.traceTo, o.traceFrom)
	}
	if !(o.timeScale > 0) || !(o.lengthScale > 0) || math.IsInf(o.timeScale, 0) || math.IsInf(o.lengthScale, 0) {
		return fmt.Errorf("--time-scale and --length-scale must be positive")
	}
	if !(o.rate > 0) || math.IsInf(o.rate, 0) {
		return fmt.Errorf("--rate must be a positive number of requests a second, got %v", o.rate)
	}
	if sweep != "" {
		if set["rate"] {
			return fmt.Errorf("give --rate or --sweep, not both")
		}
		rates, err := parseSweep(sweep)
		if err != nil {
			return fmt.Errorf("--sweep: %w", err)
		}
		o.rates = rates
	}
	if o.refine < 0 {
		return fmt.Errorf("--refine must not be negative, got %d", o.refine)
	}
	if o.refine > 0 && len(o.rates) < 2 {
		return fmt.Errorf("--refine applies only to a --sweep of two loads or more")
	}
	return nil
}

// checkRun checks how long each run goes on and drains, the SLOs, the
// concurrency cap, the model and the plot's format.
func (o *options) checkRun() error {
	if o.duration < 0 || (o.durationSet && o.duration == 0 && o.workload != WorkloadTrace) {
		return fmt.Errorf("--duration must be positive, got %v", o.duration)
	}
	if o.drain < 0 {
		return fmt.Errorf("--drain must not be negative, got %v", o.drain)
	}
	if o.slo.TTFT < 0 || o.slo.TPOT < 0 {
		return fmt.Errorf("--slo-ttft and --slo-tpot must not be negative")
	}
	if o.concurrencyCap < 0 {
		return fmt.Errorf("--concurrency-cap must not be negative, got %d", o.concurrencyCap)
	}
	if o.model == "" {
		return fmt.Errorf("--model must not be empty")
	}
	if o.plotPath != "" && strings.ToLower(filepath.Ext(o.plotPath)) != ".svg" {
		return fmt.Errorf("%w, got %q", ErrPlotFormat, o.plotPath)
	}
	return nil
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
		for _, f := range []string{"virtual", "direct", "policy", "admission", "hedge", "sim-speed", "sim-speeds", "sim-instant", "sim-profile", "pool-kind", "sim-num-blocks", "sim-fault", "gateways", "redis"} {
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
