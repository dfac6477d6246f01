package pool

import (
	"testing"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

// TestStatus hands out each endpoint's state as values: health, ejection,
// the counts in flight, the scrape while fresh, confirmed prefix hits and
// the first-token times predicted and measured.
func TestStatus(t *testing.T) {
	p := New(catalog.Pool{Name: "p", Metrics: catalog.Scrape{MaxAge: time.Second}, Endpoints: []catalog.Endpoint{
		{Name: "a", URL: "http://a:8000/v1"}, {Name: "b", URL: "http://b:8000/v1"}, {Name: "c", URL: "http://c:8000/v1"},
	}}, nil, nil)
	now := time.Unix(1_000_000, 0)
	a, b, c := p.Endpoints()[0], p.Endpoints()[1], p.Endpoints()[2]

	a.SetLoad(3, 0.25, now.Add(-500*time.Millisecond))
	call := p.Send(0, 100, true, false, now.Add(-100*time.Millisecond))
	call.FirstToken(now) // 100 ms, with 100 tokens of prefill ahead
	p.Send(0, 50, true, false, now)
	a.Confirm(100, 50)

	b.Failed(now)
	c.SetLoad(9, 0.9, now.Add(-2*time.Second)) // older than max age: unknown
	c.SetDown(true)

	st := p.Status(now)
	if len(st) != 3 {
		t.Fatalf("%d endpoints", len(st))
	}
	sa, sb, sc := st[0], st[1], st[2]
	if sa.Name != "a" || sa.Down || sa.EjectedFor != 0 || sa.Own.Inflight != 2 || sa.Own.Pending != 1 || sa.Waiting != 3 || sa.KVUsage != 0.25 {
		t.Errorf("a: %+v", sa)
	}
	if sa.MeasuredTTFT != 100*time.Millisecond {
		t.Errorf("a measured TTFT %v, want 100ms", sa.MeasuredTTFT)
	}
	// The prior cost model: 20 ms and 100 µs a token of its own 100 and
	// of the 3,000 the three requests others queued there owe, at the
	// pool's first guess of a mean prompt.
	if want := 330 * time.Millisecond; sa.PredictedTTFT < want-time.Microsecond || sa.PredictedTTFT > want+time.Microsecond {
		t.Errorf("a predicted TTFT %v, want %v", sa.PredictedTTFT, want)
	}
	if sa.PrefixHits >= 1 || sa.PrefixHits <= 0 {
		t.Errorf("a prefix hits %v after half a predicted hit was confirmed, want below 1", sa.PrefixHits)
	}
	if sb.EjectedFor != EjectBase || sb.Ejections != 1 || sb.Down {
		t.Errorf("b: %+v; want ejected for %v", sb, EjectBase)
	}
	if !sc.Down || sc.Waiting != -1 || sc.KVUsage != -1 || sc.MeasuredTTFT != 0 || sc.PrefixHits != 1 {
		t.Errorf("c: %+v; want down, its stale scrape unknown", sc)
	}
}
