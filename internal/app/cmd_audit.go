package app

// `llmgw audit`: the audit trail, newest first, filtered by action, who,
// tenant subtree and a recent span of time, read straight from the store.

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/cli"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/audit"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
)

const auditAbout = `Prints the audit trail, newest first: key creates and revocations, tenant
limits set, sign-ins, failed sign-ins and sign-outs, and configuration
reloads, with who, what, when and from where. --tenant includes the tenants
below the path.`

// AuditCommand runs `llmgw audit`, printing the table on stdout.
func AuditCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("audit", "[flags] (--config FILE | --store URL)", auditAbout, stdout)
	var (
		configPath, storeURL, since, action string
		q                                   audit.Query
	)
	fs.StringVar(&configPath, "config", "", "configuration `file` naming the store")
	fs.StringVar(&storeURL, "store", "", "store `URL`: sqlite:PATH, postgres://... (overrides the config's)")
	fs.StringVar(&action, "action", "", "one action only, such as key.create or signin.failed: its `name` (unset: every action)")
	fs.StringVar(&q.Actor, "actor", "", "who: a subject or an email, exactly, as its `name` (unset: anyone)")
	fs.StringVar(&q.TenantPrefix, "tenant", "", "tenant `path`, with the tenants below it (unset: every entry)")
	fs.StringVar(&since, "since", "", "how far back: a `duration` such as 24h, or days such as 30d (unset: all that is kept)")
	fs.IntVar(&q.Limit, "limit", audit.DefaultEntries, "at most `N` entries, up to "+strconv.Itoa(audit.MaxEntries))
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := fs.NoArgs(); err != nil {
		return err
	}
	q.Action = audit.Action(action)
	if action != "" && !slices.Contains(audit.Actions, q.Action) {
		return fs.Errorf("--action: %q is not one of the trail's actions (%v)", action, audit.Actions)
	}
	if q.TenantPrefix != "" {
		if _, err := tenant.ParsePath(q.TenantPrefix); err != nil {
			return fs.Errorf("--tenant: %w", err)
		}
	}
	if q.Limit <= 0 || q.Limit > audit.MaxEntries {
		return fs.Errorf("--limit: must be 1 to %d, got %d", audit.MaxEntries, q.Limit)
	}
	now := time.Now()
	if since != "" {
		d, err := parseSince(since)
		if err != nil {
			return fs.Errorf("--since: %w", err)
		}
		q.Since = now.Add(-d)
	}
	q.Until = now.Add(time.Second)

	st, _, err := openStore(ctx, configPath, storeURL)
	if err != nil {
		return err
	}
	defer st.Close()
	es, err := st.Audit(ctx, q)
	if err != nil {
		return fmt.Errorf("reading the audit trail: %w", err)
	}
	return writeAuditTable(stdout, es)
}

// writeAuditTable prints entries in aligned columns; an empty cell shows
// as "-".
func writeAuditTable(w io.Writer, es []audit.Entry) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tWHO\tACTION\tTARGET\tTENANT\tFROM\tDETAIL")
	cell := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	for _, e := range es {
		who := e.Subject
		if e.Email != "" {
			who += " <" + e.Email + ">"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Time.UTC().Format(time.RFC3339), cell(who), e.Action,
			cell(e.Target), cell(e.Tenant), cell(e.Source), cell(e.Detail))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing the table: %w", err)
	}
	return nil
}
