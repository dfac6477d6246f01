package scrape

// One scrape and one probe: a bounded GET each, its body read within
// bounds and drained so that the connection goes back to the pool.
// A llama.cpp server whose /metrics is off is read from its /slots.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"time"
)

const (
	// maxMetricsBody bounds a /metrics answer. vLLM's is 20 to 80 KB for
	// each engine and grows with engines, LoRA adapters and finished-reason
	// labels; 4 MiB is fifty times the largest seen, and bounds what a
	// broken endpoint makes the gateway hold: 256 MiB for 64 at worst.
	maxMetricsBody = 4 << 20
	// keepBody is how much of a scrape's body buffer is kept for the next
	// scrape: the common answer, not a rare large one.
	keepBody = 1 << 20
	// maxDrain is how much of an answer that is not read (an error page, a
	// health check's body) is read to reuse the connection; past it the
	// connection is closed instead. vLLM and SGLang answer /health with an
	// empty body or a few bytes of JSON.
	maxDrain = 64 << 10
	// acceptText asks for the classic text format. prometheus_client (vLLM,
	// SGLang) answers OpenMetrics only to an Accept that names it, and
	// client_golang answers protobuf only to one that names that; to this
	// both answer text/plain; version=0.0.4.
	acceptText = "text/plain;version=0.0.4"
)

// scrape GETs url and reads its answer as format, taking at most maxAge.
// body is the caller's buffer, reused across scrapes.
func scrape(ctx context.Context, client *http.Client, url string, format Format, maxAge time.Duration, body *bytes.Buffer) (Load, error) {
	if err := fetch(ctx, client, url, maxAge, body); err != nil {
		return Load{}, fmt.Errorf("metrics: %w", err)
	}
	parse := Parse
	if format == FormatOllama {
		parse = parsePS
	}
	load, err := parse(body.Bytes())
	if err != nil {
		return Load{}, fmt.Errorf("metrics: %w", badAnswer{err})
	}
	load.At = time.Now()
	return load, nil
}

// scrapeSlots GETs a llama.cpp server's /slots at url and reads its load
// from it, as scrape does.
func scrapeSlots(ctx context.Context, client *http.Client, url string, maxAge time.Duration, body *bytes.Buffer) (Load, error) {
	if err := fetch(ctx, client, url, maxAge, body); err != nil {
		return Load{}, fmt.Errorf("slots: %w", err)
	}
	load, err := parseSlots(body.Bytes())
	if err != nil {
		return Load{}, fmt.Errorf("slots: %w", badAnswer{err})
	}
	load.At = time.Now()
	return load, nil
}

// fetch GETs url into body within maxAge: a 2xx answer of at most
// maxMetricsBody bytes, not protobuf.
func fetch(ctx context.Context, client *http.Client, url string, maxAge time.Duration, body *bytes.Buffer) error {
	ctx, cancel := context.WithTimeout(ctx, maxAge)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return redact(err)
	}
	req.Header.Set("Accept", acceptText)
	resp, err := client.Do(req)
	if err != nil {
		return redact(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		drain(resp.Body)
		return statusError(resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err == nil && mt == "application/vnd.google.protobuf" {
			return badAnswer{fmt.Errorf("answered %s, not text", mt)}
		}
	}
	if body.Cap() > keepBody {
		*body = bytes.Buffer{}
	}
	body.Reset()
	if _, err := body.ReadFrom(io.LimitReader(resp.Body, maxMetricsBody+1)); err != nil {
		return fmt.Errorf("reading the answer: %w", redact(err))
	}
	if body.Len() > maxMetricsBody {
		return badAnswer{fmt.Errorf("answer longer than %d bytes", maxMetricsBody)}
	}
	return nil
}

// probe GETs url and reports why the endpoint is down, or nil for up: a
// 2xx answer within timeout.
func probe(ctx context.Context, client *http.Client, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("health: %w", redact(err))
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("health: %w", redact(err))
	}
	defer resp.Body.Close()
	drain(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("health: %w", statusError(resp.StatusCode))
	}
	return nil
}

// drain reads what is left of a body, up to maxDrain, so that closing it
// leaves the connection reusable.
func drain(body io.Reader) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, maxDrain))
}

// redact takes the user information out of the URL that a *url.Error
// carries, so that the error can be logged: net/http masks only the
// password.
func redact(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil && u.User != nil {
			u.User = nil
			ue.URL = u.String()
		}
	}
	return err
}
