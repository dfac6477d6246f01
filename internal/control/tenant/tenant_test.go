package tenant

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMatchModel(t *testing.T) {
	tests := []struct {
		glob, name string
		want       bool
	}{
		{"*", "anything/at/all", true},
		{"*", "", true},
		{"", "", true},
		{"", "x", false},
		{"llama-3.1-70b", "llama-3.1-70b", true},
		{"llama-3.1-70b", "llama-3.1-70b-instruct", false},
		{"llama-3.1-70b", "Llama-3.1-70b", false}, // case-sensitive
		// '*' runs past '/': the shape most served model names have.
		{"meta-llama*", "meta-llama/Llama-3.1-8B", true},
		{"meta-llama/*", "meta-llama/Llama-3.1-8B", true},
		{"*/Llama-3.1-8B", "meta-llama/Llama-3.1-8B", true},
		{"*Llama*", "meta-llama/Llama-3.1-8B-Instruct", true},
		{"Qwen/*", "meta-llama/Qwen", false},
		{"*-8B", "meta-llama/Llama-3.1-8B-Instruct", false},
		{"a*b*c", "aXbYc", true},
		{"a*b*c", "abcbc", true},
		{"a*b*c", "acb", false},
		{"a**b", "ab", true},
		// Nothing but '*' is special: these match only themselves.
		{"llama-?", "llama-3", false},
		{"llama-?", "llama-?", true},
		{"llama-[0-9]", "llama-3", false},
		{"llama-[0-9]", "llama-[0-9]", true},
		{`llama-\*`, `llama-\x`, true},
	}
	for _, tt := range tests {
		if got := MatchModel(tt.glob, tt.name); got != tt.want {
			t.Errorf("MatchModel(%q, %q) = %v, want %v", tt.glob, tt.name, got, tt.want)
		}
	}
}

// A glob of many stars against a name that nearly matches costs at most
// the product of their lengths: the matcher never returns to an earlier
// star. A matcher that did would take exponential steps here.
func TestMatchModelBounded(t *testing.T) {
	glob := strings.Repeat("a*", 128) + "b"
	name := strings.Repeat("a", 4096)
	allocs := testing.AllocsPerRun(10, func() {
		if MatchModel(glob, name) {
			t.Fatal("matched a name without its last character")
		}
	})
	if allocs != 0 {
		t.Errorf("MatchModel allocated %v times a call", allocs)
	}
}

func TestAllows(t *testing.T) {
	k := &Key{Models: []string{"meta-llama*", "qwen3-8b"}}
	for _, tt := range []struct {
		names []string
		want  bool
	}{
		{[]string{"meta-llama/Llama-3.1-8B"}, true},
		{[]string{"llama-70b", "meta-llama/Llama-3.1-70B"}, true}, // by an alias
		{[]string{"qwen3-8b"}, true},
		{[]string{"qwen3-32b", "qwen"}, false},
	} {
		if got := k.Allows(tt.names...); got != tt.want {
			t.Errorf("Allows(%q) = %v, want %v", tt.names, got, tt.want)
		}
	}
	if !(&Key{}).Allows("anything") {
		t.Error("a key without globs refused a model")
	}
}

func TestAtLevel(t *testing.T) {
	for _, tt := range []struct{ path, level, want string }{
		{"acme/search/alice", LevelOrg, "acme"},
		{"acme/search/alice", LevelTeam, "acme/search"},
		{"acme/search/alice", LevelUser, "acme/search/alice"},
		{"acme", LevelTeam, "acme"},
		{"acme/search", LevelUser, "acme/search"},
		{"acme/search", "department", "acme"},
		{"acme/search/alice", "", "acme"}, // no level named: the org
		{"", LevelOrg, ""},
	} {
		if got := AtLevel(tt.path, tt.level); got != tt.want {
			t.Errorf("AtLevel(%q, %q) = %q, want %q", tt.path, tt.level, got, tt.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { AtLevel("acme/search/alice", LevelTeam) }); n != 0 {
		t.Errorf("AtLevel allocates %v times", n)
	}
}

// TestKeySees is which models of a catalog a key may use, each known by
// its name and its aliases.
func TestKeySees(t *testing.T) {
	models := [][]string{ // name, then aliases
		{"meta-llama/Llama-3.1-8B", "llama-8b"},
		{"meta-llama/Llama-3.1-70B", "llama-70b", "big"},
		{"Qwen/Qwen3-8B"},
		{"qwen3-32b"},
	}
	for _, tt := range []struct {
		name  string
		globs []string
		want  []string // names of the models the key sees
	}{
		{"no globs", nil, []string{"meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-70B", "Qwen/Qwen3-8B", "qwen3-32b"}},
		{"an empty list", []string{}, []string{"meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-70B", "Qwen/Qwen3-8B", "qwen3-32b"}},
		{"every model", []string{"*"}, []string{"meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-70B", "Qwen/Qwen3-8B", "qwen3-32b"}},
		{"a vendor", []string{"meta-llama/*"}, []string{"meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-70B"}},
		{"by an alias alone", []string{"big"}, []string{"meta-llama/Llama-3.1-70B"}},
		{"by a name", []string{"qwen3-32b"}, []string{"qwen3-32b"}},
		{"case-sensitive", []string{"qwen*"}, []string{"qwen3-32b"}},
		{"across a slash", []string{"*8B"}, []string{"meta-llama/Llama-3.1-8B", "Qwen/Qwen3-8B"}},
		{"globs add up", []string{"llama-8b", "Qwen/*"}, []string{"meta-llama/Llama-3.1-8B", "Qwen/Qwen3-8B"}},
		{"a glob that matches nothing", []string{"mistral*"}, nil},
	} {
		k := &Key{Models: tt.globs}
		var got []string
		for _, names := range models {
			if k.Allows(names...) {
				got = append(got, names[0])
			}
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: a key of %q sees %q, want %q", tt.name, tt.globs, got, tt.want)
		}
	}
}

// TestPeriod is the budget period holding a moment: its start and the
// next period's, in UTC whatever the moment's zone, across days, months,
// years and a leap day.
func TestPeriod(t *testing.T) {
	utc := func(y int, m time.Month, d, h, min, s, ns int) time.Time {
		return time.Date(y, m, d, h, min, s, ns, time.UTC)
	}
	tokyo := time.FixedZone("JST", 9*60*60)
	for _, tt := range []struct {
		period     string
		at         time.Time
		start, end time.Time
	}{
		{PeriodDay, utc(2026, 1, 15, 12, 0, 0, 0), utc(2026, 1, 15, 0, 0, 0, 0), utc(2026, 1, 16, 0, 0, 0, 0)},
		{PeriodDay, utc(2026, 1, 31, 23, 59, 59, 999999999), utc(2026, 1, 31, 0, 0, 0, 0), utc(2026, 2, 1, 0, 0, 0, 0)},
		{PeriodDay, utc(2026, 2, 1, 0, 0, 0, 0), utc(2026, 2, 1, 0, 0, 0, 0), utc(2026, 2, 2, 0, 0, 0, 0)},
		{PeriodDay, utc(2026, 12, 31, 18, 0, 0, 0), utc(2026, 12, 31, 0, 0, 0, 0), utc(2027, 1, 1, 0, 0, 0, 0)},
		{PeriodDay, utc(2028, 2, 28, 10, 0, 0, 0), utc(2028, 2, 28, 0, 0, 0, 0), utc(2028, 2, 29, 0, 0, 0, 0)},
		{PeriodDay, utc(2028, 2, 29, 10, 0, 0, 0), utc(2028, 2, 29, 0, 0, 0, 0), utc(2028, 3, 1, 0, 0, 0, 0)},
		// 08:00 on 1 March in Tokyo is still 28 February in UTC.
		{PeriodDay, time.Date(2026, 3, 1, 8, 0, 0, 0, tokyo), utc(2026, 2, 28, 0, 0, 0, 0), utc(2026, 3, 1, 0, 0, 0, 0)},

		{PeriodMonth, utc(2026, 1, 15, 12, 0, 0, 0), utc(2026, 1, 1, 0, 0, 0, 0), utc(2026, 2, 1, 0, 0, 0, 0)},
		{PeriodMonth, utc(2026, 1, 31, 23, 59, 59, 999999999), utc(2026, 1, 1, 0, 0, 0, 0), utc(2026, 2, 1, 0, 0, 0, 0)},
		{PeriodMonth, utc(2026, 2, 1, 0, 0, 0, 0), utc(2026, 2, 1, 0, 0, 0, 0), utc(2026, 3, 1, 0, 0, 0, 0)},
		{PeriodMonth, utc(2026, 2, 28, 23, 0, 0, 0), utc(2026, 2, 1, 0, 0, 0, 0), utc(2026, 3, 1, 0, 0, 0, 0)},
		{PeriodMonth, utc(2028, 2, 29, 23, 0, 0, 0), utc(2028, 2, 1, 0, 0, 0, 0), utc(2028, 3, 1, 0, 0, 0, 0)},
		{PeriodMonth, utc(2026, 12, 31, 23, 0, 0, 0), utc(2026, 12, 1, 0, 0, 0, 0), utc(2027, 1, 1, 0, 0, 0, 0)},
		{PeriodMonth, time.Date(2026, 3, 1, 8, 0, 0, 0, tokyo), utc(2026, 2, 1, 0, 0, 0, 0), utc(2026, 3, 1, 0, 0, 0, 0)},
		// A 31-day month after a 30-day one: a month is a calendar month,
		// not 30 days.
		{PeriodMonth, utc(2026, 5, 31, 0, 0, 0, 0), utc(2026, 5, 1, 0, 0, 0, 0), utc(2026, 6, 1, 0, 0, 0, 0)},
		// No period named: a month.
		{"", utc(2026, 1, 31, 12, 0, 0, 0), utc(2026, 1, 1, 0, 0, 0, 0), utc(2026, 2, 1, 0, 0, 0, 0)},
	} {
		start, end := PeriodStart(tt.period, tt.at), PeriodEnd(tt.period, tt.at)
		if !start.Equal(tt.start) || start.Location() != time.UTC {
			t.Errorf("PeriodStart(%q, %v) = %v, want %v", tt.period, tt.at, start, tt.start)
		}
		if !end.Equal(tt.end) || end.Location() != time.UTC {
			t.Errorf("PeriodEnd(%q, %v) = %v, want %v", tt.period, tt.at, end, tt.end)
		}
	}
}
