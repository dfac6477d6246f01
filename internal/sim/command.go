// `llmgw sim`: the simulator as a command, its flags mapped onto Config.

package sim

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"gitea.mynodes.xyz/ilker/llmgw/internal/cli"
)

// DefaultListen is where `llmgw sim` listens without --listen: vLLM's port.
const DefaultListen = "127.0.0.1:8000"

const about = `Runs simulated vLLM replicas serving the OpenAI API: continuous batching
with chunked prefill, a KV cache with a prefix cache, a bounded waiting queue
and vLLM's metrics, or fixed timing, and faults on demand. Each replica's
URL is printed on stdout.

--profile picks the engine it behaves like; the flags below show chunked's
values, and a flag given wins over the profile's:
`

// simFlags are the flags of `llmgw sim` that are not fields of Config.
type simFlags struct {
	listen   *string
	replicas *int
	seed     *uint64
	profile  *string
	logLevel *slog.Level
}

// newFlags defines the flags of `llmgw sim` over cfg, each defaulting to
// what cfg holds.
func newFlags(cfg *Config, stdout io.Writer) (*cli.FlagSet, simFlags) {
	fs := cli.NewFlagSet("sim", "[flags]", about+profilesHelp(), stdout)
	var sf simFlags
	sf.listen = fs.String("listen", DefaultListen, "`address` of the first replica; the others take the ports after it (port 0: any free ports)")
	sf.replicas = fs.Int("replicas", 1, "number of replicas")
	sf.profile = fs.Choice("profile", DefaultProfile, ProfileNames(), "the engine profile: timing, limits and prefix cache")
	fs.StringVar(&cfg.Model, "model", cfg.Model, "model `name` served")
	fs.Float64Var(&cfg.Speed, "speed", cfg.Speed, "speed factor: 2 runs everything twice as fast")
	fs.IntVar(&cfg.MaxSeqs, "max-seqs", cfg.MaxSeqs, "most sequences running at once")
	fs.IntVar(&cfg.MaxBatchedTokens, "max-batched-tokens", cfg.MaxBatchedTokens, "token budget of one step, decodes and prefill chunks")
	fs.IntVar(&cfg.BlockSize, "block-size", cfg.BlockSize, "tokens per KV-cache block")
	fs.IntVar(&cfg.NumBlocks, "num-blocks", cfg.NumBlocks, "KV-cache capacity in blocks")
	fs.IntVar(&cfg.MaxWaiting, "max-waiting", cfg.MaxWaiting, "longest waiting queue; past it requests get 429")
	fs.IntVar(&cfg.MaxModelLen, "max-model-len", cfg.MaxModelLen, "longest prompt plus max_tokens")
	fs.DurationVar(&cfg.StepBase, "step-base", cfg.StepBase, "batch timing: fixed cost of a step")
	fs.DurationVar(&cfg.StepPerToken, "step-per-token", cfg.StepPerToken, "batch timing: added cost of each decode in a step")
	fs.DurationVar(&cfg.StepPerPrefillToken, "step-per-prefill-token", cfg.StepPerPrefillToken, "batch timing: added cost of each prompt token in a step (0: --step-per-token's)")
	fs.DurationVar(&cfg.TTFT, "ttft", cfg.TTFT, "fixed timing: time to first token before prefill")
	fs.DurationVar(&cfg.TPOT, "tpot", cfg.TPOT, "fixed timing: time per output token")
	fs.DurationVar(&cfg.PrefillPerToken, "prefill-per-token", cfg.PrefillPerToken, "fixed timing: added time to first token per uncached prompt token")
	sf.seed = fs.Uint64("seed", 0, "varies output text and lengths: the same seed gives the same answers")
	f := &cfg.Faults
	fs.Float64Var(&f.ErrorRate, "error-rate", 0, "fault: share of requests (0-1) answered with an error")
	fs.IntVar(&f.ErrorStatus, "error-status", 0, "fault: the error's status, 429, 500 or 503 (0: any of them)")
	fs.IntVar(&f.DieAfterTokens, "die-after", 0, "fault: cut the connection after this many output tokens (0: never)")
	fs.DurationVar(&f.StallFirstToken, "stall", 0, "fault: hold every request this long before queueing it")
	fs.BoolVar(&f.Refuse, "refuse", false, "fault: refuse connections")
	fs.DurationVar(&f.RefuseFor, "refuse-for", 0, "fault: with --refuse, accept connections again after this long")
	fs.Float64Var(&f.Slow, "slow", 0, "fault: multiply every step's duration by this")
	sf.logLevel = fs.LogLevel(slog.LevelInfo, "the least severe log lines written to stderr: the replicas' HTTP server errors are warnings")
	return fs, sf
}

// profileConfig is the Config `llmgw sim` starts from under profile p,
// before the flags given.
func profileConfig(p Profile) Config {
	return p.Apply(Config{
		Model: DefaultModel, Speed: 1, BlockSize: DefaultBlockSize, NumBlocks: DefaultNumBlocks,
		MaxWaiting: DefaultMaxWaiting, MaxModelLen: DefaultMaxModelLen,
	})
}

// parseFlags reads the command line into a Config: the profile's, with
// the flags given set over it. Setting any of --ttft, --tpot or
// --prefill-per-token, even to 0, selects fixed timing.
func parseFlags(args []string, stdout io.Writer) (Config, simFlags, error) {
	def, _ := ProfileNamed(DefaultProfile)
	// The first pass finds the profile, and shows its values in --help.
	cfg := profileConfig(def)
	fs, sf := newFlags(&cfg, stdout)
	if err := fs.Parse(args); err != nil {
		return cfg, sf, err
	}
	if err := fs.NoArgs(); err != nil {
		return cfg, sf, err
	}
	p, err := ProfileNamed(*sf.profile)
	if err != nil {
		return cfg, sf, fs.Errorf("--profile: %v", err)
	}
	cfg = profileConfig(p)
	fs, sf = newFlags(&cfg, io.Discard)
	if err := fs.Parse(args); err != nil {
		return cfg, sf, err
	}
	fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "ttft", "tpot", "prefill-per-token":
			cfg.FixedTiming = true
		}
	})
	if *sf.replicas < 1 {
		return cfg, sf, fs.Errorf("--replicas: must be at least 1, got %d", *sf.replicas)
	}
	return cfg, sf, nil
}

// Command runs `llmgw sim` with args (the flags after "sim"): it starts the
// replicas, prints where each listens to stdout, and serves until ctx ends.
func Command(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, sf, err := parseFlags(args, stdout)
	if err != nil {
		return err
	}
	cfg.Seed = int64(*sf.seed) // the same bits: replicas mix the seed as a uint64
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: *sf.logLevel}))
	if err := cfg.Faults.Validate(); err != nil {
		return cli.BadUsage("sim", faultFlagError(err))
	}

	rs, err := StartReplicas(ctx, cfg, *sf.replicas, *sf.listen)
	if err != nil {
		return err
	}
	mode := "batch timing"
	if cfg.withDefaults().FixedTiming {
		mode = fmt.Sprintf("fixed timing: ttft %v, tpot %v, prefill %v/token", cfg.TTFT, cfg.TPOT, cfg.PrefillPerToken)
	}
	for _, r := range rs {
		fmt.Fprintf(stdout, "sim: model %s (profile %s, %s, speed %g) at %s\n", cfg.Model, *sf.profile, mode, cfg.Speed, r.URL())
	}
	<-ctx.Done()
	for _, r := range rs {
		r.Close()
	}
	return nil
}

// faultFlags maps a Faults field, as Faults.Validate names it, to its flag.
var faultFlags = map[string]string{
	"error_rate":        "--error-rate",
	"error_status":      "--error-status",
	"die_after_tokens":  "--die-after",
	"stall_first_token": "--stall",
	"refuse_for":        "--refuse-for",
	"slow":              "--slow",
}

// faultFlagError words an error of Faults.Validate with the flag's name
// instead of the JSON field's.
func faultFlagError(err error) error {
	field, msg, ok := strings.Cut(err.Error(), ": ")
	if name, known := faultFlags[field]; ok && known {
		return fmt.Errorf("%s: %s", name, msg)
	}
	return err
}
