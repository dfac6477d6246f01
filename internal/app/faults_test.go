package app

// A replica killed under load, through a real gateway in front of three
// simulated vLLM replicas on real sockets.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/sim"
)

// streamEnd is how a streamed answer ended, as its client read it.
type streamEnd struct {
	tokens     int    // data events before the end
	done       bool   // it ended with data: [DONE]
	errorEvent string // the data of an error event, if one came
	err        error  // the read error, if the body broke
}

// rawStream is a streamed chat request read event by event.
type rawStream struct {
	first chan struct{}  // closed at the first token's event
	end   chan streamEnd // receives the end
	stop  context.CancelFunc
}

func startStream(t *testing.T, hc *http.Client, url, body string) *rawStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &rawStream{first: make(chan struct{}), end: make(chan streamEnd, 1), stop: cancel}
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		var e streamEnd
		defer func() { s.end <- e }()
		resp, err := hc.Do(req)
		if err != nil {
			e.err = err
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			e.err = fmt.Errorf("status %d: %s", resp.StatusCode, b)
			return
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			switch {
			case !ok:
			case data == "[DONE]":
				e.done = true
			case strings.HasPrefix(data, `{"error"`):
				e.errorEvent = data
			default:
				if e.tokens++; e.tokens == 1 {
					close(s.first)
				}
			}
		}
		e.err = sc.Err()
	}()
	return s
}

// inflight is the gateway's llmgw_endpoint_inflight for the endpoint.
func inflight(t *testing.T, g *InProcess, endpoint string) float64 {
	t.Helper()
	mfs, err := g.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "llmgw_endpoint_inflight" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "endpoint" && l.GetValue() == endpoint {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}

// counterSum is the sum of a counter family's series in the gateway.
func counterSum(t *testing.T, g *InProcess, name string) float64 {
	t.Helper()
	mfs, err := g.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// within waits for ch's value, failing t after d.
func within[T any](t *testing.T, d time.Duration, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("no %s within %v", what, d)
		panic("unreachable")
	}
}

// TestKilledReplica: when a replica dies with requests in flight, every
// request it had not yet sent a byte of is retried on another replica and
// served, and every stream it had begun ends with an error event, never a
// [DONE] that would pass the part for the whole.
//
// Placement is by round_robin, so that which request is where is known:
// three requests in a row go to the three replicas.
func TestKilledReplica(t *testing.T) {
	ctx := t.Context()
	replicas, err := sim.StartReplicas(ctx, sim.Config{Model: "demo", FixedTiming: true, TTFT: 10 * time.Millisecond, TPOT: 20 * time.Millisecond}, 3, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var urls []string
	for _, r := range replicas {
		urls = append(urls, r.URL())
		t.Cleanup(r.Close)
	}
	g, err := StartGateway(ctx, GatewayOptions{Model: "demo", Upstreams: urls, Kind: catalog.KindVLLM, Policy: catalog.PolicyRoundRobin})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	// The test's clients have a transport of their own, whose idle
	// connections are closed before the gateway drains: it would give a
	// connection that never sent a request five seconds to send one.
	hc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(hc.CloseIdleConnections)
	victim := replicas[0]
	const wait = 30 * time.Second // generous: a loaded machine is slow, never this slow

	// One long stream on each replica, each past its first token: ten
	// thousand tokens at 20 ms, far longer than the test.
	var streams []*rawStream
	for range 3 {
		s := startStream(t, hc, g.URL(), `{"model":"demo","stream":true,"max_tokens":10000,"ignore_eos":true,"messages":[{"role":"user","content":"tell me a long story"}]}`)
		within(t, wait, "first token", s.first)
		streams = append(streams, s)
	}
	for _, r := range replicas {
		if n := inflight(t, g, r.Addr()); n != 1 {
			t.Fatalf("%s has %v requests in flight, want one stream on each replica", r.Addr(), n)
		}
	}

	// The victim stops sending first bytes; of three requests, one is
	// sent there and waits.
	victim.Server().SetFaults(sim.Faults{StallFirstToken: time.Hour})
	client := openai.NewClient(option.WithBaseURL(g.URL()), option.WithAPIKey("unused"), option.WithMaxRetries(0), option.WithHTTPClient(hc))
	type answer struct {
		text string
		err  error
	}
	answers := make(chan answer, 3)
	for range 3 {
		go func() {
			s := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
				Model:     "demo",
				Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello in five words.")},
				MaxTokens: openai.Int(5),
			})
			var a answer
			for s.Next() {
				if ch := s.Current(); len(ch.Choices) > 0 {
					a.text += ch.Choices[0].Delta.Content
				}
			}
			a.err = s.Err()
			answers <- a
		}()
	}
	deadline := time.Now().Add(wait)
	for inflight(t, g, victim.Addr()) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("no request reached the stalled replica")
		}
		time.Sleep(5 * time.Millisecond)
	}

	// More requests arrive as the replica dies: whether they reach it
	// before, after or while it goes, none has had a byte of it.
	var wg sync.WaitGroup
	statuses := make(chan string, 6)
	for range 6 {
		wg.Go(func() {
			resp, err := hc.Post(g.URL()+"/chat/completions", "application/json",
				strings.NewReader(`{"model":"demo","max_tokens":3,"messages":[{"role":"user","content":"hi"}]}`))
			if err != nil {
				statuses <- err.Error()
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				statuses <- fmt.Sprintf("status %d: %s", resp.StatusCode, b)
			}
		})
	}
	victim.Kill()

	for range 3 {
		if a := within(t, wait, "answer", answers); a.err != nil || a.text == "" {
			t.Errorf("a request the dead replica had sent nothing of: text %q, err %v", a.text, a.err)
		}
	}
	wg.Wait()
	close(statuses)
	for s := range statuses {
		t.Errorf("a request sent as the replica died failed: %s", s)
	}

	// Exactly one of the long streams was on the victim: it ends, with an
	// error event and no [DONE]; the others stream on.
	ended := make(chan streamEnd, len(streams))
	for _, s := range streams {
		go func() {
			select {
			case e := <-s.end:
				ended <- e
			case <-time.After(wait):
			}
		}()
	}
	e := within(t, wait, "end of the dead replica's stream", ended)
	if e.done || e.errorEvent == "" || e.tokens == 0 {
		t.Errorf("the broken stream ended after %d tokens with [DONE] %v and error event %q; want tokens, an error event and no [DONE]", e.tokens, e.done, e.errorEvent)
	}
	if !strings.Contains(e.errorEvent, `"type"`) {
		t.Errorf("the error event is not an OpenAI error: %s", e.errorEvent)
	}
	// The others were still streaming: stopped by their clients now, they
	// end with neither.
	for _, s := range streams {
		s.stop()
	}
	for range len(streams) - 1 {
		if e := within(t, wait, "end of a stopped stream", ended); e.done || e.errorEvent != "" || e.tokens == 0 {
			t.Errorf("a stream on a live replica ended by itself: %+v", e)
		}
	}

	t.Logf("retries %v, upstream errors %v", counterSum(t, g, "llmgw_retries_total"), counterSum(t, g, "llmgw_upstream_errors_total"))
	if n := counterSum(t, g, "llmgw_retries_total"); n < 1 {
		t.Errorf("llmgw_retries_total = %v: the stalled request was not retried", n)
	}
	if n := counterSum(t, g, "llmgw_upstream_errors_total"); n < 2 {
		t.Errorf("llmgw_upstream_errors_total = %v, want the broken stream and the stalled request at least", n)
	}
}
