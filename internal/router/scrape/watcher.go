package scrape

// The Watcher: for each endpoint the router is told of, a goroutine that
// scrapes its /metrics on a schedule and one that probes its health, each
// handing what it reads to the target's callbacks. Set changes the set of
// endpoints as the catalog changes; Close ends it all.

import (
	"bytes"
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// minInterval is the shortest Interval or HealthInterval a Watcher keeps
// to: a zero from a caller that skipped the config's defaults must not
// spin a core.
const minInterval = 10 * time.Millisecond

// Target is one endpoint to watch: its metrics scraped every Interval, its
// health probed every HealthInterval.
type Target struct {
	// Name is the endpoint's key: unique among the targets of one Set.
	Name string

	// MetricsURL is where the endpoint's Prometheus text is; empty scrapes
	// nothing. A scrape starts Interval after the last one started, or as
	// soon as it ends if it took longer; scrapes never overlap. Each is
	// given MaxAge to complete; zero or less means Interval.
	MetricsURL       string
	Interval, MaxAge time.Duration
	// Format is what MetricsURL answers with: Prometheus text (the zero
	// value) or Ollama's /api/ps.
	Format Format
	// SlotsURL is a llama.cpp server's /slots, scraped in place of
	// MetricsURL when that answers 404 or 501 (served without
	// --metrics); empty for none. Its own 404 or 501 (--no-slots) fails
	// the scrape as the metrics' would have.
	SlotsURL string

	// HealthURL is the endpoint's health check; empty probes nothing. A
	// probe is up when a GET answers 2xx within HealthTimeout (zero or
	// less: HealthInterval); any other status, an error or the timeout is
	// down.
	HealthURL                     string
	HealthInterval, HealthTimeout time.Duration

	// OnLoad is called after every scrape that read a Load, OnScrapeError
	// after every one that failed, OnHealth after every probe, with nil for
	// up. They run on the Watcher's goroutines, one at a time for each of
	// scraping and probing, and must not call Set or Close. Nil is not
	// called.
	OnLoad        func(Load)
	OnScrapeError func(error)
	OnHealth      func(up bool, err error)
}

// settings is what of a Target a watch runs on: a change restarts it.
type settings struct {
	metricsURL       string
	interval, maxAge time.Duration
	format           Format
	slotsURL         string
	healthURL        string
	healthInterval   time.Duration
	healthTimeout    time.Duration
}

func (t Target) settings() settings {
	return settings{t.MetricsURL, t.Interval, t.MaxAge, t.Format, t.SlotsURL, t.HealthURL, t.HealthInterval, t.HealthTimeout}
}

// callbacks are a Target's callbacks, swapped in place when only they
// change.
type callbacks struct {
	onLoad        func(Load)
	onScrapeError func(error)
	onHealth      func(bool, error)
}

// Watcher scrapes and probes a set of endpoints. Its zero value is not
// usable; build it with NewWatcher.
type Watcher struct {
	client *http.Client

	// mu protects watched and closed, and is held through Set and Close so
	// that they run one at a time.
	mu      sync.Mutex
	watched map[string]*watch // key: Target.Name
	closed  bool
}

// NewWatcher is a Watcher that makes its requests with client (nil:
// http.DefaultClient). It watches nothing until Set.
func NewWatcher(client *http.Client) *Watcher {
	if client == nil {
		client = http.DefaultClient
	}
	return &Watcher{client: client, watched: map[string]*watch{}}
}

// Set makes targets the set of endpoints watched: it starts the new ones,
// stops those no longer there, restarts those whose URLs or timings
// changed, and leaves the others running with their callbacks replaced by
// the new ones. Of two targets with one Name the later counts. When Set
// returns, a stopped target's callbacks have returned and will not be
// called again. After Close, Set does nothing.
func (w *Watcher) Set(targets []Target) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	next := make(map[string]Target, len(targets))
	for _, t := range targets {
		next[t.Name] = t
	}
	var stopped []*watch
	for name, wt := range w.watched {
		if t, ok := next[name]; ok && t.settings() == wt.settings {
			wt.callbacks.Store(callbacksOf(t))
			continue
		}
		wt.cancel()
		stopped = append(stopped, wt)
		delete(w.watched, name)
	}
	// A restarted target's old goroutines end before its new ones start,
	// so that its scrapes never overlap.
	for _, wt := range stopped {
		wt.wg.Wait()
	}
	for name, t := range next {
		if _, running := w.watched[name]; !running {
			w.watched[name] = w.start(t)
		}
	}
}

// Close stops every target and returns when their goroutines have, and
// their callbacks with them.
func (w *Watcher) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	for _, wt := range w.watched {
		wt.cancel()
	}
	for name, wt := range w.watched {
		wt.wg.Wait()
		delete(w.watched, name)
	}
}

// watch is one target being watched.
type watch struct {
	settings  settings
	callbacks atomic.Pointer[callbacks]
	cancel    context.CancelFunc // stops the goroutines
	wg        sync.WaitGroup     // the goroutines
}

func callbacksOf(t Target) *callbacks {
	return &callbacks{onLoad: t.OnLoad, onScrapeError: t.OnScrapeError, onHealth: t.OnHealth}
}

// start starts t's goroutines: one scraping if it has a MetricsURL, one
// probing if it has a HealthURL.
func (w *Watcher) start(t Target) *watch {
	ctx, cancel := context.WithCancel(context.Background())
	wt := &watch{settings: t.settings(), cancel: cancel}
	wt.callbacks.Store(callbacksOf(t))
	s := wt.settings
	if s.metricsURL != "" {
		interval := max(s.interval, minInterval)
		maxAge := s.maxAge
		if maxAge <= 0 {
			maxAge = interval
		}
		wt.wg.Go(func() { wt.scrapeLoop(ctx, w.client, s, interval, maxAge) })
	}
	if s.healthURL != "" {
		interval := max(s.healthInterval, minInterval)
		timeout := s.healthTimeout
		if timeout <= 0 {
			timeout = interval
		}
		wt.wg.Go(func() { wt.probeLoop(ctx, w.client, s.healthURL, interval, timeout) })
	}
	return wt
}

// scrapeLoop scrapes s's metrics every interval until ctx is done, and
// its slots in their place while the metrics are not served.
func (wt *watch) scrapeLoop(ctx context.Context, client *http.Client, s settings, interval, maxAge time.Duration) {
	var body bytes.Buffer // reused from scrape to scrape
	next := time.NewTimer(interval)
	next.Stop()
	for {
		start := time.Now()
		load, err := scrape(ctx, client, s.metricsURL, s.format, maxAge, &body)
		if err != nil && s.slotsURL != "" && disabled(err) && ctx.Err() == nil {
			load, err = scrapeSlots(ctx, client, s.slotsURL, maxAge-time.Since(start), &body)
		}
		if ctx.Err() != nil {
			return
		}
		cb := wt.callbacks.Load()
		switch {
		case err != nil && cb.onScrapeError != nil:
			cb.onScrapeError(err)
		case err == nil && cb.onLoad != nil:
			cb.onLoad(load)
		}
		if !sleepUntil(ctx, next, start.Add(interval)) {
			return
		}
	}
}

// probeLoop probes url every interval until ctx is done.
func (wt *watch) probeLoop(ctx context.Context, client *http.Client, url string, interval, timeout time.Duration) {
	next := time.NewTimer(interval)
	next.Stop()
	for {
		start := time.Now()
		err := probe(ctx, client, url, timeout)
		if ctx.Err() != nil {
			return
		}
		if cb := wt.callbacks.Load(); cb.onHealth != nil {
			cb.onHealth(err == nil, err)
		}
		if !sleepUntil(ctx, next, start.Add(interval)) {
			return
		}
	}
}

// sleepUntil waits on timer until t, and reports whether ctx is still not
// done. A t already past does not wait.
func sleepUntil(ctx context.Context, timer *time.Timer, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer.Reset(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}
