// Command llmgw is an OpenAI-compatible gateway in front of pools of LLM
// inference servers. See the README for its commands.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"gitea.mynodes.xyz/ilker/llmgw/internal/app"
	"gitea.mynodes.xyz/ilker/llmgw/internal/bench"
	"gitea.mynodes.xyz/ilker/llmgw/internal/cli"
	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/sim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// command is one of llmgw's commands.
type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands are llmgw's commands, in the order help lists them.
func commands() []command {
	return []command{
		{"serve", "serve the OpenAI API in front of pools of inference servers", app.ServeCommand},
		{"check", "check a configuration file and print its problems", checkCommand},
		{"keys", "create, list and revoke API keys in the store", app.KeysCommand},
		{"usage", "sum the usage ledger by model, tenant or key", app.UsageCommand},
		{"audit", "read the audit trail: changes, sign-ins and reloads", app.AuditCommand},
		{"sim", "run simulated vLLM-like inference servers", sim.Command},
		{"bench", "send a seeded, open-loop workload and report latency and goodput", bench.Command},
		{"help", "print a command's usage: llmgw help COMMAND", nil},
	}
}

const about = `llmgw is an OpenAI-compatible gateway for pools of LLM inference servers.`

// run runs the command that args name, writing to stdout and stderr, and
// returns the process's exit status: 0 on success and for help, 2 for a
// mistake on the command line, 1 for any other failure (see cli.Exit).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return cli.Exit(dispatch(ctx, args, stdout, stderr), stderr)
}

// dispatch runs the command that args name; `llmgw help CMD...` is `llmgw
// CMD... --help`.
func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("", "COMMAND [flags] [args]", about, stdout)
	cmds := commands()
	for _, c := range cmds {
		fs.Commands = append(fs.Commands, cli.Command{Name: c.name, Summary: c.summary})
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fs.UsageErrorf("no command given")
	}
	name, rest := fs.Arg(0), fs.Args()[1:]
	if name == "help" && len(rest) > 0 && rest[0] != "help" {
		name, rest = rest[0], slices.Concat(rest[1:], []string{"--help"})
	}
	if name == "help" {
		fs.WriteUsage(stdout)
		return nil
	}
	for _, c := range cmds {
		if c.name == name && c.run != nil {
			return c.run(ctx, rest, stdout, stderr)
		}
	}
	return fs.UsageErrorf("unknown command %q", name)
}

const checkAbout = `Loads the configuration FILE as serve would, then prints every problem in
it, each naming its field, and exits 1; or prints a summary and exits 0.
With --against, the file the gateway runs with, it also names the changed
fields a reload leaves for a restart (listeners, timeouts, the store,
limits, routing options, profiles, telemetry); a reload applies pools,
models, tenants and admin.token.`

func checkCommand(_ context.Context, args []string, stdout, _ io.Writer) error {
	fs := cli.NewFlagSet("check", "--config FILE [--against FILE]", checkAbout, stdout)
	path := fs.String("config", "", "configuration `file` to check")
	against := fs.String("against", "", "the configuration `file` in service: name the changes since it that need a restart")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := fs.NoArgs(); err != nil {
		return err
	}
	if *path == "" {
		return fs.UsageErrorf("--config FILE is required")
	}
	if *against != "" {
		return config.CheckAgainst(*path, *against, stdout)
	}
	return config.Check(*path, stdout)
}
