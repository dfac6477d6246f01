package app

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/store"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
)

// usageStore is a SQLite store holding a small ledger: two hours ago, two
// days ago and forty days ago, over two orgs and three models.
func usageStore(t *testing.T) string {
	t.Helper()
	url := "sqlite:" + filepath.Join(t.TempDir(), "llmgw.db")
	st, err := store.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	rec := func(id string, ago time.Duration, key, ten, model string, status int, prompt, completion, cached int64, cost float64) usage.Record {
		return usage.Record{ID: id, Time: now.Add(-ago), KeyID: key, Tenant: ten, Model: model, Status: status,
			PromptTokens: prompt, CompletionTokens: completion, CachedTokens: cached, CostUSD: cost}
	}
	recs := []usage.Record{
		rec("1", 2*time.Hour, "k1", "acme/search", "llama", 200, 100, 50, 10, 0.25),
		rec("2", 2*time.Hour, "k1", "acme/search", "llama", 429, 80, 0, 0, 0),
		rec("3", 2*time.Hour, "k2", "acme/ads/bob", "qwen", 200, 1000, 200, 0, 1.5),
		rec("4", 48*time.Hour, "k2", "acme/ads/bob", "qwen", 200, 10, 20, 0, 0.125),
		rec("5", 2*time.Hour, "k3", "acme2", "llama", 200, 7, 7, 0, 0.5),
		rec("6", 40*24*time.Hour, "k3", "acme2", "mistral", 500, 3, 0, 0, 0),
		rec("7", time.Hour, "", "", "llama", 200, 5, 5, 0, 0),
	}
	if err := st.AddUsage(t.Context(), recs); err != nil {
		t.Fatal(err)
	}
	return url
}

// runUsage runs `llmgw usage args...` and returns stdout's cells, row by row.
func runUsage(t *testing.T, args ...string) ([][]string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := UsageCommand(context.Background(), args, &stdout, &stderr)
	var cells [][]string
	for _, line := range strings.Split(strings.TrimRight(stdout.String(), "\n"), "\n") {
		if line != "" {
			cells = append(cells, strings.Fields(line))
		}
	}
	return cells, stderr.String(), err
}

func TestUsageCommand(t *testing.T) {
	url := usageStore(t)
	head := func(g string) []string {
		return []string{g, "REQUESTS", "ERRORS", "PROMPT", "COMPLETION", "CACHED", "COST_USD"}
	}
	tests := []struct {
		name string
		args []string
		want [][]string
	}{
		{"all time in one total", nil, [][]string{
			head("GROUP"),
			{"total", "7", "2", "1205", "282", "10", "2.375000"},
		}},
		{"by model since a day", []string{"--by", "model", "--since", "24h"}, [][]string{
			head("MODEL"),
			{"llama", "4", "1", "192", "62", "10", "0.750000"},
			{"qwen", "1", "0", "1000", "200", "0", "1.500000"},
			{"total", "5", "1", "1192", "262", "10", "2.250000"},
		}},
		{"an org's tenants over a month", []string{"--tenant", "acme", "--since", "30d", "--by", "tenant"}, [][]string{
			head("TENANT"),
			{"acme/ads/bob", "2", "0", "1010", "220", "0", "1.625000"},
			{"acme/search", "2", "1", "180", "50", "10", "0.250000"},
			{"total", "4", "1", "1190", "270", "10", "1.875000"},
		}},
		{"by key, the keyless shown as -", []string{"--since", "3h", "--by", "key"}, [][]string{
			head("KEY"),
			{"-", "1", "0", "5", "5", "0", "0.000000"},
			{"k1", "2", "1", "180", "50", "10", "0.250000"},
			{"k2", "1", "0", "1000", "200", "0", "1.500000"},
			{"k3", "1", "0", "7", "7", "0", "0.500000"},
			{"total", "5", "1", "1192", "262", "10", "2.250000"},
		}},
		{"one key", []string{"--key", "k3", "--by", "model"}, [][]string{
			head("MODEL"),
			{"llama", "1", "0", "7", "7", "0", "0.500000"},
			{"mistral", "1", "1", "3", "0", "0", "0.000000"},
			{"total", "2", "1", "10", "7", "0", "0.500000"},
		}},
		{"nothing selected", []string{"--tenant", "nobody", "--by", "model"}, [][]string{
			head("MODEL"),
			{"total", "0", "0", "0", "0", "0", "0.000000"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, errOut, err := runUsage(t, append([]string{"--store", url}, tt.args...)...)
			if err != nil {
				t.Fatalf("usage %v: %v\n%s", tt.args, err, errOut)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("usage %v (-want +got):\n%s", tt.args, diff)
			}
		})
	}
}

func TestUsageCommandAligns(t *testing.T) {
	url := usageStore(t)
	var stdout bytes.Buffer
	if err := UsageCommand(t.Context(), []string{"--store", url, "--by", "tenant"}, &stdout, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	col := strings.Index(lines[0], "REQUESTS")
	for _, l := range lines[1:] {
		if len(l) <= col || l[col-1] != ' ' || l[col] == ' ' {
			t.Errorf("row %q does not start REQUESTS at column %d:\n%s", l, col, stdout.String())
		}
	}
}

func TestUsageCommandErrors(t *testing.T) {
	dir := t.TempDir()
	url := "sqlite:" + filepath.Join(dir, "never.db")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--store", url, "--by", "pool"}, `invalid value "pool" for flag --by: want model, tenant or key`},
		{[]string{"--store", url, "--since", "yesterday"}, `--since: "yesterday" is not a duration`},
		{[]string{"--store", url, "--since", "-2h"}, "--since: must be positive"},
		{[]string{"--store", url, "--tenant", "acme//x"}, "--tenant: tenant path"},
		{[]string{"--store", url, "extra"}, `unexpected argument "extra"`},
		{[]string{"--store", "mysql://u:secret@db/x"}, `scheme "mysql" is not supported`},
		{[]string{"--config", filepath.Join(dir, "missing.yaml")}, "load config"},
		{[]string{"--nope"}, "flag provided but not defined"},
	}
	for _, tt := range tests {
		_, _, err := runUsage(t, tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("usage %v: got %v, want an error containing %q", tt.args, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("usage %v: error shows a password: %v", tt.args, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "never.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("refused commands created the database: %v", err)
	}
	var stdout bytes.Buffer
	if err := UsageCommand(t.Context(), []string{"-h"}, &stdout, io.Discard); !errors.Is(err, flag.ErrHelp) || !strings.HasPrefix(stdout.String(), "usage: llmgw usage") {
		t.Errorf("usage -h: got %v and %q, want flag.ErrHelp and the usage text on stdout", err, stdout.String())
	}
}
