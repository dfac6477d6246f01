package scrape

// The Watcher's schedule, timeouts and lifecycle on fake time: each test
// runs in a testing/synctest bubble against an in-memory transport (real
// sockets do not block durably in a bubble). One test at the end runs
// against a real server.

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// roundTripFunc is an http.RoundTripper in memory.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// fakeClient is a client whose requests f answers.
func fakeClient(f roundTripFunc) *http.Client { return &http.Client{Transport: f} }

// answer is an answer with status and body, as prometheus_client sends it.
func answer(status int, body []byte) *http.Response {
	return &http.Response{
		StatusCode: status,
		Header:     http.Header{"Content-Type": {"text/plain; version=0.0.4; charset=utf-8"}},
		Body:       io.NopCloser(strings.NewReader(string(body))),
	}
}

// events records what a Watcher calls back, with the (fake) time of each.
type events struct {
	mu     sync.Mutex
	loads  []time.Duration // since start
	errs   []error
	errAt  []time.Duration
	health []healthEvent
	start  time.Time
	last   Load
}

type healthEvent struct {
	At  time.Duration
	Up  bool
	Err string
}

func newEvents() *events { return &events{start: time.Now()} }

func (e *events) since() time.Duration { return time.Since(e.start) }

func (e *events) onLoad(l Load) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.loads = append(e.loads, l.At.Sub(e.start))
	e.last = l
}

func (e *events) onScrapeError(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.errs = append(e.errs, err)
	e.errAt = append(e.errAt, e.since())
}

func (e *events) onHealth(up bool, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ev := healthEvent{At: e.since(), Up: up}
	if err != nil {
		ev.Err = err.Error()
	}
	e.health = append(e.health, ev)
}

func (e *events) loadTimes() []time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]time.Duration(nil), e.loads...)
}

// ms is a list of durations in milliseconds.
func ms(ns ...int) []time.Duration {
	var ds []time.Duration
	for _, n := range ns {
		ds = append(ds, time.Duration(n)*time.Millisecond)
	}
	return ds
}

func TestWatcherScrapesEveryInterval(t *testing.T) {
	text := readTestdata(t, "vllm-0.10-dp2.txt")
	synctest.Test(t, func(t *testing.T) {
		var accept atomic.Value
		client := fakeClient(func(r *http.Request) (*http.Response, error) {
			accept.Store(r.Header.Get("Accept"))
			time.Sleep(30 * time.Millisecond) // the scrape's own time does not push the next one back
			return answer(200, text), nil
		})
		w := NewWatcher(client)
		defer w.Close()
		ev := newEvents()
		w.Set([]Target{{Name: "a", MetricsURL: "http://a/metrics", Interval: 100 * time.Millisecond, MaxAge: time.Second, OnLoad: ev.onLoad, OnScrapeError: ev.onScrapeError}})
		time.Sleep(950 * time.Millisecond)
		synctest.Wait()

		if diff := cmp.Diff(ms(30, 130, 230, 330, 430, 530, 630, 730, 830, 930), ev.loadTimes()); diff != "" {
			t.Errorf("loads at (-want +got):\n%s", diff)
		}
		want := Load{Waiting: 9, Running: 60, KVUsage: 0.78125, BlockSize: 16, At: ev.start.Add(930 * time.Millisecond)}
		if diff := cmp.Diff(want, ev.last); diff != "" {
			t.Errorf("last load (-want +got):\n%s", diff)
		}
		if len(ev.errs) != 0 {
			t.Errorf("scrape errors: %v", ev.errs)
		}
		if got := accept.Load(); got != "text/plain;version=0.0.4" {
			t.Errorf("Accept: %q", got)
		}
	})
}

func TestWatcherScrapesNeverOverlap(t *testing.T) {
	text := readTestdata(t, "sglang-0.5.txt")
	synctest.Test(t, func(t *testing.T) {
		var inFlight, most atomic.Int32
		var mu sync.Mutex
		var starts []time.Duration
		start := time.Now()
		client := fakeClient(func(r *http.Request) (*http.Response, error) {
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			if n > most.Load() {
				most.Store(n)
			}
			mu.Lock()
			starts = append(starts, time.Since(start))
			mu.Unlock()
			time.Sleep(250 * time.Millisecond)
			return answer(200, text), nil
		})
		w := NewWatcher(client)
		defer w.Close()
		ev := newEvents()
		w.Set([]Target{{Name: "a", MetricsURL: "http://a/metrics", Interval: 100 * time.Millisecond, MaxAge: time.Second, OnLoad: ev.onLoad}})
		time.Sleep(1100 * time.Millisecond)
		synctest.Wait()

		mu.Lock()
		defer mu.Unlock()
		// Each starts as the last ends: 250 ms is past the interval.
		if diff := cmp.Diff(ms(0, 250, 500, 750, 1000), starts); diff != "" {
			t.Errorf("scrapes started at (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(ms(250, 500, 750, 1000), ev.loadTimes()); diff != "" {
			t.Errorf("loads at (-want +got):\n%s", diff)
		}
		if most.Load() != 1 {
			t.Errorf("%d scrapes at once", most.Load())
		}
	})
}

func TestWatcherMaxAgeEndsStuckScrape(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fakeClient(func(r *http.Request) (*http.Response, error) {
			<-r.Context().Done() // an endpoint that never answers
			return nil, r.Context().Err()
		})
		w := NewWatcher(client)
		defer w.Close()
		ev := newEvents()
		w.Set([]Target{{Name: "a", MetricsURL: "http://a/metrics", Interval: 100 * time.Millisecond, MaxAge: 300 * time.Millisecond, OnLoad: ev.onLoad, OnScrapeError: ev.onScrapeError}})
		time.Sleep(650 * time.Millisecond)
		synctest.Wait()

		ev.mu.Lock()
		defer ev.mu.Unlock()
		if diff := cmp.Diff(ms(300, 600), ev.errAt); diff != "" {
			t.Errorf("scrape errors at (-want +got):\n%s", diff)
		}
		for _, err := range ev.errs {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("error %v is not a deadline", err)
			}
		}
		if len(ev.loads) != 0 {
			t.Errorf("loads from a stuck endpoint: %v", ev.loads)
		}
	})
}

func TestWatcherScrapeFailures(t *testing.T) {
	good := readTestdata(t, "vllm-0.8.txt")
	for _, tc := range []struct {
		name    string
		answer  func() (*http.Response, error)
		wantErr string
	}{
		{"status", func() (*http.Response, error) { return answer(503, []byte("overloaded")), nil }, "metrics: status 503"},
		{"protobuf", func() (*http.Response, error) {
			a := answer(200, good)
			a.Header.Set("Content-Type", "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited")
			return a, nil
		}, "metrics: answered application/vnd.google.protobuf, not text"},
		{"too long", func() (*http.Response, error) {
			return answer(200, []byte(strings.Repeat("# padding\n", maxMetricsBody/10+1))), nil
		}, "metrics: answer longer than 4194304 bytes"},
		{"malformed", func() (*http.Response, error) {
			return answer(200, []byte("vllm:num_requests_waiting{engine=\"0\"} lots\n")), nil
		}, `metrics: scrape: line 1: vllm:num_requests_waiting: value "lots" is not a number`},
		{"transport", func() (*http.Response, error) { return nil, errors.New("connection refused") }, `metrics: Get "http://a/metrics": connection refused`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := NewWatcher(fakeClient(func(*http.Request) (*http.Response, error) { return tc.answer() }))
				defer w.Close()
				ev := newEvents()
				w.Set([]Target{{Name: "a", MetricsURL: "http://user:secret@a/metrics", Interval: time.Second, OnLoad: ev.onLoad, OnScrapeError: ev.onScrapeError}})
				synctest.Wait()
				ev.mu.Lock()
				defer ev.mu.Unlock()
				if len(ev.errs) != 1 || len(ev.loads) != 0 {
					t.Fatalf("errors %v, loads %v; want one error", ev.errs, ev.loads)
				}
				if got := ev.errs[0].Error(); got != tc.wantErr {
					t.Errorf("error %q, want %q", got, tc.wantErr)
				}
			})
		})
	}
}

func TestWatcherProbesFlip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mode atomic.Value
		mode.Store("ok")
		client := fakeClient(func(r *http.Request) (*http.Response, error) {
			switch mode.Load() {
			case "503":
				return answer(503, []byte(`{"error":"engine dead"}`)), nil
			case "hang":
				<-r.Context().Done()
				return nil, r.Context().Err()
			case "refused":
				return nil, errors.New("connection refused")
			}
			return answer(200, nil), nil
		})
		w := NewWatcher(client)
		defer w.Close()
		ev := newEvents()
		w.Set([]Target{{Name: "a", HealthURL: "http://a/health", HealthInterval: time.Second, HealthTimeout: 200 * time.Millisecond, OnHealth: ev.onHealth}})
		// Probes at 0, 1, 2, 3 and 4 s; the endpoint changes half-way between.
		time.Sleep(500 * time.Millisecond)
		for _, m := range []string{"503", "hang", "refused", "ok"} {
			mode.Store(m)
			time.Sleep(time.Second)
		}
		synctest.Wait()

		want := []healthEvent{
			{At: 0, Up: true},
			{At: time.Second, Err: "health: status 503"},
			{At: 2200 * time.Millisecond, Err: `health: Get "http://a/health": context deadline exceeded`},
			{At: 3 * time.Second, Err: `health: Get "http://a/health": connection refused`},
			{At: 4 * time.Second, Up: true},
		}
		ev.mu.Lock()
		defer ev.mu.Unlock()
		if diff := cmp.Diff(want, ev.health); diff != "" {
			t.Errorf("probes (-want +got):\n%s", diff)
		}
	})
}

// perHost is a transport that answers every request with text and
// records, by host, when each request came.
type perHost struct {
	mu    sync.Mutex
	start time.Time
	at    map[string][]time.Duration
	text  []byte
}

func newPerHost(text []byte) *perHost {
	return &perHost{start: time.Now(), at: map[string][]time.Duration{}, text: text}
}

func (p *perHost) RoundTrip(r *http.Request) (*http.Response, error) {
	p.mu.Lock()
	p.at[r.URL.Host] = append(p.at[r.URL.Host], time.Since(p.start))
	p.mu.Unlock()
	return answer(200, p.text), nil
}

func (p *perHost) times(host string) []time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Duration(nil), p.at[host]...)
}

func TestWatcherSetStartsStopsRestarts(t *testing.T) {
	text := readTestdata(t, "vllm-0.11.txt")
	synctest.Test(t, func(t *testing.T) {
		tr := newPerHost(text)
		w := NewWatcher(&http.Client{Transport: tr})
		defer w.Close()
		keep1, keep2, change, drop := newEvents(), newEvents(), newEvents(), newEvents()
		target := func(name string, interval time.Duration, ev *events) Target {
			return Target{Name: name, MetricsURL: "http://" + name + "/metrics", Interval: interval, OnLoad: ev.onLoad}
		}
		w.Set([]Target{
			target("keep", 100*time.Millisecond, keep1),
			target("change", 100*time.Millisecond, change),
			target("drop", 100*time.Millisecond, drop),
		})
		time.Sleep(250 * time.Millisecond)
		// keep: the same settings with new callbacks; change: a new
		// interval; drop: gone; add: new.
		add := newEvents()
		w.Set([]Target{
			target("keep", 100*time.Millisecond, keep2),
			target("change", 300*time.Millisecond, change),
			target("add", 200*time.Millisecond, add),
		})
		dropped := len(drop.loadTimes())
		time.Sleep(650 * time.Millisecond)
		synctest.Wait()

		for _, tc := range []struct {
			host string
			want []time.Duration
		}{
			{"keep", ms(0, 100, 200, 300, 400, 500, 600, 700, 800, 900)}, // never restarted
			{"change", ms(0, 100, 200, 250, 550, 850)},                   // restarted at once
			{"drop", ms(0, 100, 200)},                                    // stopped
			{"add", ms(250, 450, 650, 850)},                              // started
		} {
			if diff := cmp.Diff(tc.want, tr.times(tc.host)); diff != "" {
				t.Errorf("%s scraped at (-want +got):\n%s", tc.host, diff)
			}
		}
		if diff := cmp.Diff(ms(0, 100, 200), keep1.loadTimes()); diff != "" {
			t.Errorf("keep's first callbacks (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(ms(300, 400, 500, 600, 700, 800, 900), keep2.loadTimes()); diff != "" {
			t.Errorf("keep's new callbacks (-want +got):\n%s", diff)
		}
		if got := len(drop.loadTimes()); got != dropped || got != 3 {
			t.Errorf("drop called back %d times, %d by the time Set returned; want 3", got, dropped)
		}
	})
}

func TestWatcherCloseWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var returned, requests atomic.Int32
		client := fakeClient(func(r *http.Request) (*http.Response, error) {
			requests.Add(1)
			<-r.Context().Done()
			time.Sleep(50 * time.Millisecond) // slow to give up
			returned.Add(1)
			return nil, r.Context().Err()
		})
		w := NewWatcher(client)
		ev := newEvents()
		w.Set([]Target{{Name: "a", MetricsURL: "http://a/metrics", HealthURL: "http://a/health", Interval: time.Second, MaxAge: 10 * time.Second, HealthInterval: time.Second, HealthTimeout: 10 * time.Second,
			OnLoad: ev.onLoad, OnScrapeError: ev.onScrapeError, OnHealth: ev.onHealth}})
		time.Sleep(100 * time.Millisecond)
		w.Close()
		if got := returned.Load(); got != 2 {
			t.Errorf("Close returned with %d of 2 requests still in flight", 2-got)
		}
		// Nothing more, even when told to.
		w.Set([]Target{{Name: "b", MetricsURL: "http://b/metrics", Interval: time.Second}})
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got := requests.Load(); got != 2 {
			t.Errorf("%d requests, want 2", got)
		}
		ev.mu.Lock()
		defer ev.mu.Unlock()
		if len(ev.loads)+len(ev.errs)+len(ev.health) != 0 {
			t.Errorf("callbacks after Close stopped the requests: loads %v, errors %v, health %v", ev.loads, ev.errs, ev.health)
		}
	})
}

// TestWatcherRealServer scrapes and probes a real server end to end, and
// checks that both reuse their connections.
func TestWatcherRealServer(t *testing.T) {
	text := readTestdata(t, "vllm-0.10-dp2.txt")
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		w.Write(text)
	})
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("{}"))
	})
	srv := httptest.NewUnstartedServer(mux)
	var conns atomic.Int32
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()

	loads := make(chan Load, 100)
	health := make(chan error, 100)
	w := NewWatcher(srv.Client())
	defer w.Close()
	w.Set([]Target{{
		Name: "a", MetricsURL: srv.URL + "/metrics", Interval: 5 * time.Millisecond, MaxAge: 5 * time.Second,
		HealthURL: srv.URL + "/health", HealthInterval: 5 * time.Millisecond, HealthTimeout: 5 * time.Second,
		OnLoad:        func(l Load) { loads <- l },
		OnScrapeError: func(err error) { t.Errorf("scrape: %v", err) },
		OnHealth: func(up bool, err error) {
			if !up {
				health <- err
			} else {
				health <- nil
			}
		},
	}})
	deadline := time.After(10 * time.Second)
	for i := range 5 {
		select {
		case l := <-loads:
			want := Load{Waiting: 9, Running: 60, KVUsage: 0.78125, BlockSize: 16, At: l.At}
			if diff := cmp.Diff(want, l); diff != "" || l.At.IsZero() {
				t.Fatalf("load %d (-want +got):\n%s", i, diff)
			}
		case <-deadline:
			t.Fatal("no load in 10 s")
		}
		select {
		case err := <-health:
			if err != nil {
				t.Fatalf("probe %d: down: %v", i, err)
			}
		case <-deadline:
			t.Fatal("no probe in 10 s")
		}
	}
	w.Close()
	// One connection each for scraping and probing, reused.
	if got := conns.Load(); got > 2 {
		t.Errorf("%d connections for 5 scrapes and 5 probes, want at most 2", got)
	}
}

func TestWatcherLaterTargetOfOneNameCountsAndZeroIntervalIsFloored(t *testing.T) {
	text := readTestdata(t, "sglang-0.5.txt")
	synctest.Test(t, func(t *testing.T) {
		tr := newPerHost(text)
		w := NewWatcher(&http.Client{Transport: tr})
		defer w.Close()
		w.Set([]Target{
			{Name: "a", MetricsURL: "http://first/metrics"},
			{Name: "a", MetricsURL: "http://second/metrics"},
		})
		time.Sleep(35 * time.Millisecond)
		synctest.Wait()
		if got := tr.times("first"); len(got) != 0 {
			t.Errorf("the earlier target scraped at %v", got)
		}
		if diff := cmp.Diff(ms(0, 10, 20, 30), tr.times("second")); diff != "" {
			t.Errorf("scraped at (-want +got):\n%s", diff)
		}
	})
}
