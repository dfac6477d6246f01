package catalog

import (
	"strings"
	"testing"
	"time"
)

func TestPriceCost(t *testing.T) {
	for _, tt := range []struct {
		price              Price
		prompt, completion int64
		want               float64
	}{
		{Price{InputPerMillion: 3, OutputPerMillion: 15}, 1_000_000, 0, 3},
		{Price{InputPerMillion: 3, OutputPerMillion: 15}, 0, 1_000_000, 15},
		{Price{InputPerMillion: 3, OutputPerMillion: 15}, 1000, 500, 0.0105},
		{Price{InputPerMillion: 3, OutputPerMillion: 15}, 1, 0, 0.000003},
		{Price{InputPerMillion: 3, OutputPerMillion: 15}, 0, 0, 0},
		{Price{InputPerMillion: 0.15, OutputPerMillion: 0.6}, 2_000_000, 1_000_000, 0.9},
		{Price{}, 1_000_000, 1_000_000, 0}, // a model without a price costs nothing
		{Price{OutputPerMillion: 10}, 1_000_000, 250_000, 2.5},
	} {
		if got := tt.price.Cost(tt.prompt, tt.completion); got != tt.want {
			t.Errorf("%+v.Cost(%d, %d) = %v, want %v", tt.price, tt.prompt, tt.completion, got, tt.want)
		}
	}
}

// A service tier's price replaces the figures it sets; a tier it does
// not list, or none, costs the model's own.
func TestPriceAt(t *testing.T) {
	p := Price{InputPerMillion: 2, OutputPerMillion: 8, ServiceTiers: map[string]TierPrice{
		"priority": {InputPerMillion: 4, OutputPerMillion: 16},
		"flex":     {InputPerMillion: 1},
	}}
	for _, tt := range []struct {
		tier    string
		in, out float64
	}{{"priority", 4, 16}, {"flex", 1, 8}, {"scale", 2, 8}, {"", 2, 8}} {
		if got := p.At(tt.tier); got.InputPerMillion != tt.in || got.OutputPerMillion != tt.out {
			t.Errorf("At(%q) = %+v, want %v in, %v out", tt.tier, got, tt.in, tt.out)
		}
	}
}

// A model allows a billed field billed_fields.allow names, and
// service_tier only at a tier its price lists.
func TestAllows(t *testing.T) {
	m := Model{BilledFields: BilledFields{Allow: []string{"service_tier", "store"}},
		Price: Price{ServiceTiers: map[string]TierPrice{"priority": {InputPerMillion: 4}}}}
	for _, tt := range []struct {
		field, tier string
		want        bool
	}{{"store", "", true}, {"service_tier", "priority", true}, {"service_tier", "flex", false}, {"prediction", "", false}} {
		if got := m.Allows(tt.field, tt.tier); got != tt.want {
			t.Errorf("Allows(%q, %q) = %v", tt.field, tt.tier, got)
		}
	}
}

// TestResolve finds models by name and alias, and nothing by a pool's or
// an upstream's name.
func TestResolve(t *testing.T) {
	c, err := New([]Pool{{Name: "gpu"}}, []Model{
		{Name: "llama-8b", Aliases: []string{"small", "default"}, Pool: "gpu", Upstream: "meta-llama/Llama-3.1-8B"},
		{Name: "llama-70b", Aliases: []string{"big"}, Pool: "gpu"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, want string }{
		{"llama-8b", "llama-8b"},
		{"small", "llama-8b"},
		{"default", "llama-8b"},
		{"big", "llama-70b"},
		{"llama-70b", "llama-70b"},
		{"meta-llama/Llama-3.1-8B", ""},
		{"gpu", ""},
		{"Big", ""},
		{"", ""},
	} {
		m, ok := c.Resolve(tt.name)
		got := ""
		if ok {
			got = m.Name
		}
		if got != tt.want {
			t.Errorf("Resolve(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestNextFallback walks a model's fallbacks in its order, by name or
// alias, each once, and ends.
func TestNextFallback(t *testing.T) {
	c, err := New([]Pool{{Name: "gpu"}}, []Model{
		{Name: "a", Pool: "gpu", Fallbacks: []string{"big", "c"}},
		{Name: "b", Aliases: []string{"big"}, Pool: "gpu"},
		{Name: "c", Pool: "gpu", Fallbacks: []string{"a"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := c.Resolve("a")
	var walk []string
	for m := c.NextFallback(a, a); m != nil; m = c.NextFallback(a, m) {
		walk = append(walk, m.Name)
	}
	if got := strings.Join(walk, " "); got != "b c" {
		t.Errorf("a's fallbacks walked as %q, want \"b c\"", got)
	}
	b, _ := c.Resolve("b")
	if m := c.NextFallback(b, b); m != nil {
		t.Errorf("a model with no fallbacks falls back to %s", m.Name)
	}
}

func TestNewRefuses(t *testing.T) {
	gpu := []Pool{{Name: "gpu"}}
	for _, tt := range []struct {
		name   string
		pools  []Pool
		models []Model
		want   string
	}{
		{"a pool twice", []Pool{{Name: "gpu"}, {Name: "gpu"}}, nil, `pool "gpu" is defined twice`},
		{"a pool not defined", gpu, []Model{{Name: "m", Pool: "cpu"}}, `model "m": pool "cpu" is not defined`},
		{"a name twice", gpu, []Model{{Name: "m", Pool: "gpu"}, {Name: "m", Pool: "gpu"}}, `model name "m" is used by both "m" and "m"`},
		{"an alias that is another's name", gpu, []Model{{Name: "a", Pool: "gpu"}, {Name: "b", Aliases: []string{"a"}, Pool: "gpu"}}, `model name "a" is used by both "a" and "b"`},
		{"a fallback not a model", gpu, []Model{{Name: "m", Pool: "gpu", Fallbacks: []string{"n"}}}, `model "m": fallback "n" is not a model`},
	} {
		_, err := New(tt.pools, tt.models)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want an error saying %s", tt.name, err, tt.want)
		}
	}
}

// TestClassSLO is a priority class's SLO, each figure its own or else the
// model's.
func TestClassSLO(t *testing.T) {
	m := Model{
		SLO: SLO{TTFTp99: 2 * time.Second, TPOTp99: 50 * time.Millisecond},
		Admission: Admission{Classes: map[string]SLO{
			"critical":  {TTFTp99: 500 * time.Millisecond, TPOTp99: 20 * time.Millisecond},
			"sheddable": {TTFTp99: 10 * time.Second},
		}},
	}
	for _, tt := range []struct {
		class string
		want  SLO
	}{
		{"critical", SLO{TTFTp99: 500 * time.Millisecond, TPOTp99: 20 * time.Millisecond}},
		{"sheddable", SLO{TTFTp99: 10 * time.Second, TPOTp99: 50 * time.Millisecond}},
		{"standard", SLO{TTFTp99: 2 * time.Second, TPOTp99: 50 * time.Millisecond}},
	} {
		if got := m.ClassSLO(tt.class); got != tt.want {
			t.Errorf("ClassSLO(%q) = %+v, want %+v", tt.class, got, tt.want)
		}
	}
}
