// Command llmgw is an OpenAI-compatible gateway in front of pools of LLM
// inference servers. See the README for its commands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"gitea.mynodes.xyz/ilker/llmgw/internal/app"
	"gitea.mynodes.xyz/ilker/llmgw/internal/bench"
	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/sim"
)

const usage = `llmgw is an OpenAI-compatible gateway for pools of LLM inference servers.

Usage:
  llmgw serve [--config FILE | --upstream URL... --model NAME] [--listen ADDR] [--admin-listen ADDR] [--store URL] [--auth keys|none]
  llmgw check --config FILE
  llmgw keys create|list|revoke (--config FILE | --store URL) ...
  llmgw usage (--config FILE | --store URL) [--tenant PREFIX] [--since DURATION] [--by model|tenant|key]
  llmgw sim [--listen ADDR] [--model NAME] [--replicas N] ...
  llmgw bench --workload chat|burst|mixed|flat|trace (--target URL | --spawn-sim N) ...

Run 'llmgw COMMAND --help' for a command's flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "llmgw:", err)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return flag.ErrHelp
	}
	commands := map[string]func(context.Context, []string, io.Writer, io.Writer) error{
		"serve": app.ServeCommand,
		"check": checkCommand,
		"keys":  app.KeysCommand,
		"usage": app.UsageCommand,
		"sim":   sim.Command,
		"bench": bench.Command,
	}
	cmd, ok := commands[args[0]]
	if !ok {
		if args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
			fmt.Fprint(stdout, usage)
			return nil
		}
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", args[0])
	}
	return cmd(ctx, args[1:], stdout, stderr)
}

func checkCommand(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "configuration `file` to check")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *path == "" {
		return errors.New("check needs --config FILE")
	}
	return config.Check(*path, stdout)
}
