package app

// The throttle on guessing the admin token, over real sockets: one budget
// for /ui, /admin and /debug, a slot taken before a sign-in's form is
// read, and one address that fails keeping no other out.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sourceBudget is how many wrong tokens one address has compared before
// the throttle refuses it: the admin package's sourceBurst.
const sourceBudget = 20

// adminClient is a client of the admin listener that dials from the
// loopback address from (127.0.0.1, 127.0.0.2...), keeps one connection
// and cookies, and follows no redirect.
func adminClient(t *testing.T, from string) *http.Client {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	tr := &http.Transport{MaxConnsPerHost: 1, DialContext: d.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	jar, _ := cookiejar.New(nil)
	return &http.Client{Transport: tr, Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// tryToken sends token to path on g's admin listener through c: as a
// sign-in's form on /ui/login, else as a bearer token. It returns the
// status and the Retry-After header.
func tryToken(t *testing.T, c *http.Client, g *Gateway, path, token string) (int, string) {
	t.Helper()
	var req *http.Request
	if path == "/ui/login" {
		req, _ = http.NewRequest(http.MethodPost, g.AdminURL()+path, strings.NewReader(url.Values{"token": {token}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", g.AdminURL())
	} else {
		req, _ = http.NewRequest(http.MethodGet, g.AdminURL()+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

// rightTokenStatus is what the right token gets on path when let in.
func rightTokenStatus(path string) int {
	if path == "/ui/login" {
		return http.StatusSeeOther
	}
	if path == "/nothing" {
		return http.StatusNotFound
	}
	return http.StatusOK
}

// TestAdminThrottleOnEveryPath: on every guarded path, 100 wrong tokens on
// one connection are compared up to the address's budget and the rest
// refused with 429 and Retry-After; then the right token waits too.
func TestAdminThrottleOnEveryPath(t *testing.T) {
	for path, label := range map[string]string{"/admin/keys": "admin", "/debug/pprof/": "debug", "/ui/login": "ui", "/nothing": "admin"} {
		t.Run(path, func(t *testing.T) {
			g, _ := startAdminGateway(t, adminTestToken, "", true)
			c := adminClient(t, "127.0.0.1")
			got := map[int]int{}
			for i := range 100 {
				status, retry := tryToken(t, c, g, path, fmt.Sprintf("guess-%d", i))
				got[status]++
				if s, _ := strconv.Atoi(retry); status == http.StatusTooManyRequests && s < 1 {
					t.Errorf("a 429 with Retry-After %q", retry)
				}
			}
			if got[http.StatusUnauthorized] != sourceBudget || got[http.StatusTooManyRequests] != 100-sourceBudget {
				t.Errorf("100 wrong tokens: %v, want %d × 401 and %d × 429", got, sourceBudget, 100-sourceBudget)
			}
			if status, _ := tryToken(t, c, g, path, adminTestToken); status != http.StatusTooManyRequests {
				t.Errorf("the right token from the throttled address: %d, want 429", status)
			}
			_, metrics := adminGet(t, g, "/metrics", "")
			for reason, want := range map[string]float64{"wrong_token": sourceBudget, "throttled": 100 - sourceBudget + 1} {
				series := fmt.Sprintf("llmgw_admin_auth_failures_total{path=%q,reason=%q}", label, reason)
				if got := metricValue(string(metrics), series); got != want {
					t.Errorf("%s = %v, want %v", series, got, want)
				}
			}
		})
	}
}

// TestAdminThrottleOneBudget: wrong tokens on /ui, /admin and /debug spend
// one budget: past it, every path refuses the address.
func TestAdminThrottleOneBudget(t *testing.T) {
	g, _ := startAdminGateway(t, adminTestToken, "", true)
	c := adminClient(t, "127.0.0.1")
	paths := []string{"/admin/keys", "/debug/pprof/", "/ui/login"}
	for i := range sourceBudget {
		if status, _ := tryToken(t, c, g, paths[i%3], "guess"); status != http.StatusUnauthorized {
			t.Fatalf("wrong token %d on %s: %d, want 401", i, paths[i%3], status)
		}
	}
	for _, p := range paths {
		if status, _ := tryToken(t, c, g, p, adminTestToken); status != http.StatusTooManyRequests {
			t.Errorf("the right token on %s once the budget is spent on all three: %d, want 429", p, status)
		}
	}
}

// TestAdminThrottleLocksNoOneElseOut: an address that sends wrong tokens
// until it is refused keeps no other address out: the right token from
// 127.0.0.2 opens the admin API, profiles and the console.
func TestAdminThrottleLocksNoOneElseOut(t *testing.T) {
	g, _ := startAdminGateway(t, adminTestToken, "", true)
	if c, err := net.DialTCP("tcp", &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, g.adminLn.Addr().(*net.TCPAddr)); err != nil {
		t.Skipf("this host cannot dial from 127.0.0.2: %v", err)
	} else {
		c.Close()
	}
	guesser := adminClient(t, "127.0.0.1")
	for _, p := range []string{"/ui/login", "/admin/keys"} {
		for range 2 * sourceBudget {
			tryToken(t, guesser, g, p, "guess")
		}
	}
	for _, p := range []string{"/ui/login", "/admin/keys"} {
		if status, _ := tryToken(t, guesser, g, p, adminTestToken); status != http.StatusTooManyRequests {
			t.Errorf("the right token on %s from the guessing address: %d, want 429", p, status)
		}
	}
	operator := adminClient(t, "127.0.0.2")
	for _, p := range []string{"/ui/login", "/admin/keys", "/debug/pprof/", "/nothing"} {
		if status, _ := tryToken(t, operator, g, p, adminTestToken); status != rightTokenStatus(p) {
			t.Errorf("the right token on %s from another address: %d, want %d", p, status, rightTokenStatus(p))
		}
	}
}

// TestSignInsWhoseFormsArriveTogether: sign-ins that send their headers
// first take their slots then: those past the address's budget are
// refused at once, before their forms are sent, and of all the forms,
// sent together afterwards, only the budget's are compared.
func TestSignInsWhoseFormsArriveTogether(t *testing.T) {
	const n = 60
	g, _ := startAdminGateway(t, adminTestToken, "", false)
	form := url.Values{"token": {"guess"}}.Encode()
	conns := make([]net.Conn, n)
	answers := make(chan int, n)
	for i := range conns {
		c, err := net.Dial("tcp", g.adminLn.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		conns[i] = c
		fmt.Fprintf(c, "POST /ui/login HTTP/1.1\r\nHost: %s\r\nOrigin: %s\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\n\r\n",
			g.adminLn.Addr(), g.AdminURL(), len(form))
		go func() {
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				answers <- 0
				return
			}
			resp.Body.Close()
			answers <- resp.StatusCode
		}()
	}
	got := map[int]int{}
	// Those past the budget are answered without their forms; a bound on
	// the wait fails a gateway that reads every form first.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for range n - sourceBudget {
		select {
		case s := <-answers:
			got[s]++
		case <-ctx.Done():
			t.Fatalf("before the forms were sent, %v; want %d sign-ins refused with 429 at once", got, n-sourceBudget)
		}
	}
	for _, c := range conns {
		io.WriteString(c, form)
	}
	for range sourceBudget {
		got[<-answers]++
	}
	if got[http.StatusTooManyRequests] != n-sourceBudget || got[http.StatusUnauthorized] != sourceBudget {
		t.Errorf("%d sign-ins with wrong tokens, forms sent together: %v; want %d × 401 and %d × 429", n, got, sourceBudget, n-sourceBudget)
	}
}
