package app

// Redis as llmgw reaches it, on the Redis of LLMGW_TEST_REDIS and, where
// redis-server is installed, on a private one speaking TLS: limits and
// the bus through an ACL user and through rediss://, a configuration Redis
// refuses failing at start with no password in the error or the log, and
// what is written on the load channel believed only as far as one real
// gateway could have it.

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/keys"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/placement"
	"gitea.mynodes.xyz/ilker/llmgw/internal/sim"
)

// testRedisURL is LLMGW_TEST_REDIS, or the test is skipped.
func testRedisURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("LLMGW_TEST_REDIS")
	if u == "" {
		t.Skip("LLMGW_TEST_REDIS is not set (e.g. redis://127.0.0.1:6379/0); skipping Redis tests")
	}
	return u
}

// loadMessage is a load message as the bus carries it, written here by
// hand as anything that can publish on the channel could
// (internal/router/placement/load.go): version 1, the sender's id, then
// for each load its pool and endpoint, each a uvarint length and its
// bytes, and its four counts as uvarints.
func loadMessage(sender uint64, loads ...placement.Load) []byte {
	b := binary.LittleEndian.AppendUint64([]byte{1}, sender)
	for _, l := range loads {
		for _, s := range []string{l.Pool, l.Endpoint} {
			b = binary.AppendUvarint(b, uint64(len(s)))
			b = append(b, s...)
		}
		for _, n := range []int64{l.Inflight, l.Pending, l.Owed, l.Critical} {
			b = binary.AppendUvarint(b, uint64(n))
		}
	}
	return b
}

// waitUntil polls cond until it holds, and fails t if it does not within
// ten seconds.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// counter is the sum of the counter name's series whose label is value.
func counter(t *testing.T, g *Gateway, name, label, value string) float64 {
	t.Helper()
	n, err := (&InProcess{Gateway: g}).CounterSum(name, label, value)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestForgedPeerLoadsCannotShutAdmission: whatever can publish on the
// load channel writes, for as long as it writes, that some gateway has
// 2^31-1 requests in flight and owes 2^31-1 prompt tokens at the one
// endpoint of a model with admission, and that another has as many in
// flight and pending there as one gateway can hold, each owing the
// largest prompt. The gateway believes no more than one real gateway
// could have there, 8 prompts of 512 tokens (a pool of one endpoint
// behind admission, server.max_body_bytes 2 KiB), so it still predicts a
// first token within the SLO and admits every request; and it counts
// what it refused.
func TestForgedPeerLoadsCannotShutAdmission(t *testing.T) {
	redisURL := testRedisURL(t)
	ctx := t.Context()
	rep, err := sim.Start(ctx, sim.Config{Model: "sim", FixedTiming: true, TTFT: 5 * time.Millisecond, TPOT: time.Millisecond}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rep.Close)
	channel := "llmgw-test-forged-" + randomName(t)
	g, err := StartGateway(ctx, GatewayOptions{Model: "sim", Upstreams: []string{rep.URL()}, Admission: true,
		Redis: redisURL, Channel: channel, MaxBodyBytes: 2 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	endpoint := g.router.Catalog().Pools()[0].Endpoints[0].Name

	o, err := redis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	forger := redis.NewClient(o)
	t.Cleanup(func() { forger.Close() })
	huge := loadMessage(0xa11ce, placement.Load{Pool: "upstream", Endpoint: endpoint,
		Inflight: math.MaxInt32, Pending: math.MaxInt32, Owed: math.MaxInt32})
	full := loadMessage(0xb0b,
		placement.Load{Pool: "upstream", Endpoint: endpoint, Inflight: 65535, Pending: 65535, Owed: 65535 * 512},
		placement.Load{Pool: "upstream", Endpoint: "forged", Inflight: 1})
	var heard [2]int64 // messages Redis gave the gateway: huge, full
	stop := make(chan struct{})
	var wg sync.WaitGroup
	stopForging := sync.OnceFunc(func() { close(stop); wg.Wait() })
	t.Cleanup(stopForging) // before the forger's client closes
	wg.Go(func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			for i, msg := range [][]byte{huge, full} {
				n, err := forger.Publish(ctx, channel+":load", msg).Result()
				if err != nil {
					t.Error(err)
					return
				}
				heard[i] += n
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	})
	waitUntil(t, "the gateway to hear the forged loads", func() bool {
		return counter(t, g.Gateway, "llmgw_peer_load_messages_total", "outcome", "received") >= 2
	})

	body := `{"model":"sim","max_tokens":4,"messages":[{"role":"user","content":"hello there"}]}`
	for i := range 20 {
		resp, err := http.Post(g.URL()+"/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d, with forged loads on the bus: %d %s", i, resp.StatusCode, answer)
		}
	}
	stopForging()

	// Every message Redis took for the gateway, the gateway has read.
	waitUntil(t, "the gateway to read every forged message", func() bool {
		return counter(t, g.Gateway, "llmgw_peer_load_messages_total", "outcome", "received") == float64(heard[0]+heard[1])
	})
	// Each huge message is refused; each full one is believed up to what
	// one gateway could have (the sum cut), and its made-up endpoint
	// refused.
	want := fmt.Sprintf(`
# HELP llmgw_peer_loads_refused_total Other gateways' loads at an endpoint refused as more than one gateway could have, by reason: too_large (a message longer than any gateway sends, counted once, unread), unknown_endpoint, duplicate, inflight (more than a gateway can hold), counts (pending and critical above in flight), owed (more prefill than its pending prompts could carry), peers (from a gateway past the most kept), sum (the gateways' sum at an endpoint past what one gateway could have there, counted for each message that leaves it cut).
# TYPE llmgw_peer_loads_refused_total counter
llmgw_peer_loads_refused_total{reason="counts"} 0
llmgw_peer_loads_refused_total{reason="duplicate"} 0
llmgw_peer_loads_refused_total{reason="inflight"} %d
llmgw_peer_loads_refused_total{reason="owed"} 0
llmgw_peer_loads_refused_total{reason="peers"} 0
llmgw_peer_loads_refused_total{reason="sum"} %d
llmgw_peer_loads_refused_total{reason="too_large"} 0
llmgw_peer_loads_refused_total{reason="unknown_endpoint"} %d
`, heard[0], heard[1], heard[1])
	if err := testutil.GatherAndCompare(g.reg, strings.NewReader(want), "llmgw_peer_loads_refused_total"); err != nil {
		t.Error(err)
	}
}

// redisGateway starts a gateway with keys in front of a simulated
// replica, its limits and bus on Redis as limits (YAML, the limits
// section's fields) says, sharing on channel. Its logs are kept. The
// error is newGateway's.
func redisGateway(t *testing.T, limits, channel string) (*keyedGateway, error) {
	t.Helper()
	ctx := t.Context()
	rep, err := sim.Start(ctx, sim.Config{Model: "chat", FixedTiming: true}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rep.Close)
	yaml := keyedConfig(rep.URL(), "sqlite:"+filepath.Join(t.TempDir(), "gw.db"), "limits:\n"+limits)
	yaml = strings.Replace(yaml, "router: {auth: keys, tenant_label: team}",
		fmt.Sprintf("router: {auth: keys, tenant_label: team, share_channel: %q}", channel), 1)
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncWriter{w: new(strings.Builder)}
	g, err := newGateway(ctx, cfg, "", slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	kg := &keyedGateway{Gateway: g, logs: logs}
	if err != nil {
		return kg, err
	}
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	t.Cleanup(func() { <-done })
	return kg, nil
}

// limitsAndBusWork shows g's limits and bus at work on its Redis: a key of
// 2 requests a minute is refused its third, Redis having answered every
// admission, and what its answers used is settled there; a placement goes
// out on channel; and a load message that other, a client of the same
// Redis, publishes on it comes in.
func limitsAndBusWork(t *testing.T, g *keyedGateway, channel string, other *redis.Client) {
	t.Helper()
	limited, id := g.newKey(t, keys.Spec{Tenant: "redis/" + randomName(t), RPM: 2})
	for i, want := range []int{200, 200, 429} {
		if resp, body := g.call(t, limited, "chat", 2); resp.StatusCode != want {
			t.Errorf("request %d of a key of 2 a minute: %d %s, want %d", i+1, resp.StatusCode, body, want)
		}
	}
	if n := counter(t, g.Gateway, "llmgw_limits_redis_errors_total", "", ""); n != 0 {
		t.Errorf("%v admissions Redis did not answer", n)
	}
	// What the answers used is settled off the request path, by a script
	// of its own.
	waitUntil(t, "the settlements to reach Redis", func() bool {
		budget, err := other.Keys(t.Context(), "{llmgw-limits}:budget:key:"+id+":*").Result()
		return err == nil && len(budget) > 0
	})
	if n := counter(t, g.Gateway, "llmgw_limits_settle_dropped_total", "", ""); n != 0 {
		t.Errorf("%v settlements did not reach Redis", n)
	}

	free, _ := g.newKey(t, keys.Spec{Tenant: "redis/" + randomName(t)})
	prompt := strings.Repeat("A prompt long enough to be placed by its blocks. ", 20)
	body := fmt.Sprintf(`{"model":"chat","max_tokens":2,"messages":[{"role":"user","content":%q}]}`, prompt)
	req, _ := http.NewRequest(http.MethodPost, g.URL()+"/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+free)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a long prompt: %d", resp.StatusCode)
	}
	waitUntil(t, "the placement to go out", func() bool {
		return counter(t, g.Gateway, "llmgw_prefix_placements_total", "outcome", "sent") >= 1
	})

	msg := loadMessage(0x0e, placement.Load{Pool: "sim", Endpoint: "elsewhere", Inflight: 1})
	waitUntil(t, "a load message to come in", func() bool {
		if err := other.Publish(t.Context(), channel+":load", msg).Err(); err != nil {
			t.Fatal(err)
		}
		return counter(t, g.Gateway, "llmgw_peer_load_messages_total", "outcome", "received") >= 1
	})
}

// noSecret fails t if the error or the log holds secret.
func noSecret(t *testing.T, secret string, err error, logs string) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), secret) {
		t.Errorf("the error holds the password: %v", err)
	}
	if strings.Contains(logs, secret) {
		t.Errorf("the log holds the password:\n%s", logs)
	}
}

// leastCommands are the commands a gateway sends Redis: PING at start,
// the limit scripts and the commands they run, and the bus's.
const leastCommands = "ping evalsha eval hmget hset hincrby hincrbyfloat pexpire publish subscribe unsubscribe"

// TestRedisACLUser: with limits.redis naming a Redis ACL user and its
// password, the limits and both ways of the bus work as that user; a
// wrong password fails the start, and neither the error nor the log holds
// it.
func TestRedisACLUser(t *testing.T) {
	base := testRedisURL(t)
	o, err := redis.ParseURL(base)
	if err != nil {
		t.Fatal(err)
	}
	admin := redis.NewClient(o)
	t.Cleanup(func() { admin.Close() })
	user, password := "llmgw-test-"+randomName(t), "pw-"+randomName(t)
	if err := admin.Do(t.Context(), "ACL", "SETUSER", user, "on", ">"+password, "~*", "&*", "+@all").Err(); err != nil {
		t.Fatalf("ACL SETUSER: %v", err)
	}
	t.Cleanup(func() { admin.Do(context.Background(), "ACL", "DELUSER", user) })
	as := func(password string) string {
		u, err := url.Parse(base)
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.UserPassword(user, password)
		return fmt.Sprintf("  redis: %q\n", u.String())
	}

	t.Run("the user", func(t *testing.T) {
		channel := "llmgw-test-acl-" + randomName(t)
		g, err := redisGateway(t, as(password), channel)
		if err != nil {
			t.Fatal(err)
		}
		limitsAndBusWork(t, g, channel, admin)
		noSecret(t, password, nil, g.logs.String())
	})
	t.Run("the least a gateway needs", func(t *testing.T) {
		channel := "llmgw-test-acl-" + randomName(t)
		least, password := "llmgw-test-least-"+randomName(t), "pw-"+randomName(t)
		rules := []any{"ACL", "SETUSER", least, "on", ">" + password, "resetkeys", "~{llmgw-limits}:*",
			"resetchannels", "&" + channel, "&" + channel + ":load", "-@all"}
		for _, c := range strings.Fields(leastCommands) {
			rules = append(rules, "+"+c)
		}
		if err := admin.Do(t.Context(), rules...).Err(); err != nil {
			t.Fatalf("ACL SETUSER: %v", err)
		}
		t.Cleanup(func() { admin.Do(context.Background(), "ACL", "DELUSER", least) })
		u, _ := url.Parse(base)
		u.User = url.UserPassword(least, password)
		g, err := redisGateway(t, fmt.Sprintf("  redis: %q\n", u.String()), channel)
		if err != nil {
			t.Fatal(err)
		}
		limitsAndBusWork(t, g, channel, admin)
		if logs := g.logs.String(); strings.Contains(logs, "NOPERM") {
			t.Errorf("a command was refused:\n%s", logs)
		}
	})
	t.Run("a wrong password", func(t *testing.T) {
		wrong := "wrong-" + randomName(t)
		g, err := redisGateway(t, as(wrong), "llmgw-test-acl-"+randomName(t))
		if err == nil {
			t.Fatal("the gateway started with a password Redis refuses")
		}
		if !redis.IsAuthError(err) || !strings.HasPrefix(err.Error(), "limits.redis: ") {
			t.Errorf("error %q; want limits.redis: and Redis's refusal", err)
		}
		noSecret(t, wrong, err, g.logs.String())
	})
}

// TestRedisSecretsNeverShow: an error about limits.redis has the URL's
// password cut out, as it is written and as it decodes, and still unwraps
// to the error it came from.
func TestRedisSecretsNeverShow(t *testing.T) {
	raw := "rediss://llmgw:p%40ss:word@cache:6380/0"
	if got, want := redisSecrets(raw), []string{"p@ss:word", "p%40ss:word"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("secrets %q, want %q", got, want)
	}
	if got := redisSecrets("redis://cache:6379/0"); len(got) != 0 {
		t.Errorf("secrets of a URL without a password: %q", got)
	}
	cause := errors.New(`dial "p@ss:word" and "p%40ss:word"`)
	err := redact("limits.redis", cause, redisSecrets(raw))
	if got, want := err.Error(), `limits.redis: dial "xxxxx" and "xxxxx"`; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	if !errors.Is(err, cause) {
		t.Error("the redacted error does not unwrap to its cause")
	}
	// go-redis echoes a database number it cannot read.
	_, err = newRedisClient(config.Limits{Redis: "redis://u:s3cret@cache:6379/s3cret"}, nil)
	if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.HasPrefix(err.Error(), "limits.redis: ") {
		t.Errorf("error %v; want limits.redis: and no password", err)
	}
}

// tlsFiles are a certificate authority, and a server's and a client's
// certificates and keys it signed, as PEM files.
type tlsFiles struct {
	ca, serverCert, serverKey, clientCert, clientKey string
}

// newTLSFiles writes a new certificate authority and the certificates it
// signs into dir: the server's for 127.0.0.1 and localhost.
func newTLSFiles(t *testing.T, dir string) tlsFiles {
	t.Helper()
	write := func(name, kind string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	now := time.Now()
	caKey := newKey()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "llmgw test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	leaf := func(serial int64, name string, usage x509.ExtKeyUsage) (cert, key string) {
		k := newKey()
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return write(name+".pem", "CERTIFICATE", der), write(name+".key", "PRIVATE KEY", kder)
	}
	f := tlsFiles{ca: write("ca.pem", "CERTIFICATE", caDER)}
	f.serverCert, f.serverKey = leaf(2, "server", x509.ExtKeyUsageServerAuth)
	f.clientCert, f.clientKey = leaf(3, "client", x509.ExtKeyUsageClientAuth)
	return f
}

// startTLSRedis starts a redis-server of its own that speaks TLS alone on
// a free port of 127.0.0.1, asks clients for a certificate f's authority
// signed and for password, and is stopped at cleanup. It returns the
// port once the server answers a PING, or skips t when there is no
// redis-server, or one built without TLS.
func startTLSRedis(t *testing.T, f tlsFiles, password string) int {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not on PATH; skipping the Redis TLS test (Debian: apt-get install redis-server)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir := t.TempDir()
	cmd := exec.Command(bin, "--port", "0", "--tls-port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--tls-cert-file", f.serverCert, "--tls-key-file", f.serverKey, "--tls-ca-cert-file", f.ca,
		"--tls-auth-clients", "yes", "--requirepass", password, "--save", "", "--appendonly", "no", "--dir", dir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})

	cert, err := tls.LoadX509KeyPair(f.clientCert, f.clientKey)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	pemCA, _ := os.ReadFile(f.ca)
	roots.AppendCertsFromPEM(pemCA)
	probe := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), Password: password, MaxRetries: -1,
		TLSConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}, ServerName: "127.0.0.1"}})
	defer probe.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case err := <-exited:
			exited <- err
			if strings.Contains(out.String(), "TLS") {
				t.Skipf("redis-server does not speak TLS (%v); skipping the Redis TLS test:\n%s", err, out.String())
			}
			t.Fatalf("redis-server exited: %v\n%s", err, out.String())
		default:
		}
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		err := probe.Ping(ctx).Err()
		cancel()
		if err == nil {
			return port
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server did not answer within 10 s: %v\n%s", err, out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRedisTLS: with limits.redis a rediss:// URL, limits.redis_ca_file
// the private authority that signed Redis's certificate, and a client
// certificate it signed, the limits and both ways of the bus work over
// TLS, with the default user's password. Without the authority, or
// without the client certificate, the start fails, and the password
// shows nowhere.
func TestRedisTLS(t *testing.T) {
	f := newTLSFiles(t, t.TempDir())
	password := "pw-" + randomName(t)
	port := startTLSRedis(t, f, password)
	redisLine := fmt.Sprintf("  redis: rediss://:%s@127.0.0.1:%d/0\n", password, port)
	caLine := fmt.Sprintf("  redis_ca_file: %q\n", f.ca)
	clientLines := fmt.Sprintf("  redis_cert_file: %q\n  redis_key_file: %q\n", f.clientCert, f.clientKey)

	t.Run("the authority and a client certificate", func(t *testing.T) {
		channel := "llmgw-test-tls-" + randomName(t)
		g, err := redisGateway(t, redisLine+caLine+clientLines, channel)
		if err != nil {
			t.Fatal(err)
		}
		other, err := newRedisClient(g.cfg.Limits, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { other.Close() })
		limitsAndBusWork(t, g, channel, other)
		noSecret(t, password, nil, g.logs.String())
	})
	for _, tc := range []struct {
		name, limits string
		want         string // in the error
	}{
		{"without the authority", redisLine + clientLines, "certificate signed by unknown authority"},
		{"without a client certificate", redisLine + caLine, "tls: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := redisGateway(t, tc.limits, "llmgw-test-tls-"+randomName(t))
			if err == nil {
				t.Fatal("the gateway started")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "limits.redis: ") {
				t.Errorf("error %q; want limits.redis: and %q", err, tc.want)
			}
			noSecret(t, password, err, g.logs.String())
		})
	}
}
