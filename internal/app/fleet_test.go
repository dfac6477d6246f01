package app

// A fleet of llmgw processes, built as operators run them, sharing one
// PostgreSQL database and Redis in front of simulated replicas: one is
// killed with SIGKILL under load, and the others must lose nothing. These
// tests need LLMGW_TEST_POSTGRES and LLMGW_TEST_REDIS.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/keys"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/ledger"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/store"
	"gitea.mynodes.xyz/ilker/llmgw/internal/sim"
)

// fleetEnv is the PostgreSQL and Redis the fleet tests use, or a skip.
func fleetEnv(t *testing.T) (pgURL, redisURL string) {
	t.Helper()
	pgURL, redisURL = os.Getenv("LLMGW_TEST_POSTGRES"), os.Getenv("LLMGW_TEST_REDIS")
	if pgURL == "" || redisURL == "" {
		t.Skip("LLMGW_TEST_POSTGRES and LLMGW_TEST_REDIS are not both set; set them to run the fleet tests")
	}
	return pgURL, redisURL
}

// buildLlmgw builds the llmgw binary, as an operator's would be, into a
// directory of the test's.
func buildLlmgw(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "llmgw")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "../../cmd/llmgw")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// ownSchema makes a PostgreSQL schema for the test alone, dropped at its
// end, and returns a connection to the database and the URL a gateway
// reaches the schema by.
func ownSchema(t *testing.T, pgURL, prefix string) (*pgx.Conn, string, string) {
	t.Helper()
	ctx := t.Context()
	admin, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	schema := prefix + randomName(t)
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })
	u, err := url.Parse(pgURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	q.Set("connect_timeout", "2")
	u.RawQuery = q.Encode()
	return admin, schema, u.String()
}

// gatewayProcess is a llmgw serve process.
type gatewayProcess struct {
	cmd        *exec.Cmd
	api, admin string
	exited     chan error
	logs       *syncWriter
}

// startGatewayProcess runs `bin serve --config path` with env added to this
// process's environment, until the test ends or it is killed.
func startGatewayProcess(t *testing.T, bin, path string, env ...string) *gatewayProcess {
	t.Helper()
	p := &gatewayProcess{cmd: exec.Command(bin, "serve", "--config", path), exited: make(chan error, 1), logs: &syncWriter{w: new(strings.Builder)}}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stderr = p.logs
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGTERM)
		<-p.exited
		p.exited <- nil
	})
	found := listenerURLs(out)
	select {
	case u := <-found:
		p.api, p.admin = u[0], u[1]
	case err := <-p.exited:
		p.exited <- err
		t.Fatalf("llmgw serve exited before serving: %v\n%s", err, p.logs)
	case <-time.After(30 * time.Second):
		t.Fatalf("llmgw serve did not start\n%s", p.logs)
	}
	return p
}

// kill ends the process with SIGKILL, as the kernel's OOM killer or a lost
// node does: no drain, no last flush.
func (p *gatewayProcess) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	err := <-p.exited
	p.exited <- err
}

// fleetConfig is a gateway's configuration file: keys on, the model chat on
// the simulated upstreams, its own spool directory, the store and Redis
// left to LLMGW_STORE_URL and LLMGW_REDIS_URL, as the Helm chart does.
func fleetConfig(t *testing.T, dir, channel string, upstreams []string) string {
	t.Helper()
	var eps []string
	for _, u := range upstreams {
		eps = append(eps, fmt.Sprintf("{url: %q}", u))
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`
server: {listen: "127.0.0.1:0", admin_listen: "127.0.0.1:0"}
router: {auth: keys, share_channel: %q}
store: {spool_dir: %q}
pools:
  - name: sim
    kind: vllm
    endpoints: [%s]
models:
  - {name: chat, pool: sim, price: {input_per_million: 1000, output_per_million: 2000}}
`, channel, filepath.Join(dir, "spool"), strings.Join(eps, ", "))
	path := filepath.Join(dir, "llmgw.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// answer is what a client got for one request.
type answer struct {
	gateway int
	id      string // X-Request-Id; empty when no answer began
	whole   bool   // a 200 read to its end: [DONE] for a stream, a whole JSON body else
	stream  bool
	err     error     // a refusal or a cut
	at      time.Time // when it ended
}

// ask sends one chat completion, streamed or not, to base with key.
func ask(client *http.Client, base, key string, stream bool) answer {
	body := `{"model":"chat","max_tokens":4,"messages":[{"role":"user","content":"plain"}]}`
	if stream {
		body = `{"model":"chat","stream":true,"max_tokens":40,"ignore_eos":true,"messages":[{"role":"user","content":"stream"}]}`
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := client.Do(req)
	if err != nil {
		return answer{stream: stream, err: err}
	}
	defer resp.Body.Close()
	a := answer{id: resp.Header.Get("X-Request-Id"), stream: stream}
	if resp.StatusCode != http.StatusOK {
		a.err = fmt.Errorf("status %d", resp.StatusCode)
		return a
	}
	if !stream {
		var v struct{ Choices []json.RawMessage }
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || len(v.Choices) != 1 {
			a.err = fmt.Errorf("a plain answer cut: %v", err)
			return a
		}
		a.whole = true
		return a
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			a.whole = true
			return a
		}
		if strings.HasPrefix(data, `{"error"`) {
			a.err = errors.New(data)
			return a
		}
	}
	a.err = fmt.Errorf("a stream cut: %v", sc.Err())
	return a
}

// ledgerIDs is how many times each request id is in the schema's ledger.
func ledgerIDs(t *testing.T, db *pgx.Conn, schema string) map[string]int {
	t.Helper()
	rows, err := db.Query(t.Context(), "SELECT id, count(*) FROM "+schema+".usage GROUP BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	ids := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		ids[id] = n
	}
	return ids
}

// TestFleetLosesNothing runs three gateway processes on one PostgreSQL
// schema and Redis in front of simulated replicas, drives streams and
// plain requests through all three, and kills one with SIGKILL mid-run.
// Then: every answer a survivor gave whole is in the ledger exactly once,
// and so is every answer the killed one gave whole, once it has started
// again and replayed its journal; a key's rpm holds exactly across the
// survivors; a revocation reaches each survivor within a second; and the
// survivors stayed ready throughout. It reports what the killed gateway's
// requests in flight cost.
func TestFleetLosesNothing(t *testing.T) {
	pgURL, redisURL := fleetEnv(t)
	bin := buildLlmgw(t)
	db, schema, storeURL := ownSchema(t, pgURL, "llmgw_fleet_")
	ctx := t.Context()

	// 40 tokens at 25 ms: a stream lasts a second.
	replicas, err := sim.StartReplicas(ctx, sim.Config{Model: "chat", FixedTiming: true, TTFT: 20 * time.Millisecond, TPOT: 25 * time.Millisecond}, 2, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var upstreams []string
	for _, r := range replicas {
		upstreams = append(upstreams, r.URL())
		t.Cleanup(r.Close)
	}
	st, err := store.Open(ctx, storeURL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	loadKey, _, err := keys.Create(ctx, st, keys.Spec{Tenant: "fleet/load"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}

	channel := "llmgw:fleet:" + randomName(t)
	env := []string{config.EnvStoreURL + "=" + storeURL, config.EnvRedisURL + "=" + redisURL,
		"LLMGW_CACHE_SECRET=fleet-cache-secret-" + randomName(t)}
	dirs := make([]string, 3)
	var gws []*gatewayProcess
	for i := range dirs {
		dirs[i] = filepath.Join(t.TempDir(), fmt.Sprintf("gw%d", i))
		gws = append(gws, startGatewayProcess(t, bin, fleetConfig(t, dirs[i], channel, upstreams), env...))
	}
	const victim = 2
	survivors := gws[:victim]

	// The survivors' readiness, watched throughout.
	var readyChecks, notReady atomic.Int64
	watchCtx, stopWatch := context.WithCancel(ctx)
	var watch sync.WaitGroup
	watch.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			for _, g := range survivors {
				readyChecks.Add(1)
				resp, err := http.Get(g.admin + "/readyz")
				if err != nil || resp.StatusCode != http.StatusOK {
					notReady.Add(1)
				}
				if err == nil {
					resp.Body.Close()
				}
			}
			select {
			case <-watchCtx.Done():
				return
			case <-tick.C:
			}
		}
	})

	// Load: 30 clients, each alternating streams and plain requests over
	// the gateways still standing, for 4 s.
	const workers = 30
	var killed atomic.Bool
	// The kill lands once the victim has answered killAfter requests
	// whole, with more under way.
	const killAfter = 40
	underWay := make(chan struct{})
	var mu sync.Mutex // protects answers, victimWhole
	var answers []answer
	victimWhole := 0
	start := time.Now()
	var load sync.WaitGroup
	for w := range workers {
		load.Go(func() {
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
			defer client.CloseIdleConnections()
			for i := 0; time.Since(start) < 4*time.Second; i++ {
				g := (w + i) % len(gws)
				if g == victim && killed.Load() {
					g = (w + i) % victim
				}
				a := ask(client, gws[g].api, loadKey, i%2 == 0)
				a.gateway, a.at = g, time.Now()
				mu.Lock()
				answers = append(answers, a)
				if g == victim && a.whole {
					if victimWhole++; victimWhole == killAfter {
						close(underWay)
					}
				}
				mu.Unlock()
			}
		})
	}
	<-underWay
	killed.Store(true)
	gws[victim].kill(t)
	killedAt := time.Now()
	load.Wait()

	// The survivors' answers reach the ledger within a flush or two; the
	// killed gateway's, once it has started again on its spool directory
	// and replayed what its journal held.
	byGateway := [3]struct{ whole, cut, refused, unwritten int }{}
	wholeIDs := map[string]answer{}
	for _, a := range answers {
		c := &byGateway[a.gateway]
		switch {
		case a.whole:
			c.whole++
			wholeIDs[a.id] = a
		case a.id != "":
			c.cut++
		default:
			c.refused++
		}
	}
	// missingFrom lists the whole answers of the gateways which picks that
	// the ledger lacks, waiting up to 20 s for them to arrive.
	missingFrom := func(which func(gateway int) bool) (inLedger map[string]int, missing []answer) {
		deadline := time.Now().Add(20 * time.Second)
		for {
			inLedger, missing = ledgerIDs(t, db, schema), nil
			for id, a := range wholeIDs {
				if which(a.gateway) && inLedger[id] == 0 {
					missing = append(missing, a)
				}
			}
			if len(missing) == 0 || time.Now().After(deadline) {
				return inLedger, missing
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	inLedger, missing := missingFrom(func(g int) bool { return g != victim })
	for _, a := range missing {
		t.Errorf("request %s, answered whole by a surviving gateway, is not in the ledger", a.id)
	}
	// What the killed gateway had not written when it died: the records
	// of its last flush interval, now only in its journal.
	var oldestUnwritten time.Duration
	for id, a := range wholeIDs {
		if a.gateway == victim && inLedger[id] == 0 {
			byGateway[victim].unwritten++
			oldestUnwritten = max(oldestUnwritten, killedAt.Sub(a.at))
		}
	}
	restarted := startGatewayProcess(t, bin, filepath.Join(dirs[victim], "llmgw.yaml"), env...)
	if code, _ := chat(t, restarted.api, loadKey); code != http.StatusOK {
		t.Errorf("the restarted gateway: status %d", code)
	}
	inLedger, missing = missingFrom(func(int) bool { return true })
	for _, a := range missing {
		t.Errorf("request %s, answered whole by gateway %d, is not in the ledger", a.id, a.gateway)
	}
	for id := range wholeIDs {
		if n := inLedger[id]; n > 1 {
			t.Errorf("request %s is in the ledger %d times", id, n)
		}
	}
	cutStreams, cutPlain := 0, 0
	for _, a := range answers {
		if a.gateway != victim || a.whole || a.id == "" {
			continue
		}
		if inLedger[a.id] > 0 {
			t.Errorf("request %s, cut by the kill, was billed", a.id)
		}
		if a.stream {
			cutStreams++
		} else {
			cutPlain++
		}
	}
	for i, c := range byGateway {
		role := "survivor"
		if i == victim {
			role = "killed"
		}
		t.Logf("gateway %d (%s): %d answered whole, %d cut mid-answer, %d failed before an answer began",
			i, role, c.whole, c.cut, c.refused)
	}
	t.Logf("the kill cut %d streams and %d plain requests in flight on the killed gateway; none of them is billed", cutStreams, cutPlain)
	t.Logf("the killed gateway had not written %d of its whole answers to the ledger (the oldest ended %v before the kill; it flushes every %v)",
		byGateway[victim].unwritten, oldestUnwritten.Round(time.Millisecond), ledger.DefaultFlushInterval)
	t.Logf("restarted on its spool directory, it replayed its journal: %v; every whole answer of the three is in the ledger once: %v",
		strings.Contains(restarted.logs.String(), "replaying them"), len(missing) == 0)

	// A key's rpm holds exactly across the survivors: three times the
	// limit at once, over both. GCRA gives back one request every 60/rpm
	// seconds, so a burst over in less than that lets rpm through, no more.
	const rpm = 30
	rpmKey, _, err := keys.Create(ctx, st, keys.Spec{Tenant: "fleet/rpm", RPM: rpm}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var ok, limited atomic.Int64
	var burst sync.WaitGroup
	burstStart := time.Now()
	for w := range 3 * rpm {
		burst.Go(func() {
			switch code, _ := chat(t, survivors[w%len(survivors)].api, rpmKey); code {
			case http.StatusOK:
				ok.Add(1)
			case http.StatusTooManyRequests:
				limited.Add(1)
			default:
				t.Errorf("the rpm burst: status %d", code)
			}
		})
	}
	burst.Wait()
	took := time.Since(burstStart)
	refilled := int64(took / (time.Minute / rpm))
	t.Logf("a key of rpm %d, %d requests at once over the survivors in %v: %d let through, %d limited",
		rpm, 3*rpm, took.Round(time.Millisecond), ok.Load(), limited.Load())
	if got := ok.Load(); got < rpm || got > rpm+refilled {
		t.Errorf("%d let through a key of rpm %d, want exactly %d (and %d more GCRA gave back in %v)", got, rpm, rpm, refilled, took)
	}

	// A revocation reaches every survivor within a second.
	revKey, k, err := keys.Create(ctx, st, keys.Spec{Tenant: "fleet/revoked"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range survivors {
		if code, _ := chat(t, g.api, revKey); code != http.StatusOK {
			t.Fatalf("the key to revoke: status %d before its revocation", code)
		}
	}
	if err := st.RevokeKey(ctx, k.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	var reachedIn []time.Duration
	for _, g := range survivors {
		for {
			if code, _ := chat(t, g.api, revKey); code == http.StatusUnauthorized {
				reachedIn = append(reachedIn, time.Since(revoked))
				break
			}
			if time.Since(revoked) > time.Second {
				t.Fatalf("%s still takes the key %v after its revocation", g.api, time.Since(revoked))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	t.Logf("the revocation reached the survivors in %v", reachedIn)

	stopWatch()
	watch.Wait()
	t.Logf("the survivors' /readyz: %d checks, %d not ready", readyChecks.Load(), notReady.Load())
	if notReady.Load() > 0 {
		t.Errorf("a survivor was not ready %d times of %d while the other gateway died", notReady.Load(), readyChecks.Load())
	}
}

// TestKilledGatewaySpoolReplays kills a gateway with SIGKILL while its
// store is unreachable and its records wait in the spool, then starts it
// again on the same spool directory: every record reaches the ledger, once.
func TestKilledGatewaySpoolReplays(t *testing.T) {
	pgURL, _ := fleetEnv(t)
	bin := buildLlmgw(t)
	db, schema, storeURL := ownSchema(t, pgURL, "llmgw_spool_")
	ctx := t.Context()
	rep, err := sim.Start(ctx, sim.Config{Model: "chat", FixedTiming: true}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rep.Close)
	u, err := url.Parse(storeURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newFlakyProxy(t, u.Host)
	u.Host = proxy.ln.Addr().String()
	st, err := store.Open(ctx, storeURL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	key, _, err := keys.Create(ctx, st, keys.Spec{Tenant: "spool/team"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	path := fleetConfig(t, t.TempDir(), "llmgw:spool:"+randomName(t), []string{rep.URL()})
	env := []string{config.EnvStoreURL + "=" + u.String()}
	g := startGatewayProcess(t, bin, path, env...)
	ids := map[string]bool{}
	code, id := chat(t, g.api, key) // the key is cached before the outage
	if code != http.StatusOK {
		t.Fatalf("status %d before the outage", code)
	}
	ids[id] = true

	proxy.cut()
	for range 20 {
		code, id := chat(t, g.api, key)
		if code != http.StatusOK {
			t.Fatalf("status %d while the store is down", code)
		}
		ids[id] = true
	}
	// Every record is written or spooled (fsynced) before the kill.
	deadline := time.Now().Add(30 * time.Second)
	for {
		m := scrape(t, g.admin)
		written, spooled := metricValue(m, `llmgw_ledger_records_total{result="written"}`), metricValue(m, "llmgw_ledger_spooled_records")
		if int(written+spooled) == len(ids) && spooled > 0 {
			t.Logf("killed with %v records written and %v in the spool", written, spooled)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v records written and %v spooled of %d", written, spooled, len(ids))
		}
		time.Sleep(50 * time.Millisecond)
	}
	g.kill(t)
	proxy.restore()

	g = startGatewayProcess(t, bin, path, env...)
	deadline = time.Now().Add(30 * time.Second)
	for {
		inLedger := ledgerIDs(t, db, schema)
		found := 0
		for id := range ids {
			if n := inLedger[id]; n > 1 {
				t.Fatalf("request %s is in the ledger %d times", id, n)
			} else if n == 1 {
				found++
			}
		}
		if found == len(ids) {
			t.Logf("the restarted gateway replayed all %d records its killed predecessor spooled", found)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of the %d spooled records reached the ledger after the restart\n%s", found, len(ids), g.logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// metricValue is the value of the series named series (with its labels, as
// exposed) in the exposition text m; zero when m has none.
func metricValue(m, series string) float64 {
	for _, l := range strings.Split(m, "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}
