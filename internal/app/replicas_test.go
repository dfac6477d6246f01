package app

// Several gateway processes sharing Redis and a store behave as one, and a
// store outage loses no usage record. These tests start real llmgw
// processes (this test binary, re-executed as `llmgw serve`) and need the
// PostgreSQL and Redis named by LLMGW_TEST_POSTGRES and LLMGW_TEST_REDIS.

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/keys"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/store"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
	"gitea.mynodes.xyz/ilker/llmgw/internal/sim"
)

// childServeEnv carries `llmgw serve`'s arguments, one per line, to a
// re-executed test binary.
const childServeEnv = "LLMGW_TEST_CHILD_SERVE"

func TestMain(m *testing.M) {
	if args := os.Getenv(childServeEnv); args != "" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := ServeCommand(ctx, strings.Split(args, "\n"), os.Stdout, os.Stderr)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "llmgw:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// startProcess runs `llmgw serve --config path` as a process of its own and
// returns its API base URL and admin URL. The process is stopped with
// SIGTERM at cleanup.
func startProcess(t *testing.T, configPath string) (api, admin string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childServeEnv+"=--config\n"+configPath)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	found := listenerURLs(out)
	select {
	case u := <-found:
		return u[0], u[1]
	case <-time.After(30 * time.Second):
		t.Fatal("the gateway process did not start")
		return "", ""
	}
}

// listenerURLs reads the banner `llmgw serve` prints on out, "llmgw:
// OpenAI API on URL, metrics and admin on URL", and sends the two URLs
// once it has; what follows is read and dropped, so the writer never
// blocks.
func listenerURLs(out io.Reader) <-chan [2]string {
	found := make(chan [2]string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) == 10 && f[1] == "OpenAI" {
				found <- [2]string{strings.TrimSuffix(f[4], ","), f[9]}
			}
		}
	}()
	return found
}

func randomName(t *testing.T) string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func chat(t *testing.T, base, key string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/chat/completions", strings.NewReader(`{"model":"chat","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`))
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, ""
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("X-Request-Id")
}

func TestTwoProcessesShareLimits(t *testing.T) {
	redisURL := os.Getenv("LLMGW_TEST_REDIS")
	if redisURL == "" {
		t.Skip("LLMGW_TEST_REDIS is not set; set it to a redis:// URL to run the shared-limit test")
	}
	ctx := t.Context()
	rep, err := sim.Start(ctx, sim.Config{Model: "chat", FixedTiming: true}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer rep.Close()
	dir := t.TempDir()
	storeURL := "sqlite:" + filepath.Join(dir, "shared.db")
	st, err := store.Open(ctx, storeURL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const rpm = 100
	key, k, err := keys.Create(ctx, st, keys.Spec{Tenant: "multi/" + randomName(t), RPM: rpm}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// One store, and a spool directory for each process: a directory is
	// one gateway's.
	var gateways []string
	for _, name := range []string{"a", "b"} {
		path := filepath.Join(dir, name+".yaml")
		cfg := strings.Replace(keyedConfig(rep.URL(), storeURL, fmt.Sprintf("limits: {redis: %q}\n", redisURL)),
			fmt.Sprintf("store: {url: %q}", storeURL),
			fmt.Sprintf("store: {url: %q, spool_dir: %q}", storeURL, filepath.Join(dir, name+".spool")), 1)
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		api, _ := startProcess(t, path)
		gateways = append(gateways, api)
	}

	// Three times the limit, at once, spread over both processes.
	var ok, limited atomic.Int64
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for range 3 * rpm / 16 {
				switch code, _ := chat(t, gateways[w%2], key); code {
				case 200:
					ok.Add(1)
				case 429:
					limited.Add(1)
				default:
					t.Errorf("status %d", code)
				}
			}
		})
	}
	wg.Wait()
	t.Logf("two processes let %d through and limited %d", ok.Load(), limited.Load())
	if got := ok.Load(); got < rpm*95/100 || got > rpm*105/100 {
		t.Errorf("two processes let %d requests through a combined limit of %d a minute; want within 5%%", got, rpm)
	}

	// A revocation reaches both processes within a second.
	if err := st.RevokeKey(ctx, k.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	for _, g := range gateways {
		for {
			if code, _ := chat(t, g, key); code == 401 {
				break
			}
			if time.Since(revoked) > time.Second {
				t.Fatalf("%s still takes the key %v after its revocation", g, time.Since(revoked))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func scrape(t *testing.T, adminURL string) string {
	t.Helper()
	resp, err := http.Get(adminURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// flakyProxy forwards TCP connections to a target until it is cut: then it
// drops every open connection and refuses new ones until restored.
type flakyProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	down  bool
	conns []net.Conn
}

func newFlakyProxy(t *testing.T, target string) *flakyProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &flakyProxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go p.serve()
	return p
}

func (p *flakyProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		go func() { io.Copy(up, c); up.Close() }()
		go func() { io.Copy(c, up); c.Close() }()
	}
}

func (p *flakyProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *flakyProxy) restore() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

func TestStoreOutageLosesNoRecord(t *testing.T) {
	pgURL := os.Getenv("LLMGW_TEST_POSTGRES")
	if pgURL == "" {
		t.Skip("LLMGW_TEST_POSTGRES is not set; set it to a postgres:// URL to run the store outage test")
	}
	ctx := t.Context()
	// A schema of its own, reached by the gateway through a proxy the test
	// can cut.
	admin, schema, direct := ownSchema(t, pgURL, "llmgw_outage_")
	u, err := url.Parse(direct)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newFlakyProxy(t, u.Host)
	u.Host = proxy.ln.Addr().String()

	rep, err := sim.Start(ctx, sim.Config{Model: "chat", FixedTiming: true}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer rep.Close()
	dir := t.TempDir()
	cfg := strings.Replace(keyedConfig(rep.URL(), u.String(), ""), "auth: keys", "auth: none", 1)
	cfg = strings.Replace(cfg, "store: {url:", fmt.Sprintf("store: {spool_dir: %q, url:", filepath.Join(dir, "spool")), 1)
	path := filepath.Join(dir, "llmgw.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	gw, adminURL := startProcess(t, path)

	ids := map[string]bool{}
	send := func(n int, state string) {
		for range n {
			code, id := chat(t, gw, "")
			if code != 200 || id == "" {
				t.Fatalf("status %d while the store is %s", code, state)
			}
			ids[id] = true
		}
	}
	send(20, "up")
	proxy.cut()
	send(30, "down") // serving goes on while the store is unreachable
	if resp, err := http.Get(adminURL + "/readyz"); err != nil || resp.StatusCode != 200 {
		t.Errorf("readiness during the store outage: %v %v", resp, err)
	}
	// Wait until the ledger has found the store gone and spooled.
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(scrape(t, adminURL), `llmgw_ledger_records_total{result="spooled"}`) {
		if time.Now().After(deadline) {
			t.Fatal("no record was spooled during the outage")
		}
		time.Sleep(50 * time.Millisecond)
	}
	proxy.restore()
	send(10, "back")

	st, err := store.Open(ctx, direct)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	deadline = time.Now().Add(30 * time.Second)
	for {
		rows, err := st.Usage(ctx, usage.Query{})
		if err == nil && rows[0].Requests == int64(len(ids)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ledger holds %+v (%v), want %d requests", rows, err, len(ids))
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Every request is there, each exactly once.
	rows, err := admin.Query(ctx, "SELECT id, count(*) FROM "+schema+".usage GROUP BY id")
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		if !ids[id] || n != 1 {
			t.Errorf("record %s: %d times, sent by this test: %v", id, n, ids[id])
		}
		seen++
	}
	if seen != len(ids) {
		t.Errorf("%d records for %d requests", seen, len(ids))
	}
}
