// Package cli is how every llmgw command reads its command line: one usage
// format, help on stdout with exit status 0, and mistakes on stderr with
// exit status 2.
package cli

// flagset.go is a command's flags and how its usage is printed.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// Usage text is wrapped to this many columns; a flag's text starts at the
// widest "--name METAVAR" plus a gap, up to maxFlagColumn, past which the
// text goes on the next line.
const (
	wrapWidth     = 80
	maxFlagColumn = 28
	flagGap       = 3
)

// FlagSet is one command's flags, printed in llmgw's one usage format:
//
//	usage: llmgw CMD [flags] ARGS
//
//	What the command does, in a paragraph.
//
//	Flags:
//	  --config FILE      configuration file
//	  --listen ADDRESS   API listener address (default 127.0.0.1:8080)
//
// A flag's metavar is the back-quoted word of its usage text, upper-cased
// ("configuration `file`" shows as FILE). Without one it follows the flag's
// type: N for an integer, X for any other number, DURATION for a duration,
// the choices for a Choice or a LogLevel, and none for a boolean. Flags are
// listed by name.
type FlagSet struct {
	*flag.FlagSet
	cmd      string // "serve", "keys create"; empty for llmgw itself
	synopsis string // what follows "usage: llmgw CMD "
	about    string
	stdout   io.Writer // where help goes
	// Commands, when set, are listed before the flags: llmgw's commands,
	// or a command's subcommands, which `help COMMAND` and `COMMAND --help`
	// describe.
	Commands []Command
}

// Command is a line of a command list: a name and what it does, in a few
// words.
type Command struct{ Name, Summary string }

// NewFlagSet is the flags of `llmgw cmd`, where cmd is "serve" or "keys
// create", or empty for llmgw itself. synopsis follows the command in the
// usage line, such as "[flags] (--config FILE | --store URL) ID"; about is
// a paragraph on what the command does. Help goes to stdout.
func NewFlagSet(cmd, synopsis, about string, stdout io.Writer) *FlagSet {
	name := strings.TrimSpace("llmgw " + cmd)
	fs := &FlagSet{
		FlagSet:  flag.NewFlagSet(name, flag.ContinueOnError),
		cmd:      cmd,
		synopsis: synopsis,
		about:    about,
		stdout:   stdout,
	}
	// The flag package prints its errors and the usage itself; Parse and
	// Exit print them instead, each to its stream.
	fs.FlagSet.SetOutput(io.Discard)
	fs.FlagSet.Usage = func() {}
	return fs
}

// Parse parses args, flags before arguments. On -h or --help it prints the
// usage to stdout and returns flag.ErrHelp, which the command returns as it
// is. An unknown flag, or a value its flag cannot parse, is a *UsageError
// that shows the usage.
func (fs *FlagSet) Parse(args []string) error {
	err := fs.FlagSet.Parse(args)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		fs.WriteUsage(fs.stdout)
		return flag.ErrHelp
	}
	return &UsageError{Cmd: fs.cmd, Err: errors.New(doubleDash(err.Error())), usage: fs.WriteUsage}
}

// NoArgs is a *UsageError, showing the usage, when arguments follow the
// flags, and nil when none do.
func (fs *FlagSet) NoArgs() error {
	if fs.NArg() == 0 {
		return nil
	}
	return fs.UsageErrorf("unexpected argument %q", fs.Arg(0))
}

// Errorf is a *UsageError about the value of a flag, or flags that do not
// go together; the message names the flag. It is reported with a pointer
// to --help rather than the whole usage.
func (fs *FlagSet) Errorf(format string, a ...any) error {
	return &UsageError{Cmd: fs.cmd, Err: fmt.Errorf(format, a...)}
}

// UsageErrorf is a *UsageError for a command line of the wrong shape, such
// as a missing or unknown subcommand or a stray argument, reported with the
// whole usage.
func (fs *FlagSet) UsageErrorf(format string, a ...any) error {
	return &UsageError{Cmd: fs.cmd, Err: fmt.Errorf(format, a...), usage: fs.WriteUsage}
}

// WriteUsage writes the command's usage to w.
func (fs *FlagSet) WriteUsage(w io.Writer) {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: %s %s\n", fs.Name(), fs.synopsis)
	if about := strings.TrimSpace(fs.about); about != "" {
		b.WriteString("\n" + about + "\n")
	}
	if len(fs.Commands) > 0 {
		b.WriteString("\nCommands:\n")
		rows := make([][2]string, len(fs.Commands))
		for i, c := range fs.Commands {
			rows[i] = [2]string{"  " + c.Name, c.Summary}
		}
		writeColumns(&b, rows)
		hint := fmt.Sprintf("Run '%[1]s help COMMAND' or '%[1]s COMMAND --help' for a command's flags.", fs.Name())
		b.WriteString("\n" + strings.Join(wrap(hint, wrapWidth), "\n") + "\n")
	}
	var rows [][2]string
	fs.VisitAll(func(f *flag.Flag) {
		left := "  --" + f.Name
		if m := Metavar(f); m != "" {
			left += " " + m
		}
		_, text := flag.UnquoteUsage(f)
		if !isZeroValue(f) {
			text += " (default " + f.DefValue + ")"
		}
		rows = append(rows, [2]string{left, text})
	})
	if len(rows) > 0 {
		b.WriteString("\nFlags:\n")
		writeColumns(&b, rows)
	}
	io.WriteString(w, b.String())
}

// writeColumns writes rows of a left column and a text wrapped beside it.
func writeColumns(b *strings.Builder, rows [][2]string) {
	col := 0
	for _, r := range rows {
		if n := len(r[0]) + flagGap; n > col && n <= maxFlagColumn+flagGap {
			col = n
		}
	}
	indent := strings.Repeat(" ", col)
	for _, r := range rows {
		left, text := r[0], r[1]
		b.WriteString(left)
		if len(left)+flagGap > col {
			b.WriteString("\n" + indent)
		} else {
			b.WriteString(strings.Repeat(" ", col-len(left)))
		}
		for i, line := range wrap(text, wrapWidth-col) {
			if i > 0 {
				b.WriteString("\n" + indent)
			}
			b.WriteString(line)
		}
		b.WriteString("\n")
	}
}

// wrap breaks text into lines of at most width bytes where it can, at
// spaces; a longer word stands on a line of its own.
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(text) {
		switch {
		case line == "":
			line = w
		case len(line)+1+len(w) <= width:
			line += " " + w
		default:
			lines = append(lines, line)
			line = w
		}
	}
	return append(lines, line)
}

// Metavar is how f's value is shown in usage: the back-quoted word of its
// usage text upper-cased, or else one that follows its type (see FlagSet);
// empty for a boolean.
func Metavar(f *flag.Flag) string {
	if c, ok := f.Value.(choices); ok {
		return strings.Join(c.choices(), "|")
	}
	name, _ := flag.UnquoteUsage(f)
	if strings.Contains(f.Usage, "`") {
		return strings.ToUpper(name)
	}
	switch name {
	case "int", "uint":
		return "N"
	case "float":
		return "X"
	}
	return strings.ToUpper(name) // DURATION; STRING or VALUE when the usage names none
}

// isZeroValue reports whether f's default is its type's zero value, which
// usage does not show.
func isZeroValue(f *flag.Flag) (zero bool) {
	defer func() {
		if recover() != nil {
			zero = f.DefValue == ""
		}
	}()
	t := reflect.TypeOf(f.Value)
	var z reflect.Value
	if t.Kind() == reflect.Pointer {
		z = reflect.New(t.Elem())
	} else {
		z = reflect.Zero(t)
	}
	return f.DefValue == z.Interface().(flag.Value).String()
}

// doubleDash rewrites the flag package's "-name" in its error messages as
// "--name", as llmgw's usage and docs write flags.
func doubleDash(msg string) string {
	for _, p := range []string{"flag provided but not defined: -", " for flag -", "flag needs an argument: -", " for -"} {
		if i := strings.Index(msg, p); i >= 0 && !strings.HasPrefix(msg[i+len(p):], "-") {
			msg = msg[:i+len(p)] + "-" + msg[i+len(p):]
		}
	}
	return msg
}
