package grafana

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

var update = flag.Bool("update", false, "write the dashboards' JSON files from their definitions")

// TestDashboardsGenerated: each committed dashboard is what its
// definition makes, and no other JSON file lies here; -update writes them.
func TestDashboardsGenerated(t *testing.T) {
	all := All()
	for name, d := range all {
		want, err := d.JSON()
		if err != nil {
			t.Fatal(err)
		}
		if *update {
			if err := os.WriteFile(name, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(name)
		if err != nil {
			t.Fatalf("%v; run go -C deploy test ./grafana -run TestDashboardsGenerated -update", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not what its definition makes; run go -C deploy test ./grafana -run TestDashboardsGenerated -update", name)
		}
	}
	files, _ := filepath.Glob("*.json")
	for _, f := range files {
		if all[f] == nil {
			t.Errorf("%s is no dashboard's file", f)
		}
	}
}

// TestDashboardsShape: unique uids, panel ids and titles; every panel
// and query on the $datasource variable; the four variables on every
// dashboard; and each file reads back as a Grafana dashboard.
func TestDashboardsShape(t *testing.T) {
	uids := map[string]bool{}
	for name, d := range All() {
		if uids[d.UID] {
			t.Errorf("%s: uid %s twice", name, d.UID)
		}
		uids[d.UID] = true
		var vars []string
		for _, v := range d.Templating.List {
			vars = append(vars, v.Name)
		}
		if want := []string{"datasource", "model", "pool", "tenant"}; !slices.Equal(vars, want) {
			t.Errorf("%s: variables %v, want %v", name, vars, want)
		}
		titles := map[string]bool{}
		for _, p := range d.Panels {
			if titles[p.Title] || p.Title == "" || p.Description == "" {
				t.Errorf("%s: panel %q is untitled, undescribed or twice", name, p.Title)
			}
			titles[p.Title] = true
			if len(p.Targets) == 0 {
				t.Errorf("%s: panel %q has no query", name, p.Title)
			}
			for _, tg := range p.Targets {
				if tg.Datasource != promDS || tg.Expr == "" {
					t.Errorf("%s: panel %q: query %+v", name, p.Title, tg)
				}
			}
		}
		b, _ := os.ReadFile(name)
		var back map[string]any
		if err := json.Unmarshal(b, &back); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if back["uid"] != d.UID || len(back["panels"].([]any)) != len(d.Panels) {
			t.Errorf("%s reads back as uid %v with %d panels", name, back["uid"], len(back["panels"].([]any)))
		}
	}
}

// metricRE finds the metrics of llmgw a query reads, once labelsRE has
// taken out its label names; a recording rule's name
// (level:metric:operations) is matched by recordRE instead.
var (
	metricRE = regexp.MustCompile(`(?:^|[^a-zA-Z0-9_:])((?:llmgw|gen_ai)_[a-z0-9_]+)`)
	labelsRE = regexp.MustCompile(`(?:\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\))|\{[^}]*\}`)
	recordRE = regexp.MustCompile(`[a-z_]+:[a-z0-9_]+:[a-z0-9_]+`)
)

// TestQueriesReadKnownMetrics: every metric a panel or variable reads is
// in docs/reference/metrics.md, and every recording rule it
// reads is in deploy/prometheus/llmgw.rules.yml.
func TestQueriesReadKnownMetrics(t *testing.T) {
	known := knownMetrics(t)
	records := recordingRules(t)
	for name, d := range All() {
		var exprs []string
		for _, p := range d.Panels {
			for _, tg := range p.Targets {
				exprs = append(exprs, tg.Expr)
			}
		}
		for _, v := range d.Templating.List {
			exprs = append(exprs, v.Definition)
		}
		for _, e := range exprs {
			for _, m := range metricRE.FindAllStringSubmatch(labelsRE.ReplaceAllString(e, ""), -1) {
				base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m[1], "_bucket"), "_sum"), "_count")
				if !known[base] {
					t.Errorf("%s reads %s, which docs/reference/metrics.md does not list: %s", name, m[1], e)
				}
			}
			for _, r := range recordRE.FindAllString(e, -1) {
				if !records[r] {
					t.Errorf("%s reads %s, which no recording rule makes", name, r)
				}
			}
		}
	}
}

// knownMetrics are the metrics docs/reference/metrics.md lists, a table
// written from the gateway's registry.
func knownMetrics(t *testing.T) map[string]bool {
	t.Helper()
	known := map[string]bool{}
	doc, err := os.ReadFile("../../docs/reference/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z0-9_]+)`").FindAllStringSubmatch(string(doc), -1) {
		known[m[1]] = true
	}
	if len(known) < 30 {
		t.Fatalf("%d metrics known", len(known))
	}
	return known
}

// recordingRules are the names deploy/prometheus/llmgw.rules.yml records.
func recordingRules(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("../prometheus/llmgw.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct{ Record string }
		}
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				out[r.Record] = true
			}
		}
	}
	return out
}
