package app

// `llmgw usage`: the ledger's sums as a table, per model, tenant or key,
// for a tenant subtree and a recent span of time, read straight from the
// store.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/cli"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
)

const usageAbout = `Prints requests, errors (status 400 and above), tokens and cost from the
store's usage ledger, one row per group and a total. --tenant includes the
tenants below the path.`

// UsageCommand runs `llmgw usage`, printing the table on stdout; errors
// go to stderr.
func UsageCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("usage", "[flags] (--config FILE | --store URL)", usageAbout, stdout)
	var (
		configPath, storeURL string
		q                    usage.Query
		since                string
	)
	fs.StringVar(&configPath, "config", "", "configuration `file` naming the store")
	fs.StringVar(&storeURL, "store", "", "store `URL`: sqlite:PATH, postgres://... (overrides the config's)")
	fs.StringVar(&q.TenantPrefix, "tenant", "", "tenant `path` to sum, with the tenants below it (unset: every tenant)")
	fs.StringVar(&q.KeyID, "key", "", "key `ID` to sum (unset: every key)")
	fs.StringVar(&since, "since", "", "how far back to sum: a `duration` such as 24h, or days such as 30d (unset: all time)")
	fs.ChoiceVar(&q.By, "by", "", []string{usage.ByModel, usage.ByTenant, usage.ByKey}, "group the rows by model, tenant or key (unset: one total)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := fs.NoArgs(); err != nil {
		return err
	}
	// Check everything before opening the store, so a typo creates no
	// database file.
	if q.TenantPrefix != "" {
		if _, err := tenant.ParsePath(q.TenantPrefix); err != nil {
			return fs.Errorf("--tenant: %w", err)
		}
	}
	now := time.Now()
	if since != "" {
		d, err := parseSince(since)
		if err != nil {
			return fs.Errorf("--since: %w", err)
		}
		q.Since = now.Add(-d)
	}
	q.Until = now

	st, _, err := openStore(ctx, configPath, storeURL)
	if err != nil {
		return err
	}
	defer st.Close()
	rows, err := st.Usage(ctx, q)
	if err != nil {
		return fmt.Errorf("reading usage: %w", err)
	}
	return writeUsageTable(stdout, q.By, rows)
}

// parseSince reads a positive duration in Go's syntax, or a whole number
// of days such as 30d.
func parseSince(s string) (time.Duration, error) {
	var d time.Duration
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil {
			return 0, fmt.Errorf("%q is not a duration such as 24h or 30d", s)
		}
		d = time.Duration(days) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("%q is not a duration such as 24h or 30d", s)
		}
	}
	if d <= 0 {
		return 0, errors.New("must be positive, got " + s)
	}
	return d, nil
}

// writeUsageTable prints rows, then their total, in aligned columns. The
// first column is headed by what the rows are grouped by; an empty group
// (no tenant, no key) shows as "-".
func writeUsageTable(w io.Writer, by string, rows []usage.Row) error {
	head := "GROUP"
	if by != "" {
		head = strings.ToUpper(by)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "%s\tREQUESTS\tERRORS\tPROMPT\tCOMPLETION\tCACHED\tCOST_USD\n", head)
	var total usage.Row
	line := func(name string, r usage.Row) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%.6f\n", name, r.Requests, r.Errors, r.PromptTokens, r.CompletionTokens, r.CachedTokens, r.CostUSD)
	}
	for _, r := range rows {
		if by != "" {
			name := r.Group
			if name == "" {
				name = "-"
			}
			line(name, r)
		}
		total.Requests += r.Requests
		total.Errors += r.Errors
		total.PromptTokens += r.PromptTokens
		total.CompletionTokens += r.CompletionTokens
		total.CachedTokens += r.CachedTokens
		total.CostUSD += r.CostUSD
	}
	line("total", total)
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing the table: %w", err)
	}
	return nil
}
