package tenant

import (
	"strings"
	"testing"
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
