package app

// The audit trail's part in the wiring: configuration reloads, accepted
// and refused, written to it as the gateway's own changes, and its
// retention, applied at start and every hour; and the spend alerter.

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/access"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/admin"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/alert"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/audit"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/store"
)

// gatewayActor is who the gateway's own changes are written as.
var gatewayActor = access.Identity{Subject: "llmgw"}

// auditWriteTimeout bounds writing one of the gateway's own entries.
const auditWriteTimeout = 5 * time.Second

// noteReloadAudit writes a reload of file to the trail: accepted, with
// the fields left for a restart, or refused, with why.
func noteReloadAudit(st store.Store, log *slog.Logger, file string, err error, restart []string) {
	ctx, cancel := context.WithTimeout(context.Background(), auditWriteTimeout)
	defer cancel()
	e := audit.Entry{Action: audit.ConfigReload, Target: file}
	switch {
	case err != nil:
		e.Action, e.Detail = audit.ConfigRefused, strings.ReplaceAll(err.Error(), "\n", "; ")
	case len(restart) > 0:
		e.Detail = "needs a restart for " + strings.Join(restart, ", ")
	}
	admin.Note(ctx, st, log, nil, gatewayActor, e, time.Now())
}

// newAlerter is the spend alerter over g's store, posting to the webhook
// cfg names, signed with the secret its environment variable holds.
func (g *Gateway) newAlerter(cfg *config.Config) (*alert.Alerter, error) {
	opts := alert.Options{WebhookURL: cfg.Alerts.WebhookURL, ConfigTenants: consoleView{g}.ConfigTenants, Registerer: g.reg, Logger: g.log}
	if opts.WebhookURL != "" {
		secret := strings.TrimSpace(os.Getenv(cfg.Alerts.SecretEnv))
		if secret == "" {
			return nil, fmt.Errorf("alerts.secret_env: %s is empty; it must hold the secret the webhook's bodies are signed with", cfg.Alerts.SecretEnv)
		}
		opts.Secret = []byte(secret)
	}
	return alert.New(g.store, opts), nil
}

// pruneEvery is how often the trail's retention is applied: an entry
// outlives its retention by an hour at most.
const pruneEvery = time.Hour

// auditPruner removes entries past their retention.
type auditPruner struct {
	st        store.Store
	retention time.Duration
	log       *slog.Logger
}

func newAuditPruner(st store.Store, cfg *config.Config, log *slog.Logger) *auditPruner {
	r := cfg.Admin.AuditRetention
	if r <= 0 {
		r = config.DefaultAuditRetention
	}
	return &auditPruner{st: st, retention: r, log: log}
}

// Run prunes at once and then every pruneEvery until ctx ends; a failed
// prune is logged and tried again at the next.
func (p *auditPruner) Run(ctx context.Context) error {
	t := time.NewTicker(pruneEvery)
	defer t.Stop()
	for {
		p.prune(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// prune removes what is older than the retention, and notes how many.
func (p *auditPruner) prune(ctx context.Context) {
	n, err := p.st.PruneAudit(ctx, time.Now().Add(-p.retention))
	if err != nil {
		p.log.Warn("audit: the trail's retention could not be applied; trying again within the hour", "err", err)
		return
	}
	if n > 0 {
		admin.Note(ctx, p.st, p.log, nil, gatewayActor, audit.Entry{Action: audit.RetentionPrune,
			Detail: strconv.FormatInt(n, 10) + " entries older than " + p.retention.String() + " removed"}, time.Now())
	}
}
