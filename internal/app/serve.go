package app

// `llmgw serve`: from a configuration file, from --upstream flags, or, with
// neither, as a demo in front of two simulated backends.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"gitea.mynodes.xyz/ilker/llmgw/internal/cli"
	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/sim"
)

// listFlag is a flag that may be given more than once.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

const serveAbout = `Serves the OpenAI API and, on a second listener, metrics, health and the
admin API. With --config the pools, models and tenants come from the file;
with --upstream and --model, one model is served by the servers named; with
neither, a demo model is served by two simulated backends.
LLMGW_STORE_URL and LLMGW_REDIS_URL, when set, take the place of the
store.url and limits.redis the file names; --listen, --admin-listen,
--epp-listen, --store, --auth and --http override the file and the environment.`

// ServeCommand runs `llmgw serve` until ctx ends.
func ServeCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("serve", "[flags]", serveAbout, stdout)
	var (
		configPath  = fs.String("config", "", "configuration `file`")
		listen      = fs.String("listen", "", "API listener `address` (default "+config.DefaultListen+")")
		adminListen = fs.String("admin-listen", "", "admin listener `address`: metrics, health, admin API (default "+config.DefaultAdminListen+")")
		eppListen   = fs.String("epp-listen", "", "the Endpoint Picker's gRPC listener `address` (ext_proc); off by default")
		model       = fs.String("model", "", "with --upstream: the model `name` the upstreams serve")
		storeURL    = fs.String("store", "", "store `URL`: sqlite:PATH, postgres://..., memory:")
		auth        = fs.Choice("auth", "", []string{"keys", "none"}, "whether requests need an API key")
		httpImpl    = fs.Choice("http", "", []string{config.HTTPLlmgw, config.HTTPNetHTTP}, "the HTTP/1.1 server and upstream client")
		logLevel    = fs.LogLevel(slog.LevelInfo, "the least severe log lines written to stderr; debug logs every request")
		upstreams   listFlag
	)
	fs.Var(&upstreams, "upstream", "an OpenAI-compatible server's base `URL`, such as http://10.0.0.7:8000/v1; repeat for a pool")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := fs.NoArgs(); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: *logLevel}))

	var (
		cfg  *config.Config
		err  error
		demo bool
	)
	switch {
	case *configPath != "" && len(upstreams) > 0:
		return fs.Errorf("give --config or --upstream, not both")
	case *configPath != "":
		if cfg, err = config.Load(*configPath); err != nil {
			return err
		}
	case len(upstreams) > 0:
		if *model == "" {
			return fs.Errorf("--upstream needs --model: the name the upstreams serve")
		}
		cfg = upstreamConfig(*model, catalog.KindOpenAI, upstreams)
	default:
		demo = true
		replicas, err := sim.StartReplicas(ctx, demoSim, 2, "127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("starting the demo's simulated backends: %w", err)
		}
		defer func() {
			for _, r := range replicas {
				r.Close()
			}
		}()
		var urls []string
		for _, r := range replicas {
			urls = append(urls, r.URL())
		}
		cfg = demoConfig(urls)
	}
	// The environment's and the flags' values over the file's, at start
	// and at every reload.
	override := func(c *config.Config) {
		c.ApplyEnv(os.Getenv)
		for flagValue, field := range map[*string]*string{listen: &c.Server.Listen, adminListen: &c.Server.AdminListen, eppListen: &c.EPP.Listen, storeURL: &c.Store.URL, auth: &c.Router.Auth, httpImpl: &c.Server.HTTP} {
			if *flagValue != "" {
				*field = *flagValue
			}
		}
	}
	override(cfg)
	if err := cfg.Validate(); err != nil {
		return err
	}
	g, err := newGateway(ctx, cfg, *configPath, log)
	if err != nil {
		return err
	}
	g.overrides = override
	fmt.Fprintf(stdout, "llmgw: OpenAI API on %s, metrics and admin on %s\n", g.URL(), g.AdminURL())
	if a := g.EPPAddr(); a != "" {
		fmt.Fprintf(stdout, "llmgw: Endpoint Picker (ext_proc, gRPC health) on %s\n", a)
	}
	if demo {
		fmt.Fprintf(stdout, "llmgw: demo model %q (alias %q) served by two simulated backends. Try:\n\n", demoModel, "default")
		fmt.Fprintf(stdout, "  curl %s/chat/completions -H 'Content-Type: application/json' \\\n    -d '{\"model\":\"demo\",\"messages\":[{\"role\":\"user\",\"content\":\"Hello!\"}]}'\n\n", g.URL())
	}
	return g.Run(ctx)
}

const demoModel = "demo"

// demoContext is the demo model's context, in tokens: 128k, as Llama 3.1
// 8B serves. A coding agent's default request fits with room to spare:
// Claude Code asks for 32,000 tokens after a prompt of some 20,000.
const demoContext = 131072

// demoSim is each of the demo's simulated backends: an 8B model on one
// H100 (the simulator's defaults) at demoContext. Its KV cache, 450,560
// tokens (28,160 blocks of 16), holds eight such requests at once.
var demoSim = sim.Config{Model: demoModel, MaxModelLen: demoContext}

// demoConfig serves the demo model from the simulated backends at urls,
// with no keys and a store in memory, so that a first run leaves nothing
// behind.
func demoConfig(urls []string) *config.Config {
	cfg := upstreamConfig(demoModel, catalog.KindVLLM, urls)
	cfg.Pools[0].Name = "demo"
	cfg.Models[0].Pool = "demo"
	cfg.Models[0].Aliases = []string{"default"}
	cfg.Models[0].SLO = demoSLO
	return cfg
}

// upstreamConfig is one model served by one pool of the given servers, of
// the given kind,
// with no keys and the ledger in memory.
func upstreamConfig(model, kind string, urls []string) *config.Config {
	cfg := config.Default()
	p := catalog.Pool{Name: "upstream", Kind: kind}
	for _, u := range urls {
		p.Endpoints = append(p.Endpoints, catalog.Endpoint{URL: u})
	}
	config.PoolDefaults(&p)
	cfg.Pools = []catalog.Pool{p}
	cfg.Models = []catalog.Model{{Name: model, Pool: p.Name}}
	cfg.Router.Auth = "none"
	cfg.Store.URL = "memory:"
	return &cfg
}
