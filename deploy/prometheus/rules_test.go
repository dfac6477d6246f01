package prometheus

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

const (
	rulesFile  = "llmgw.rules.yml"
	runbookDir = "../../docs/runbooks"
	runbookURL = "https://gitea.mynodes.xyz/ilker/llmgw/src/branch/main/docs/runbooks/"
)

// requireTool is the path of a Prometheus tool; without it the test
// skips, or fails when LLMGW_TEST_PROMETHEUS is set.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("LLMGW_TEST_PROMETHEUS") != "" {
			t.Fatalf("LLMGW_TEST_PROMETHEUS is set and %s is missing: apt-get install prometheus", name)
		}
		t.Skipf("%s not found (Debian's prometheus package); set LLMGW_TEST_PROMETHEUS to fail instead", name)
	}
	return p
}

// rule is one rule of llmgw.rules.yml.
type rule struct {
	Record      string
	Alert       string
	Expr        string
	For         string
	Labels      map[string]string
	Annotations map[string]string
}

// loadRules reads a rules file.
func loadRules(t *testing.T, path string) []rule {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Name  string
			Rules []rule
		}
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var out []rule
	for _, g := range f.Groups {
		out = append(out, g.Rules...)
	}
	if len(out) < 10 {
		t.Fatalf("%s has %d rules", path, len(out))
	}
	return out
}

// alerts are the alerting rules of rs.
func alerts(rs []rule) []rule {
	var out []rule
	for _, r := range rs {
		if r.Alert != "" {
			out = append(out, r)
		}
	}
	return out
}

// TestPromtoolCheckRules: promtool check rules passes llmgw.rules.yml.
func TestPromtoolCheckRules(t *testing.T) {
	promtool := requireTool(t, "promtool")
	out, err := exec.Command(promtool, "check", "rules", rulesFile).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// ruleTestFiles are promtool's unit tests of the rules.
var ruleTestFiles = []string{"llmgw.rules.test.yml", "llmgw.rules.slow.test.yml"}

// TestPromtoolTestRules: the rules' unit tests pass.
func TestPromtoolTestRules(t *testing.T) {
	promtool := requireTool(t, "promtool")
	out, err := exec.Command(promtool, append([]string{"test", "rules"}, ruleTestFiles...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// TestEveryAlertTestedBothWays: every alert has a unit test case where it
// fires and one where it stays silent, and the unit tests name no alert
// the rules lack.
func TestEveryAlertTestedBothWays(t *testing.T) {
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, name := range ruleTestFiles {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		var f struct {
			RuleFiles []string `yaml:"rule_files"`
			Tests     []struct {
				AlertRuleTest []struct {
					Alertname string
					ExpAlerts []map[string]any `yaml:"exp_alerts"`
				} `yaml:"alert_rule_test"`
			}
		}
		if err := yaml.Unmarshal(b, &f); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !slices.Equal(f.RuleFiles, []string{rulesFile}) {
			t.Errorf("%s loads %v, want [%s]", name, f.RuleFiles, rulesFile)
		}
		for _, tc := range f.Tests {
			for _, a := range tc.AlertRuleTest {
				if len(a.ExpAlerts) > 0 {
					fires[a.Alertname] = true
				} else {
					silent[a.Alertname] = true
				}
			}
		}
	}
	names := map[string]bool{}
	for _, a := range alerts(loadRules(t, rulesFile)) {
		names[a.Alert] = true
		if !fires[a.Alert] {
			t.Errorf("%s has no unit test where it fires", a.Alert)
		}
		if !silent[a.Alert] {
			t.Errorf("%s has no unit test where it stays silent", a.Alert)
		}
	}
	for n := range fires {
		if !names[n] {
			t.Errorf("the unit tests expect %s, which no rule defines", n)
		}
	}
}

// TestAlertsHaveRunbooks: every alert has a severity, a summary and a
// runbook_url that points at its runbook, docs/runbooks/<alert>.md,
// which exists and names it; and every runbook is an alert's.
func TestAlertsHaveRunbooks(t *testing.T) {
	names := map[string]bool{}
	for _, a := range alerts(loadRules(t, rulesFile)) {
		names[a.Alert] = true
		if s := a.Labels["severity"]; s != "critical" && s != "warning" {
			t.Errorf("%s: severity %q, want critical or warning", a.Alert, s)
		}
		if a.Annotations["summary"] == "" {
			t.Errorf("%s has no summary", a.Alert)
		}
		if got, want := a.Annotations["runbook_url"], runbookURL+a.Alert+".md"; got != want {
			t.Errorf("%s: runbook_url %q, want %q", a.Alert, got, want)
		}
		b, err := os.ReadFile(filepath.Join(runbookDir, a.Alert+".md"))
		if err != nil {
			t.Errorf("%s has no runbook: %v", a.Alert, err)
			continue
		}
		if !strings.HasPrefix(string(b), "# "+a.Alert+"\n") {
			t.Errorf("docs/runbooks/%s.md does not start with its title, # %s", a.Alert, a.Alert)
		}
	}
	books, _ := filepath.Glob(filepath.Join(runbookDir, "*.md"))
	for _, p := range books {
		if n := strings.TrimSuffix(filepath.Base(p), ".md"); !names[n] && n != "README" {
			t.Errorf("docs/runbooks/%s.md is no alert's runbook", n)
		}
	}
}
