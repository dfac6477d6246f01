package store

import (
	"context"
	"testing"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/alert"
)

// testAlerts: an alert is stored once per threshold, budget and period;
// it is due at once, due again when a delivery failed and its next try
// comes, never once delivered; the list is newest first with what each
// delivery left.
func testAlerts(t *testing.T, s Store) {
	ctx := context.Background()
	t0 := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	period := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	a := alert.Alert{Scope: alert.ScopeKey, Subject: "key_A", Tenant: "acme/search", Kind: alert.KindUSD, PeriodStart: period,
		Threshold: 50, Used: 5.5, Budget: 10, Fired: t0}
	for i, tc := range []struct {
		a    alert.Alert
		want bool
	}{
		{a, true},
		{func() alert.Alert { b := a; b.Used, b.Fired = 6, t0.Add(time.Minute); return b }(), false},
		{func() alert.Alert { b := a; b.Threshold, b.Used, b.Fired = 80, 8.1, t0.Add(time.Minute); return b }(), true},
		{func() alert.Alert {
			b := a
			b.PeriodStart = period.AddDate(0, 1, 0)
			b.Fired = t0.Add(2 * time.Minute)
			return b
		}(), true},
	} {
		got, err := s.FireAlert(ctx, tc.a)
		if err != nil || got != tc.want {
			t.Fatalf("fire %d: %v, %v; want %v", i, got, err, tc.want)
		}
	}
	due, err := s.DueAlerts(ctx, t0.Add(time.Minute), 10)
	if err != nil || len(due) != 2 || due[0].Threshold != 50 || due[1].Threshold != 80 || due[0].Used != 5.5 || !due[0].PeriodStart.Equal(period) {
		t.Fatalf("due a minute on: %+v, %v; want the 50%% and 80%% alerts", due, err)
	}
	if err := s.MarkAlert(ctx, due[0].Seq, time.Time{}, 1, t0.Add(10*time.Minute), "502 Bad Gateway"); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkAlert(ctx, due[1].Seq, t0.Add(time.Minute), 1, t0.Add(time.Minute), ""); err != nil {
		t.Fatal(err)
	}
	if due, _ := s.DueAlerts(ctx, t0.Add(5*time.Minute), 10); len(due) != 1 || due[0].PeriodStart.Equal(period) {
		t.Errorf("due five minutes on: %+v, want the next period's alone", due)
	}
	if due, _ := s.DueAlerts(ctx, t0.Add(10*time.Minute), 10); len(due) != 2 || due[1].Attempts != 1 || due[1].LastError != "502 Bad Gateway" {
		t.Errorf("due ten minutes on: %+v, want the failed one again with its error, and the next period's", due)
	}
	all, err := s.Alerts(ctx, 10)
	if err != nil || len(all) != 3 || !all[0].PeriodStart.Equal(period.AddDate(0, 1, 0)) || all[1].Threshold != 80 || !all[1].Delivered.Equal(t0.Add(time.Minute)) {
		t.Errorf("the list: %+v, %v; want three, newest first, the 80%% one delivered", all, err)
	}
}
