package app

// `llmgw keys`: create, list and revoke API keys straight in the store, for
// a first key before any gateway runs and for scripts. Creation goes through
// keys.Create, as the admin API's does, so both accept the same keys.

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
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/keys"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/store"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
)

const keysAbout = `Creates, lists and revokes API keys straight in the store, for a first key
before any gateway runs and for scripts.`

// keysCommands are the subcommands of `llmgw keys`.
var keysCommands = []cli.Command{
	{Name: "create", Summary: "create a key and print it, this once, on stdout"},
	{Name: "list", Summary: "list the keys: what each may do, never its secret"},
	{Name: "revoke", Summary: "revoke a key by its id"},
}

// KeysCommand runs `llmgw keys create|list|revoke`. Only a created key's
// plaintext, the list and help go to stdout; everything else goes to stderr.
func KeysCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("keys", "COMMAND [flags] [args]", keysAbout, stdout)
	fs.Commands = keysCommands
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fs.UsageErrorf("a subcommand is needed: create, list or revoke")
	}
	sub, rest := fs.Arg(0), fs.Args()[1:]
	if sub == "help" {
		if len(rest) == 0 {
			fs.WriteUsage(stdout)
			return nil
		}
		sub, rest = rest[0], []string{"--help"}
	}
	switch sub {
	case "create":
		return keysCreate(ctx, rest, stdout, stderr)
	case "list":
		return keysList(ctx, rest, stdout)
	case "revoke":
		return keysRevoke(ctx, rest, stdout, stderr)
	}
	return fs.UsageErrorf("unknown subcommand %q; want create, list or revoke", sub)
}

// keysStoreFlags are the flags that say which store to open.
type keysStoreFlags struct {
	configPath, storeURL string
}

// newKeysFlagSet is the flags of `llmgw keys sub`, starting with those
// that name the store.
func newKeysFlagSet(sub, synopsis, about string, stdout io.Writer) (*cli.FlagSet, *keysStoreFlags) {
	fs := cli.NewFlagSet("keys "+sub, synopsis, about, stdout)
	var sf keysStoreFlags
	fs.StringVar(&sf.configPath, "config", "", "configuration `file` naming the store")
	fs.StringVar(&sf.storeURL, "store", "", "store `URL`: sqlite:PATH, postgres://... (overrides the config's)")
	return fs, &sf
}

// parseKeysFlags parses args with flags and arguments in any order, and returns
// the arguments.
func parseKeysFlags(fs *cli.FlagSet, args []string) ([]string, error) {
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return rest, nil
		}
		rest = append(rest, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func (sf *keysStoreFlags) open(ctx context.Context) (store.Store, error) {
	st, _, err := openStore(ctx, sf.configPath, sf.storeURL)
	return st, err
}

// keysFlagNames maps a keys.Spec field, as a FieldError names it, to its flag.
var keysFlagNames = map[string]string{
	"tenant":        "--tenant",
	"name":          "--name",
	"models":        "--models",
	"tools":         "--tools",
	"tool_rpm":      "--tool-rpm",
	"rpm":           "--rpm",
	"tpm":           "--tpm",
	"budget_tokens": "--budget-tokens",
	"budget_usd":    "--budget-usd",
	"period":        "--period",
	"priority":      "--priority",
	"expires_in":    "--expires",
}

const keysCreateAbout = `Creates an API key for a tenant, with the models and MCP tools it may use, its rate
limits, budgets, priority and lifetime, and prints the key alone on stdout:
it is shown this once. Flags and the key's fields are checked before the
store is opened.`

func keysCreate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, sf := newKeysFlagSet("create", "[flags] (--config FILE | --store URL) --tenant PATH", keysCreateAbout, stdout)
	var (
		spec          keys.Spec
		models, tools string
	)
	fs.StringVar(&spec.Tenant, "tenant", "", "tenant `path` the key belongs to: org, org/team or org/team/user")
	fs.StringVar(&spec.Name, "name", "", "a `name` for people to recognise the key by")
	fs.StringVar(&models, "models", "", "comma-separated `list` of globs of the models the key may use (unset: every model)")
	fs.StringVar(&tools, "tools", "", "comma-separated `list` of globs of the MCP tools the key may use, as /mcp names them (unset: every tool)")
	fs.Int64Var(&spec.RPM, "rpm", 0, "requests a minute (0: no limit)")
	fs.Int64Var(&spec.TPM, "tpm", 0, "tokens a minute (0: no limit)")
	fs.Int64Var(&spec.ToolRPM, "tool-rpm", 0, "MCP tool calls a minute (0: no limit)")
	fs.Int64Var(&spec.BudgetTokens, "budget-tokens", 0, "tokens a budget period (0: no budget)")
	fs.Float64Var(&spec.BudgetUSD, "budget-usd", 0, "US dollars a budget period (0: no budget)")
	fs.ChoiceVar(&spec.Period, "period", "", []string{tenant.PeriodDay, tenant.PeriodMonth}, "the budgets' period (default month)")
	fs.ChoiceVar(&spec.Priority, "priority", "", []string{tenant.PriorityCritical, tenant.PriorityStandard, tenant.PrioritySheddable}, "the key's priority class under load (default standard)")
	fs.StringVar(&spec.ExpiresIn, "expires", "", "lifetime: a `duration` such as 720h, or days such as 90d (unset: never)")
	rest, err := parseKeysFlags(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fs.UsageErrorf("unexpected argument %q", rest[0])
	}
	spec.Models, spec.Tools = globList(models), globList(tools)
	// Check before opening the store, so a typo creates no database file.
	if _, err := spec.Validate(); err != nil {
		return cli.BadUsage("keys create", keysFlagError(err))
	}
	st, err := sf.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	plain, k, err := keys.Create(ctx, st, spec, time.Now())
	if err != nil {
		return keysFlagError(err)
	}
	fmt.Fprintln(stdout, plain)
	fmt.Fprintf(stderr, "Created key %s for tenant %s. The key above is shown only this once: store it now.\n", k.ID, k.Tenant)
	return nil
}

// keysFlagError words a keys.FieldError with the flag's name instead of the
// JSON field's.
func keysFlagError(err error) error {
	fe, ok := keys.AsFieldError(err)
	if !ok {
		return err
	}
	field, _, _ := strings.Cut(fe.Field, "[")
	if name, ok := keysFlagNames[field]; ok {
		return fmt.Errorf("%s: %s", name, fe.Message)
	}
	return err
}

const keysListAbout = `Lists the keys in the store as a table: each key's id, name, tenant, models,
limits, budgets, priority, dates and status; never its secret or hash.`

func keysList(ctx context.Context, args []string, stdout io.Writer) error {
	fs, sf := newKeysFlagSet("list", "[flags] (--config FILE | --store URL)", keysListAbout, stdout)
	rest, err := parseKeysFlags(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fs.UsageErrorf("unexpected argument %q", rest[0])
	}
	st, err := sf.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	ks, err := st.Keys(ctx)
	if err != nil {
		return fmt.Errorf("listing keys: %w", err)
	}
	writeKeyTable(stdout, ks, time.Now())
	return nil
}

// writeKeyTable writes keys as an aligned table: what each is and may do,
// and never its secret or hash.
func writeKeyTable(w io.Writer, ks []tenant.Key, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tTENANT\tMODELS\tRPM\tTPM\tBUDGET\tPRIORITY\tCREATED\tEXPIRES\tSTATUS")
	for i := range ks {
		k := &ks[i]
		models := "*"
		if len(k.Models) > 0 {
			models = strings.Join(k.Models, ",")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			k.ID, cellText(k.Name), k.Tenant, models,
			cellCount(k.Limits.RPM), cellCount(k.Limits.TPM), cellBudget(k.Limits),
			cellText(k.Priority), k.Created.UTC().Format(keysTableTime), cellTime(k.Expires), keys.Status(k, now))
	}
	tw.Flush()
}

const keysTableTime = "2006-01-02 15:04"

func cellText(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func cellCount(n int64) string {
	if n == 0 {
		return "-"
	}
	return strconv.FormatInt(n, 10)
}

func cellTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(keysTableTime)
}

// cellBudget is a key's budgets in one cell: "1000000 tok/month, $20.00/month".
func cellBudget(l tenant.Limits) string {
	period := l.Period
	if period == "" {
		period = tenant.PeriodMonth
	}
	var parts []string
	if l.BudgetTokens > 0 {
		parts = append(parts, fmt.Sprintf("%d tok/%s", l.BudgetTokens, period))
	}
	if l.BudgetUSD > 0 {
		parts = append(parts, fmt.Sprintf("$%.2f/%s", l.BudgetUSD, period))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

const keysRevokeAbout = `Revokes the key with the id ID (key_ and 12 characters, as keys list shows).
Running gateways refuse it within a second. Revoking a revoked key is not an
error.`

func keysRevoke(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, sf := newKeysFlagSet("revoke", "[flags] (--config FILE | --store URL) ID", keysRevokeAbout, stdout)
	rest, err := parseKeysFlags(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return fs.UsageErrorf("takes one key id, got %d arguments", len(rest))
	}
	id := rest[0]
	if !keys.ValidID(id) {
		// Not repeated: it might be the key itself, pasted by mistake.
		return fs.Errorf("the argument is not a key id (key_ and 12 characters, as keys list shows)")
	}
	st, err := sf.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	k, err := st.Key(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("keys revoke: no key %s in the store", id)
	}
	if err != nil {
		return fmt.Errorf("keys revoke: reading key %s: %w", id, err)
	}
	if !k.Revoked.IsZero() {
		fmt.Fprintf(stderr, "Key %s was already revoked at %s.\n", id, k.Revoked.UTC().Format(time.RFC3339))
		return nil
	}
	if err := st.RevokeKey(ctx, id, time.Now().UTC()); err != nil {
		return fmt.Errorf("keys revoke: %w", err)
	}
	fmt.Fprintf(stderr, "Revoked key %s. Running gateways refuse it within a second.\n", id)
	return nil
}

// globList is a flag's comma-separated globs, each trimmed, the empty
// left out.
func globList(flag string) []string {
	var globs []string
	for _, g := range strings.Split(flag, ",") {
		if g = strings.TrimSpace(g); g != "" {
			globs = append(globs, g)
		}
	}
	return globs
}
