package app

// The gateway against a hostile peer on either side, on each HTTP
// implementation server.http offers: a backend that sends what no request
// asked for, and a client that sends its body too slowly or stops reading.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

var httpImpls = []string{config.HTTPLlmgw, config.HTTPNetHTTP}

// startConfigured runs a gateway from cfg, on loopback ports, until the
// test ends.
func startConfigured(t *testing.T, cfg *config.Config) *Gateway {
	t.Helper()
	return startLogged(t, cfg, slog.New(slog.DiscardHandler))
}

// startYAML is startConfigured with the configuration file text yaml.
func startYAML(t *testing.T, yaml string) *Gateway {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return startConfigured(t, cfg)
}

// startLogged is startConfigured logging to log.
func startLogged(t *testing.T, cfg *config.Config, log *slog.Logger) *Gateway {
	t.Helper()
	cfg.Server.Listen, cfg.Server.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
	return runGateway(t, cfg, log)
}

// runGateway validates cfg, listeners and all, and runs a gateway of it
// until the test ends.
func runGateway(t *testing.T, cfg *config.Config, log *slog.Logger) *Gateway {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	g, err := newGateway(t.Context(), cfg, "", log)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- g.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return g
}

// scriptedBackend serves HTTP/1.1 by hand: for each request read, answer
// writes whatever it likes on the raw connection, marker being the content
// of the request's first message.
func scriptedBackend(t *testing.T, answer func(c net.Conn, marker string, stream bool)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					var body struct {
						Stream   bool
						Messages []struct{ Content string }
					}
					json.NewDecoder(req.Body).Decode(&body)
					io.Copy(io.Discard, req.Body)
					marker := ""
					if len(body.Messages) > 0 {
						marker = body.Messages[0].Content
					}
					answer(c, marker, body.Stream)
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String() + "/v1"
}

// plainAnswer is a whole chat completion whose content is marker.
func plainAnswer(marker string) string {
	body := `{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"` + marker +
		`"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`
	return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}

// streamedAnswer is a chunked event stream of one token, marker.
func streamedAnswer(marker string) string {
	events := `data: {"choices":[{"index":0,"delta":{"content":"` + marker + `"},"finish_reason":"stop"}]}` + "\n\n" +
		`data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}` + "\n\ndata: [DONE]\n\n"
	return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", len(events), events)
}

func answerFor(marker string, stream bool) string {
	if stream {
		return streamedAnswer(marker)
	}
	return plainAnswer(marker)
}

// echoGateway is a gateway on the HTTP implementation impl, its server
// settings changed by set, in front of a backend that answers each
// request with its marker.
func echoGateway(t *testing.T, impl string, set func(*config.Server)) *Gateway {
	t.Helper()
	cfg := upstreamConfig("m", catalog.KindOpenAI, []string{scriptedBackend(t, func(c net.Conn, marker string, stream bool) {
		io.WriteString(c, answerFor(marker, stream))
	})})
	cfg.Server.HTTP = impl
	set(&cfg.Server)
	return startConfigured(t, cfg)
}

// TestBackendCannotShiftAnswers: whatever a backend sends that no request
// asked for — an informational answer before the real one, or bytes after
// a complete answer — never becomes the answer to another request. Each
// client must get its own answer.
func TestBackendCannotShiftAnswers(t *testing.T) {
	scripts := map[string]func(c net.Conn, marker string, stream bool){
		"100 Continue, then the answer": func(c net.Conn, marker string, stream bool) {
			io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\n")
			time.Sleep(100 * time.Millisecond)
			io.WriteString(c, answerFor(marker, stream))
		},
		"103 Early Hints, then the answer": func(c net.Conn, marker string, stream bool) {
			io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n")
			time.Sleep(50 * time.Millisecond)
			io.WriteString(c, answerFor(marker, stream))
		},
		"a forged answer after the answer": func(c net.Conn, marker string, stream bool) {
			io.WriteString(c, answerFor(marker, stream)+answerFor("forged", stream))
		},
		"a forged answer a little later": func(c net.Conn, marker string, stream bool) {
			io.WriteString(c, answerFor(marker, stream))
			time.Sleep(20 * time.Millisecond)
			io.WriteString(c, answerFor("forged", stream))
		},
	}
	for _, impl := range httpImpls {
		for name, script := range scripts {
			t.Run(impl+"/"+name, func(t *testing.T) {
				t.Parallel()
				cfg := upstreamConfig("m", catalog.KindOpenAI, []string{scriptedBackend(t, script)})
				cfg.Server.HTTP = impl
				g := startConfigured(t, cfg)
				for i := range 6 {
					marker := fmt.Sprintf("request-%d", i)
					stream := i%2 == 1
					body := fmt.Sprintf(`{"model":"m","stream":%t,"messages":[{"role":"user","content":%q}]}`, stream, marker)
					resp, err := http.Post(g.URL()+"/chat/completions", "application/json", strings.NewReader(body))
					if err != nil {
						t.Fatal(err)
					}
					got, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK || !strings.Contains(string(got), `"`+marker+`"`) || strings.Contains(string(got), "forged") {
						t.Errorf("request %d (stream %t): %d %s; want its own answer", i, stream, resp.StatusCode, got)
					}
					time.Sleep(150 * time.Millisecond) // the forged bytes, sent 20 ms after the answer, arrive while the connection is idle
				}
			})
		}
	}
}

// TestSlowBodyTimesOut: a client that sends its headers and then its body
// a byte at a time is answered 408 once server.body_timeout passes, on
// every route that reads a body.
func TestSlowBodyTimesOut(t *testing.T) {
	for _, impl := range httpImpls {
		for _, path := range []string{"/v1/chat/completions", "/v1/messages", "/v1/messages/count_tokens", "/v1/responses"} {
			t.Run(impl+path, func(t *testing.T) {
				t.Parallel()
				g := echoGateway(t, impl, func(s *config.Server) { s.BodyTimeout = 300 * time.Millisecond })
				resp, b := trickledBody(t, g.apiLn.Addr().String(), "POST "+path+" HTTP/1.1\r\nHost: llmgw\r\nContent-Type: application/json\r\nAnthropic-Version: 2023-06-01\r\n")
				if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), "did not arrive in time") {
					t.Errorf("%d %s; want 408, the body did not arrive in time", resp.StatusCode, b)
				}
			})
		}
	}
}

// trickledBody sends head, a request's line and headers, to addr with a
// body said to be 1000 bytes long, then sends that body a byte every
// 100 ms, never all of it, and returns the answer, read within 3 s.
func trickledBody(t *testing.T, addr, head string) (*http.Response, []byte) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	io.WriteString(c, head+"Content-Length: 1000\r\n\r\n{")
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for range 40 {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if _, err := io.WriteString(c, " "); err != nil {
				return
			}
		}
	}()
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a body that never arrives: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// TestClientThatStopsReadingFreesTheBackend: a streaming client that stops
// reading cannot hold the gateway's write, and with it the backend's
// stream, for longer than server.idle_timeout.
func TestClientThatStopsReadingFreesTheBackend(t *testing.T) {
	for _, impl := range httpImpls {
		t.Run(impl, func(t *testing.T) {
			t.Parallel()
			freed := make(chan time.Time, 1)
			event := "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" + strings.Repeat("x", 2000) + "\"}}]}\n\n"
			backend := scriptedBackend(t, func(c net.Conn, _ string, _ bool) {
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
				for {
					c.SetWriteDeadline(time.Now().Add(20 * time.Second))
					if _, err := io.WriteString(c, event); err != nil {
						freed <- time.Now()
						c.Close()
						return
					}
				}
			})
			cfg := upstreamConfig("m", catalog.KindOpenAI, []string{backend})
			cfg.Server.HTTP = impl
			cfg.Server.IdleTimeout = 300 * time.Millisecond
			cfg.Server.KeepAlive = 0
			g := startConfigured(t, cfg)
			c, err := net.Dial("tcp", g.apiLn.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.(*net.TCPConn).SetReadBuffer(4 << 10)
			body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"talk"}]}`
			fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: llmgw\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
			start := time.Now()
			select {
			case at := <-freed:
				t.Logf("backend freed %v after the request", at.Sub(start).Round(time.Millisecond))
			case <-time.After(15 * time.Second):
				t.Fatal("the backend's stream is still held 15 s after the client stopped reading")
			}
		})
	}
}

// TestWriteDeadlineEndsWithTheAnswer: the deadline each write to a client
// is given ends with the answer, so that the client's next request on the
// same connection, sent after the deadline would have passed, is answered.
func TestWriteDeadlineEndsWithTheAnswer(t *testing.T) {
	for _, impl := range httpImpls {
		t.Run(impl, func(t *testing.T) {
			t.Parallel()
			g := echoGateway(t, impl, func(s *config.Server) { s.IdleTimeout = 200 * time.Millisecond })
			client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
			defer client.CloseIdleConnections()
			// A stream, then answers the gateway writes itself and a plain
			// one, each past the deadline the one before it was given.
			for i, stream := range []bool{true, false, true, false} {
				if i > 0 {
					time.Sleep(400 * time.Millisecond)
				}
				var reused bool
				trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused }}
				ctx := httptrace.WithClientTrace(t.Context(), trace)
				body := fmt.Sprintf(`{"model":"m","stream":%t,"messages":[{"role":"user","content":"r%d"}]}`, stream, i)
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.URL()+"/chat/completions", strings.NewReader(body))
				want := fmt.Sprintf(`"r%d"`, i)
				if i == 1 {
					req, _ = http.NewRequestWithContext(ctx, http.MethodGet, g.URL()+"/models", nil)
					want = `"id":"m"`
				}
				resp, err := client.Do(req)
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(got), want) {
					t.Errorf("request %d: %d %q %v", i, resp.StatusCode, got, err)
				}
				if i > 0 && !reused {
					t.Errorf("request %d went on a new connection; the test needs the same one", i)
				}
			}
		})
	}
}
