package cli

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// newTestFlagSet is a command with a flag of every kind.
func newTestFlagSet(stdout io.Writer) *FlagSet {
	fs := NewFlagSet("demo", "[flags] ID", "Does a demo of the usage format.", stdout)
	fs.String("config", "", "configuration `file`")
	fs.String("listen", "127.0.0.1:8000", "`address` to listen on")
	fs.Int("replicas", 1, "number of replicas")
	fs.Uint64("seed", 0, "varies the output")
	fs.Float64("speed", 1, "speed factor")
	fs.Duration("ttft", 20*time.Millisecond, "time to first token")
	fs.Bool("refuse", false, "refuse connections")
	fs.Choice("by", "", []string{"model", "tenant"}, "group the rows by model or tenant, and a long text that has to wrap onto a second line")
	fs.LogLevel(slog.LevelInfo, "least severe log lines")
	return fs
}

func TestWriteUsage(t *testing.T) {
	var b strings.Builder
	newTestFlagSet(nil).WriteUsage(&b)
	want := `usage: llmgw demo [flags] ID

Does a demo of the usage format.

Flags:
  --by model|tenant   group the rows by model or tenant, and a long text that
                      has to wrap onto a second line
  --config FILE       configuration file
  --listen ADDRESS    address to listen on (default 127.0.0.1:8000)
  --log-level debug|info|warn|error
                      least severe log lines (default info)
  --refuse            refuse connections
  --replicas N        number of replicas (default 1)
  --seed N            varies the output
  --speed X           speed factor (default 1)
  --ttft DURATION     time to first token (default 20ms)
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
}

func TestWriteUsageCommands(t *testing.T) {
	fs := NewFlagSet("keys", "COMMAND [flags] [args]", "Manages keys.", nil)
	fs.Commands = []Command{{"create", "create a key"}, {"list", "list the keys"}}
	var b strings.Builder
	fs.WriteUsage(&b)
	want := `usage: llmgw keys COMMAND [flags] [args]

Manages keys.

Commands:
  create   create a key
  list     list the keys

Run 'llmgw keys help COMMAND' or 'llmgw keys COMMAND --help' for a command's
flags.
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		args      []string
		wantErr   string // empty: parses
		wantUsage bool   // whether Exit shows the usage
	}{
		{[]string{"--by", "tenant", "--log-level", "DEBUG", "--seed", "18446744073709551615"}, "", false},
		{[]string{"--bogus"}, "flag provided but not defined: --bogus", true},
		{[]string{"-bogus"}, "flag provided but not defined: --bogus", true},
		{[]string{"--by", "pool"}, `invalid value "pool" for flag --by: want model or tenant`, true},
		{[]string{"--log-level", "loud"}, `invalid value "loud" for flag --log-level: want debug, info, warn or error`, true},
		{[]string{"--seed", "-1"}, `invalid value "-1" for flag --seed: parse error`, true},
		{[]string{"--refuse=maybe"}, `invalid boolean value "maybe" for --refuse: parse error`, true},
		{[]string{"--config"}, "flag needs an argument: --config", true},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		fs := newTestFlagSet(&stdout)
		err := fs.Parse(tt.args)
		if tt.wantErr == "" {
			if err != nil {
				t.Errorf("Parse(%q) = %v", tt.args, err)
			}
			continue
		}
		var ue *UsageError
		if !errors.As(err, &ue) || err.Error() != tt.wantErr {
			t.Errorf("Parse(%q) = %v, want a *UsageError %q", tt.args, err, tt.wantErr)
			continue
		}
		if code := Exit(err, &stderr); code != ExitUsage {
			t.Errorf("Exit(Parse(%q)) = %d, want %d", tt.args, code, ExitUsage)
		}
		want := "llmgw demo: " + tt.wantErr + "\nusage: llmgw demo [flags] ID\n"
		if !strings.HasPrefix(stderr.String(), want) || stdout.Len() != 0 {
			t.Errorf("Parse(%q): stderr %q, stdout %q; want stderr to start %q", tt.args, stderr.String(), stdout.String(), want)
		}
	}
}

func TestParseLogLevel(t *testing.T) {
	for _, tt := range []struct {
		arg  string
		want slog.Level
	}{{"debug", slog.LevelDebug}, {"info", slog.LevelInfo}, {"WARN", slog.LevelWarn}, {"error", slog.LevelError}} {
		fs := NewFlagSet("demo", "[flags]", "", io.Discard)
		level := fs.LogLevel(slog.LevelInfo, "")
		if err := fs.Parse([]string{"--log-level", tt.arg}); err != nil || *level != tt.want {
			t.Errorf("--log-level %s: %v, %v; want %v", tt.arg, *level, err, tt.want)
		}
	}
}

func TestHelp(t *testing.T) {
	for _, arg := range []string{"-h", "--help", "-help"} {
		var stdout, stderr bytes.Buffer
		err := newTestFlagSet(&stdout).Parse([]string{arg})
		if !errors.Is(err, flag.ErrHelp) {
			t.Errorf("Parse(%s) = %v, want flag.ErrHelp", arg, err)
		}
		if code := Exit(err, &stderr); code != ExitOK || stderr.Len() != 0 {
			t.Errorf("Exit(Parse(%s)) = %d, stderr %q; want 0 and nothing", arg, code, stderr.String())
		}
		if !strings.HasPrefix(stdout.String(), "usage: llmgw demo [flags] ID\n") {
			t.Errorf("Parse(%s) printed %q on stdout, want the usage", arg, stdout.String())
		}
	}
}

func TestExit(t *testing.T) {
	fs := newTestFlagSet(io.Discard)
	fs.Parse([]string{"a", "b"})
	tests := []struct {
		err        error
		wantCode   int
		wantStderr string
	}{
		{nil, ExitOK, ""},
		{flag.ErrHelp, ExitOK, ""},
		{fs.Errorf("--speed: must be positive, got %v", -1), ExitUsage, "llmgw demo: --speed: must be positive, got -1\nRun 'llmgw demo --help' for usage.\n"},
		{BadUsage("demo", errors.New("--speed: too fast")), ExitUsage, "llmgw demo: --speed: too fast\nRun 'llmgw demo --help' for usage.\n"},
		{errors.New("listen tcp: address in use"), ExitFailure, "llmgw: listen tcp: address in use\n"},
	}
	for _, tt := range tests {
		var stderr bytes.Buffer
		if code := Exit(tt.err, &stderr); code != tt.wantCode || stderr.String() != tt.wantStderr {
			t.Errorf("Exit(%v) = %d, %q; want %d, %q", tt.err, code, stderr.String(), tt.wantCode, tt.wantStderr)
		}
	}
	var stderr bytes.Buffer
	if code := Exit(fs.NoArgs(), &stderr); code != ExitUsage || !strings.HasPrefix(stderr.String(), "llmgw demo: unexpected argument \"a\"\nusage: llmgw demo") {
		t.Errorf("Exit(NoArgs()) = %d, %q; want 2, the error and the usage", code, stderr.String())
	}
	if BadUsage("demo", nil) != nil || BadUsage("demo", flag.ErrHelp) != flag.ErrHelp {
		t.Error("BadUsage changed nil or flag.ErrHelp")
	}
	if ue := fs.Errorf("x"); BadUsage("other", ue) != ue {
		t.Error("BadUsage rewrapped a *UsageError")
	}
}
