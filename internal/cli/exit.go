package cli

// exit.go is what a command's error becomes: a message on stderr and an
// exit status.

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// Exit statuses of llmgw.
const (
	ExitOK      = 0 // done, or help printed
	ExitFailure = 1 // the command ran and failed
	ExitUsage   = 2 // the command line was wrong; nothing ran
)

// UsageError is a mistake on a command line: an unknown flag, a value that
// does not parse or is out of range, flags that do not go together, or a
// stray or missing argument. Exit reports it with status 2.
type UsageError struct {
	Cmd   string // "serve", "keys create"; empty for llmgw itself
	Err   error
	usage func(io.Writer) // nil: point to --help instead of printing it
}

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// BadUsage marks err as a mistake on cmd's command line, reported with a
// pointer to --help. A *UsageError, flag.ErrHelp and nil are returned as
// they are.
func BadUsage(cmd string, err error) error {
	var ue *UsageError
	if err == nil || errors.Is(err, flag.ErrHelp) || errors.As(err, &ue) {
		return err
	}
	return &UsageError{Cmd: cmd, Err: err}
}

// Exit reports err, which a command returned, on stderr and returns the
// process's exit status: 0 for nil and for flag.ErrHelp (the usage is
// already on stdout); 2 for a *UsageError, printed as "llmgw CMD: message"
// followed by the usage or a pointer to --help; 1 for any other error,
// printed as "llmgw: message".
func Exit(err error, stderr io.Writer) int {
	var ue *UsageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return ExitOK
	case errors.As(err, &ue):
		name := "llmgw"
		if ue.Cmd != "" {
			name += " " + ue.Cmd
		}
		fmt.Fprintf(stderr, "%s: %v\n", name, ue.Err)
		if ue.usage != nil {
			ue.usage(stderr)
		} else {
			fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", name)
		}
		return ExitUsage
	}
	fmt.Fprintf(stderr, "llmgw: %v\n", err)
	return ExitFailure
}
