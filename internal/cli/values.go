package cli

// values.go is the flag kinds the flag package lacks: one of a few words,
// and a log level.

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
)

// choices is a flag value limited to a few words, which usage shows as
// its metavar, such as keys|none.
type choices interface {
	choices() []string
}

// choiceValue is a string flag that takes only one of its words.
type choiceValue struct {
	p     *string
	words []string
}

var _ choices = (*choiceValue)(nil)

func (c *choiceValue) choices() []string { return c.words }

func (c *choiceValue) String() string {
	if c == nil || c.p == nil {
		return ""
	}
	return *c.p
}

func (c *choiceValue) Set(s string) error {
	if !slices.Contains(c.words, s) {
		return fmt.Errorf("want %s", orList(c.words))
	}
	*c.p = s
	return nil
}

// ChoiceVar defines a flag that takes one of words, stored in p. value is
// its default, which may be empty to mean "not given"; any other word is an
// error naming the flag and the words.
func (fs *FlagSet) ChoiceVar(p *string, name, value string, words []string, usage string) {
	*p = value
	fs.Var(&choiceValue{p: p, words: words}, name, usage)
}

// Choice is ChoiceVar returning where the value is stored.
func (fs *FlagSet) Choice(name, value string, words []string, usage string) *string {
	p := new(string)
	fs.ChoiceVar(p, name, value, words, usage)
	return p
}

// LogLevels are what --log-level takes, most verbose first.
var LogLevels = []string{"debug", "info", "warn", "error"}

// levelValue is a log level flag: one of LogLevels, in any case.
type levelValue struct{ p *slog.Level }

var _ choices = (*levelValue)(nil)

func (l *levelValue) choices() []string { return LogLevels }

func (l *levelValue) String() string {
	if l == nil || l.p == nil {
		return ""
	}
	return strings.ToLower(l.p.String())
}

func (l *levelValue) Set(s string) error {
	s = strings.ToLower(s)
	if !slices.Contains(LogLevels, s) {
		return fmt.Errorf("want %s", orList(LogLevels))
	}
	return l.p.UnmarshalText([]byte(s))
}

// LogLevel defines --log-level, which every long-running command has, with
// def as its default, and returns where the level is stored.
func (fs *FlagSet) LogLevel(def slog.Level, usage string) *slog.Level {
	p := new(slog.Level)
	*p = def
	fs.Var(&levelValue{p: p}, "log-level", usage)
	return p
}

// orList is words as "a, b or c".
func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}
