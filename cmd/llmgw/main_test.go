package main

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// llmgw runs `llmgw args...` through run, as main does, and returns its
// exit status, stdout and stderr. Help and mistakes return at once; the
// deadline stops a command that starts serving instead.
func llmgw(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// metavarKinds are the metavars usage may show, each with a check of a
// default shown for it (nil: any text). A flag may instead show its
// choices, as a|b, or nothing, when it is a boolean.
var metavarKinds = map[string]func(string) error{
	"ADDRESS":  nil,
	"URL":      nil,
	"FILE":     nil,
	"NAME":     nil,
	"PATH":     nil, // a tenant path
	"ID":       nil,
	"KEY":      nil,
	"LIST":     nil, // comma-separated
	"A:B:STEP": nil,
	"FAULT":    nil, // R:kill@T or R:stall@T+D
	"N":        func(s string) error { _, err := strconv.ParseInt(s, 10, 64); return err },
	"X":        func(s string) error { _, err := strconv.ParseFloat(s, 64); return err },
	"DURATION": func(s string) error { _, err := time.ParseDuration(s); return err },
}

var choicesMetavar = regexp.MustCompile(`^[a-z0-9/_]+(\|[a-z0-9/_]+)+$`)

// usageFlag is a flag as usage shows it.
type usageFlag struct {
	name, metavar, text string
}

// usageText is a usage split into its parts.
type usageText struct {
	header   string
	commands []string
	flags    []usageFlag
}

var flagLine = regexp.MustCompile(`^  --([a-z0-9-]+)(?: (\S+))?(?: {2,}(.*))?$`)

// parseUsage splits a usage into the header, the command list and the
// flags, failing the test where it strays from the format.
func parseUsage(t *testing.T, out string) usageText {
	t.Helper()
	var u usageText
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	u.header = lines[0]
	section := ""
	for _, l := range lines[1:] {
		switch {
		case l == "Commands:" || l == "Flags:":
			section = l
		case strings.HasPrefix(l, "Run '"):
			section = "Run" // a pointer to subcommands' help, to the next section
		case l == "" || !strings.HasPrefix(l, "  "):
			if section != "" && section != "Run" && l != "" {
				t.Errorf("line %q after %s is neither an entry nor blank", l, section)
			}
		case section == "Commands:":
			u.commands = append(u.commands, strings.Fields(l)[0])
		case section == "Flags:" && strings.HasPrefix(l, "  --"):
			m := flagLine.FindStringSubmatch(l)
			if m == nil {
				t.Errorf("flag line %q is not `  --name METAVAR   text`", l)
				continue
			}
			u.flags = append(u.flags, usageFlag{name: m[1], metavar: m[2], text: m[3]})
		case section == "Flags:" && len(u.flags) > 0:
			f := &u.flags[len(u.flags)-1]
			f.text = strings.TrimSpace(f.text + " " + strings.TrimSpace(l))
		default:
			t.Errorf("unexpected line %q", l)
		}
	}
	return u
}

var defaultText = regexp.MustCompile(`\(default ([^()]*)\)$`)

// TestHelp walks llmgw's help and every command's and subcommand's, asked
// for each way there is, and holds them to one format: status 0, the usage
// on stdout and nothing on stderr, every flag with a known metavar, and the
// same flag shown the same way in every command.
func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"help", "help"}} {
		code, out, errOut := llmgw(t, args...)
		if code != 0 || errOut != "" || !strings.HasPrefix(out, "usage: llmgw COMMAND") {
			t.Fatalf("llmgw %q: status %d, stdout %q, stderr %q; want 0 and the usage on stdout", args, code, out, errOut)
		}
	}
	_, out, _ := llmgw(t, "help")
	top := parseUsage(t, out)
	for _, want := range []string{"serve", "check", "keys", "usage", "sim", "bench", "help"} {
		if !slices.Contains(top.commands, want) {
			t.Errorf("llmgw help lists %q, want %s among them", top.commands, want)
		}
	}

	metavars := map[string]string{} // key: flag name; the metavar first seen
	where := map[string]string{}    // key: flag name; the command it was first seen in
	flagsOf := map[string][]string{}
	var walk func(path []string)
	walk = func(path []string) {
		cmd := strings.Join(path, " ")
		ways := [][]string{
			append(slices.Clone(path), "--help"),
			append(slices.Clone(path), "-h"),
			append([]string{"help"}, path...),
		}
		if len(path) == 2 {
			ways = append(ways, []string{path[0], "help", path[1]})
		}
		var first string
		for i, args := range ways {
			code, out, errOut := llmgw(t, args...)
			if code != 0 || errOut != "" {
				t.Errorf("llmgw %q: status %d, stderr %q; want 0 and nothing on stderr", args, code, errOut)
			}
			if !strings.HasPrefix(out, "usage: llmgw "+cmd+" ") {
				t.Errorf("llmgw %q: stdout starts %q, want %q", args, firstLine(out), "usage: llmgw "+cmd+" ...")
			}
			if i == 0 {
				first = out
			} else if out != first {
				t.Errorf("llmgw %q prints other help than llmgw %q", args, ways[0])
			}
		}
		u := parseUsage(t, first)
		for _, f := range u.flags {
			flagsOf[cmd] = append(flagsOf[cmd], f.name)
			check, known := metavarKinds[f.metavar]
			switch {
			case f.metavar == "":
			case choicesMetavar.MatchString(f.metavar):
				words := strings.Split(f.metavar, "|")
				check = func(s string) error {
					if !slices.Contains(words, s) {
						return strconv.ErrSyntax
					}
					return nil
				}
			case !known:
				t.Errorf("llmgw %s --%s: metavar %q is none of the agreed ones or a|b choices", cmd, f.name, f.metavar)
			}
			if m := defaultText.FindStringSubmatch(f.text); m != nil && check != nil {
				if err := check(m[1]); err != nil {
					t.Errorf("llmgw %s --%s %s: default %q is not one", cmd, f.name, f.metavar, m[1])
				}
			}
			if f.text == "" {
				t.Errorf("llmgw %s --%s: no text", cmd, f.name)
			}
			if prev, ok := metavars[f.name]; !ok {
				metavars[f.name], where[f.name] = f.metavar, cmd
			} else if prev != f.metavar {
				t.Errorf("--%s is --%s %s in llmgw %s but --%s %s in llmgw %s", f.name, f.name, prev, where[f.name], f.name, f.metavar, cmd)
			}
		}
		for _, sub := range u.commands {
			walk(append(slices.Clone(path), sub))
		}
	}
	for _, c := range top.commands {
		if c != "help" {
			walk([]string{c})
		}
	}

	for _, cmd := range []string{"serve", "check", "keys create", "keys list", "keys revoke", "usage", "sim", "bench"} {
		if _, ok := flagsOf[cmd]; !ok {
			t.Errorf("the walk never reached llmgw %s", cmd)
		}
	}
	for _, cmd := range []string{"serve", "sim", "bench"} {
		if !slices.Contains(flagsOf[cmd], "log-level") {
			t.Errorf("llmgw %s has no --log-level; every long-running command has one", cmd)
		}
	}
	for name, want := range map[string]string{"listen": "ADDRESS", "model": "NAME", "config": "FILE", "store": "URL", "seed": "N", "log-level": "debug|info|warn|error"} {
		if got := metavars[name]; got != want {
			t.Errorf("--%s shows %q, want %q", name, got, want)
		}
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// TestMistakes checks that a wrong command line exits 2 before anything
// runs, with nothing on stdout and, on stderr, the command, what was wrong
// and the usage or a pointer to it; and that a command that runs and fails
// exits 1.
func TestMistakes(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	tests := []struct {
		args      []string
		status    int
		wantErr   string // the first line of stderr
		wantUsage bool   // whether stderr shows the whole usage
	}{
		{nil, 2, "llmgw: no command given", true},
		{[]string{"nope"}, 2, `llmgw: unknown command "nope"`, true},
		{[]string{"help", "nope"}, 2, `llmgw: unknown command "nope"`, true},
		{[]string{"--bogus"}, 2, "llmgw: flag provided but not defined: --bogus", true},
		{[]string{"serve", "--bogus"}, 2, "llmgw serve: flag provided but not defined: --bogus", true},
		{[]string{"check", "--bogus"}, 2, "llmgw check: flag provided but not defined: --bogus", true},
		{[]string{"usage", "--bogus"}, 2, "llmgw usage: flag provided but not defined: --bogus", true},
		{[]string{"sim", "--bogus"}, 2, "llmgw sim: flag provided but not defined: --bogus", true},
		{[]string{"bench", "--bogus"}, 2, "llmgw bench: flag provided but not defined: --bogus", true},
		{[]string{"keys", "--bogus"}, 2, "llmgw keys: flag provided but not defined: --bogus", true},
		{[]string{"keys", "create", "--bogus"}, 2, "llmgw keys create: flag provided but not defined: --bogus", true},
		{[]string{"keys", "list", "--bogus"}, 2, "llmgw keys list: flag provided but not defined: --bogus", true},
		{[]string{"keys", "revoke", "--bogus"}, 2, "llmgw keys revoke: flag provided but not defined: --bogus", true},
		{[]string{"keys"}, 2, "llmgw keys: a subcommand is needed: create, list or revoke", true},
		{[]string{"keys", "rotate"}, 2, `llmgw keys: unknown subcommand "rotate"; want create, list or revoke`, true},
		{[]string{"serve", "extra"}, 2, `llmgw serve: unexpected argument "extra"`, true},
		{[]string{"check"}, 2, "llmgw check: --config FILE is required", true},
		{[]string{"sim", "--replicas", "many"}, 2, `llmgw sim: invalid value "many" for flag --replicas: parse error`, true},
		{[]string{"sim", "--seed", "-1"}, 2, `llmgw sim: invalid value "-1" for flag --seed: parse error`, true},
		{[]string{"bench", "--seed", "-1"}, 2, `llmgw bench: invalid value "-1" for flag --seed: parse error`, true},
		{[]string{"serve", "--log-level", "loud"}, 2, `llmgw serve: invalid value "loud" for flag --log-level: want debug, info, warn or error`, true},
		{[]string{"sim", "--log-level", "loud"}, 2, `llmgw sim: invalid value "loud" for flag --log-level: want debug, info, warn or error`, true},
		{[]string{"bench", "--log-level", "loud"}, 2, `llmgw bench: invalid value "loud" for flag --log-level: want debug, info, warn or error`, true},
		{[]string{"serve", "--auth", "maybe"}, 2, `llmgw serve: invalid value "maybe" for flag --auth: want keys or none`, true},
		{[]string{"usage", "--by", "pool"}, 2, `llmgw usage: invalid value "pool" for flag --by: want model, tenant or key`, true},
		{[]string{"sim", "--refuse=maybe"}, 2, `llmgw sim: invalid boolean value "maybe" for --refuse: parse error`, true},
		{[]string{"sim", "--listen"}, 2, "llmgw sim: flag needs an argument: --listen", true},
		// Values that parse but are out of range point to --help.
		{[]string{"sim", "--replicas", "0"}, 2, "llmgw sim: --replicas: must be at least 1, got 0", false},
		{[]string{"sim", "--error-rate", "3"}, 2, "llmgw sim: --error-rate: must be between 0 and 1, got 3", false},
		{[]string{"usage", "--since", "yesterday"}, 2, `llmgw usage: --since: "yesterday" is not a duration such as 24h or 30d`, false},
		{[]string{"keys", "create", "--store", "memory:"}, 2, "llmgw keys create: --tenant: ", false},
		{[]string{"bench", "--rate", "0", "--target", "http://x"}, 2, "llmgw bench: --rate must be a positive number", false},
		{[]string{"serve", "--config", missing, "--upstream", "http://x/v1"}, 2, "llmgw serve: give --config or --upstream, not both", false},
		// A command that runs and fails is not a usage mistake.
		{[]string{"check", "--config", missing}, 1, "llmgw: ", false},
	}
	for _, tt := range tests {
		code, out, errOut := llmgw(t, tt.args...)
		if code != tt.status {
			t.Errorf("llmgw %q: status %d, want %d; stderr:\n%s", tt.args, code, tt.status, errOut)
		}
		if tt.status == 2 && out != "" {
			t.Errorf("llmgw %q: stdout %q, want nothing", tt.args, out)
		}
		lines := strings.SplitN(errOut, "\n", 3)
		if !strings.HasPrefix(lines[0], tt.wantErr) {
			t.Errorf("llmgw %q: stderr starts %q, want %q", tt.args, lines[0], tt.wantErr)
		}
		if tt.status != 2 {
			continue
		}
		if len(lines) < 2 {
			t.Errorf("llmgw %q: stderr %q has no second line", tt.args, errOut)
			continue
		}
		if gotUsage := strings.HasPrefix(lines[1], "usage: llmgw "); gotUsage != tt.wantUsage {
			t.Errorf("llmgw %q: stderr's second line %q; want the usage: %v", tt.args, lines[1], tt.wantUsage)
		}
		if !tt.wantUsage && !strings.HasPrefix(lines[1], "Run 'llmgw ") {
			t.Errorf("llmgw %q: stderr's second line %q, want a pointer to --help", tt.args, lines[1])
		}
	}
}
