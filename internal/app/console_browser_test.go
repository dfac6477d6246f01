package app

// The web console end to end in a real browser: headless Chromium, from
// Debian's chromium package, driven by chromedp against a whole gateway.
// Without chromium the test skips, unless LLMGW_TEST_BROWSER is set, as
// .ci/run sets it, when it fails. With LLMGW_CONSOLE_SCREENSHOTS naming a
// directory, the screenshots of every page, 1280 and 390 pixels wide, are
// written there (docs/CONSOLE.md shows them).

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

const consoleTestToken = "console-browser-test-token-42"

// streamedRequests is how many streamed requests the test sends: enough
// for the recent p99s the Overview shows (admission's streamedRequests).
const streamedRequests = 20

// Names that run script wherever they are not escaped: each sets a global
// the test then looks for.
const (
	hostileModel   = `chat<img src=x onerror="window.pwned='model'">`
	hostileKeyName = `ci<script>window.pwned='key'</script>`
)

// chromiumPath is the chromium to drive, or skips the test when there is
// none (fails, with LLMGW_TEST_BROWSER set).
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "chromium is not installed: apt-get install -y chromium installs it"
	if os.Getenv("LLMGW_TEST_BROWSER") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// browser is a headless Chromium on a fresh profile, which keeps every
// script error and every error the page logs (a refusal by the
// Content-Security-Policy among them).
type browser struct {
	ctx      context.Context
	mu       sync.Mutex
	problems []string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	b := &browser{ctx: ctx}
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.IsException() || m.Type == chromedp.ConsoleError {
				b.mu.Lock()
				b.problems = append(b.problems, m.String())
				b.mu.Unlock()
			}
		}
	}()
	return b
}

func (b *browser) do(t *testing.T, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// text is the text (innerText) of the first element sel finds, once one
// is there. It is read in the page, in the document as it is at that
// moment: a node id chromedp took from the document before a navigation
// settled may name nothing by the time its text is asked for.
func (b *browser) text(t *testing.T, sel string) string {
	t.Helper()
	expr := fmt.Sprintf(`(function(){var e=document.querySelector(%q);return e?[e.innerText]:null})()`, sel)
	s, err := run(b, chromedp.Poll[[]string](expr))
	if err != nil || len(s) != 1 {
		t.Fatalf("reading %s: %v", sel, err)
	}
	return s[0]
}

// eval is the value of the script expr.
func eval[T any](t *testing.T, b *browser, expr string) T {
	t.Helper()
	v, err := run(b, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// run runs a within 30 seconds, again while it fails only because the
// document it was sent to was replaced on the way (transient).
func run[T any](b *browser, a chromedp.Action[T]) (T, error) {
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	for {
		v, err := chromedp.Run(ctx, a)
		if err == nil || !transient(err) || ctx.Err() != nil {
			return v, err
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// transient reports whether err is chromedp's account of a document
// replaced under a call: sent as a navigation settled, the call named
// the old document's execution context or nodes, and the same call
// answers on the new one.
func transient(err error) bool {
	s := err.Error()
	return strings.Contains(s, "Cannot find context with specified id") ||
		strings.Contains(s, "No node with given id") ||
		strings.Contains(s, "Execution context was destroyed")
}

// checkClean fails on any script error or logged error so far, and on a
// hostile name that ran.
func (b *browser) checkClean(t *testing.T, where string) {
	t.Helper()
	if pwned := eval[string](t, b, `String(window.pwned)`); pwned != "undefined" {
		t.Errorf("%s: a hostile %s name ran as script", where, pwned)
	}
	time.Sleep(50 * time.Millisecond) // messages arrive apart from the page
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.problems {
		t.Errorf("%s: %s", where, p)
	}
	b.problems = nil
}

// visit clicks the navigation link named name, waits for its page, and
// returns the page's text.
func (b *browser) visit(t *testing.T, name string) string {
	t.Helper()
	link := fmt.Sprintf(`[...document.querySelectorAll("nav a")].find(a => a.textContent.trim() === %q)`, name)
	if !eval[bool](t, b, `(() => { const a = `+link+`; if (!a) return false; a.click(); return true })()`) {
		t.Fatalf("no link named %s", name)
	}
	b.waitFor(t, "the page "+name, fmt.Sprintf(`document.readyState === "complete" && document.querySelector('nav a[aria-current="page"]')?.textContent.trim() === %q`, name))
	return b.text(t, "#main")
}

// waitFor waits up to ten seconds for the script cond to be true.
func (b *browser) waitFor(t *testing.T, what, cond string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !eval[bool](t, b, cond); time.Sleep(25 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %s is still false", what, cond)
		}
	}
}

// screenshots takes the page at 1280 and at 390 pixels wide, into
// LLMGW_CONSOLE_SCREENSHOTS when it is set.
func (b *browser) screenshots(t *testing.T, page string) {
	t.Helper()
	dir := os.Getenv("LLMGW_CONSOLE_SCREENSHOTS")
	for _, width := range []int64{1280, 390} {
		b.do(t, "resizing", chromedp.EmulateViewport(width, 900), chromedp.Sleep(200*time.Millisecond)) // the chart redraws for its width
		ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		cancel()
		if err != nil || len(png) < 1000 {
			t.Fatalf("screenshot of %s at %d px: %d bytes, %v", page, width, len(png), err)
		}
		if dir != "" {
			name := filepath.Join(dir, fmt.Sprintf("console-%s-%d.png", strings.ToLower(page), width))
			if err := os.WriteFile(name, png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	b.do(t, "resizing", chromedp.EmulateViewport(1280, 900))
}

// chatBackend answers every chat completion with 11 prompt and 7
// completion tokens, streamed when asked, a few milliseconds apart.
func chatBackend() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(body), `"stream":true`) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		time.Sleep(20 * time.Millisecond)
		for i := range 7 {
			fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"t%d\"}}]}\n\n", i)
			w.(http.Flusher).Flush()
			time.Sleep(2 * time.Millisecond)
		}
		io.WriteString(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":11,\"completion_tokens\":7,\"total_tokens\":18}}\n\ndata: [DONE]\n\n")
	})
}

// consoleChat sends one chat completion with key to g, streamed when
// stream is set, and returns the status.
func consoleChat(t *testing.T, g *Gateway, key string, stream bool) int {
	t.Helper()
	body := fmt.Sprintf(`{"model":%q,"stream":%t,"messages":[{"role":"user","content":"hello"}]}`, hostileModel, stream)
	req, _ := http.NewRequest("POST", g.URL()+"/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestConsoleInBrowser signs in, visits every page by its link, creates a
// key, sends a request with it and finds the request in Requests and its
// tokens in Usage, revokes the key and sees the next request refused, and
// finds all of it in the Audit trail;
// names holding markup show as text and run nothing, and no page logs a
// script error or a refusal by the Content-Security-Policy.
func TestConsoleInBrowser(t *testing.T) {
	b := newBrowser(t)
	backend := httptest.NewServer(chatBackend())
	t.Cleanup(backend.Close)
	cfg := upstreamConfig(hostileModel, catalog.KindOpenAI, []string{backend.URL + "/v1"})
	cfg.Router.Auth = "keys"
	cfg.Admin = config.Admin{Token: consoleTestToken}
	cfg.Models[0].SLO = catalog.SLO{TTFTp99: 2 * time.Second, TPOTp99: 100 * time.Millisecond}
	cfg.Models[0].Price = catalog.Price{InputPerMillion: 3, OutputPerMillion: 15}
	g := startConfigured(t, cfg)

	b.do(t, "opening the console", chromedp.Navigate(g.AdminURL()+"/ui"), chromedp.WaitVisible(chromedp.ID("token")))
	if label := b.text(t, `label[for="token"]`); label != "Admin token" {
		t.Errorf("the sign-in field is labelled %q, want Admin token", label)
	}
	b.screenshots(t, "signin")
	b.do(t, "signing in",
		chromedp.SendKeys(chromedp.ID("token"), consoleTestToken),
		chromedp.Submit(chromedp.ID("token")),
		chromedp.WaitVisible(chromedp.CSS(`nav a[aria-current="page"]`)))

	b.visit(t, "Keys")
	b.do(t, "creating a key",
		chromedp.SetValue(chromedp.CSS(`input[name="tenant"]`), "acme/search"),
		chromedp.SetValue(chromedp.CSS(`input[name="name"]`), hostileKeyName),
		chromedp.SetValue(chromedp.CSS(`input[name="models"]`), "chat*"),
		chromedp.Click(chromedp.CSS(`form.grid button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.ID("new-key")))
	plain := b.text(t, "#new-key")
	if !strings.HasPrefix(plain, "sk-") {
		t.Fatalf("the created key shown is %q", plain)
	}
	if keysText := b.text(t, "#main"); !strings.Contains(keysText, hostileKeyName) {
		t.Errorf("the Keys page does not show the key's name as text: %q", hostileKeyName)
	}
	b.screenshots(t, "keys")
	b.checkClean(t, "Keys")

	if status := consoleChat(t, g, plain, false); status != 200 {
		t.Fatalf("a request with the new key: %d", status)
	}
	// Streamed ones too, enough for the p99s the Overview shows.
	for range streamedRequests {
		if status := consoleChat(t, g, plain, true); status != 200 {
			t.Fatalf("a streamed request with the new key: %d", status)
		}
	}
	// The ledger writes within its flush interval; Requests shows the
	// record once it is in the store.
	var requests string
	for deadline := time.Now().Add(5 * time.Second); ; {
		requests = b.visit(t, "Requests")
		if strings.Count(requests, hostileModel) == streamedRequests+1 || time.Now().After(deadline) {
			break
		}
		b.visit(t, "Overview")
	}
	for _, want := range []string{hostileModel, "acme/search", "200", "11", "7"} {
		if !strings.Contains(requests, want) {
			t.Errorf("Requests does not show %q:\n%s", want, requests)
		}
	}
	b.screenshots(t, "requests")
	b.checkClean(t, "Requests")

	usage := b.visit(t, "Usage")
	// 21 requests of 11 prompt and 7 completion tokens.
	if !strings.Contains(usage, hostileModel) || !strings.Contains(usage, "231") || !strings.Contains(usage, "147") {
		t.Errorf("Usage does not show the request's tokens:\n%s", usage)
	}
	// The chart is drawn by a deferred script, maybe after the page shows.
	b.waitFor(t, "the usage chart", `typeof Chart !== "undefined" && Chart.getChart(document.getElementById("usage-chart")) !== undefined`)
	b.screenshots(t, "usage")
	b.checkClean(t, "Usage")

	// The live pages refresh in place: the time they were taken at moves
	// on while the page stays.
	b.visit(t, "Overview")
	taken := eval[string](t, b, `document.getElementById("taken").textContent`)
	if !strings.Contains(taken, "Live from the gateway's own state") {
		t.Errorf("Overview does not say it is live: %q", taken)
	}
	b.waitFor(t, "the Overview to refresh", fmt.Sprintf(`document.getElementById("taken").textContent !== %q && document.querySelector('nav a[aria-current="page"]').textContent.trim() === "Overview"`, taken))

	for _, page := range []string{"Overview", "Endpoints", "Config"} {
		text := b.visit(t, page)
		if page != "Endpoints" && !strings.Contains(text, hostileModel) {
			t.Errorf("%s does not show the model's name as text:\n%s", page, text)
		}
		if page == "Endpoints" && !strings.Contains(text, "up") {
			t.Errorf("Endpoints does not show the endpoint up:\n%s", text)
		}
		b.screenshots(t, page)
		b.checkClean(t, page)
	}

	b.visit(t, "Keys")
	b.do(t, "revoking the key", chromedp.Click(chromedp.CSS(`button.danger`)))
	b.waitFor(t, "the revocation", `document.readyState === "complete" && document.body.textContent.includes("is revoked")`)
	b.checkClean(t, "Keys after revoking")
	if status := consoleChat(t, g, plain, false); status != http.StatusUnauthorized {
		t.Errorf("a request with the revoked key: %d, want 401", status)
	}

	// The audit trail holds the sign-in, the key's creation and its
	// revocation, by the admin token, newest first.
	b.visit(t, "Audit")
	trail := b.text(t, "tbody")
	rev, made, in := strings.Index(trail, "key.revoke"), strings.Index(trail, "key.create"), strings.Index(trail, "signin")
	if rev < 0 || made < rev || in < made || !strings.Contains(trail, "admin token") || !strings.Contains(trail, "127.0.0.1") {
		t.Errorf("Audit does not show the sign-in, the key's creation and revocation, newest first, by the admin token from 127.0.0.1:\n%s", trail)
	}
	b.screenshots(t, "audit")
	b.checkClean(t, "Audit")
}
