package app

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/audit"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/store"
)

// TestAuditRetention: the pruner removes what is past the retention at
// once, what passes it later within the hour, keeps the rest, and notes
// each prune in the trail.
func TestAuditRetention(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		st := store.NewMemory()
		now := time.Now()
		for _, age := range []time.Duration{25 * time.Hour, 90 * time.Minute} {
			if err := st.AddAudit(ctx, audit.Entry{Time: now.Add(-age), Subject: "u", Action: audit.KeyCreate, Target: age.String()}); err != nil {
				t.Fatal(err)
			}
		}
		p := &auditPruner{st: st, retention: 24 * time.Hour, log: slog.New(slog.DiscardHandler)}
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		targets := func() (keys []string, prunes int) {
			es, err := st.Audit(ctx, audit.Query{Until: time.Now().Add(time.Second)})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range es {
				switch e.Action {
				case audit.KeyCreate:
					keys = append(keys, e.Target)
				case audit.RetentionPrune:
					prunes++
				}
			}
			return keys, prunes
		}
		synctest.Wait()
		if keys, prunes := targets(); len(keys) != 1 || keys[0] != "1h30m0s" || prunes != 1 {
			t.Errorf("at start: entries %v and %d prunes noted, want the 1h30m one and 1", keys, prunes)
		}
		// The younger entry passes the retention 22h30m later, and is gone
		// by the next hourly prune.
		time.Sleep(23 * time.Hour)
		synctest.Wait()
		if keys, prunes := targets(); len(keys) != 0 || prunes != 2 {
			t.Errorf("a day on: entries %v and %d prunes noted, want none and 2", keys, prunes)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// TestAlertsNeedTheirSecret: a gateway with a webhook for spend alerts
// and no secret in the environment variable named to sign them with
// does not start.
func TestAlertsNeedTheirSecret(t *testing.T) {
	cfg := upstreamConfig("m", "openai", []string{"http://127.0.0.1:9/v1"})
	cfg.Alerts = config.Alerts{WebhookURL: "http://127.0.0.1:9/hook", SecretEnv: "LLMGW_TEST_ALERTS_SECRET_UNSET"}
	cfg.Server.Listen, cfg.Server.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	_, err := newGateway(t.Context(), cfg, "", slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "alerts.secret_env: LLMGW_TEST_ALERTS_SECRET_UNSET is empty") {
		t.Errorf("starting with a webhook and no secret: %v", err)
	}
}
