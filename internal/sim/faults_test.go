package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestErrorRateFault(t *testing.T) {
	tests := []struct {
		faults Faults
		want   map[int]int // status: how many of 30
	}{
		{Faults{}, map[int]int{200: 30}},
		{Faults{ErrorRate: 1, ErrorStatus: 429}, map[int]int{429: 30}},
		{Faults{ErrorRate: 1, ErrorStatus: 500}, map[int]int{500: 30}},
		{Faults{ErrorRate: 1, ErrorStatus: 503}, map[int]int{503: 30}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.faults.ErrorStatus), func(t *testing.T) {
			_, ts := newTestServer(t, Config{FixedTiming: true, Faults: tt.faults})
			got := map[int]int{}
			for range 30 {
				resp := post(t, t.Context(), ts.URL+"/v1/chat/completions", chatBody("x", map[string]any{"max_tokens": 2}))
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				got[resp.StatusCode]++
				if resp.StatusCode != 200 {
					var e struct {
						Error struct{ Message, Type string } `json:"error"`
					}
					if err := json.Unmarshal(b, &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
						t.Errorf("status %d body %s is not an OpenAI error", resp.StatusCode, b)
					}
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("statuses (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("half, any status", func(t *testing.T) {
		_, ts := newTestServer(t, Config{FixedTiming: true, Faults: Faults{ErrorRate: 0.5}})
		got := map[int]int{}
		for range 200 {
			resp := post(t, t.Context(), ts.URL+"/v1/completions", map[string]any{"prompt": "x", "max_tokens": 1})
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			got[resp.StatusCode]++
		}
		// 100 failures expected, a third of each status: allow wide margins.
		if got[200] < 60 || got[200] > 140 || got[429] < 15 || got[500] < 15 || got[503] < 15 || len(got) != 4 {
			t.Errorf("statuses %v; want about 100 OK and the rest split among 429, 500, 503", got)
		}
	})
}

func TestDieMidStream(t *testing.T) {
	_, ts := newTestServer(t, Config{FixedTiming: true, Faults: Faults{DieAfterTokens: 7}})
	resp := post(t, t.Context(), ts.URL+"/v1/chat/completions", chatBody("x", map[string]any{"stream": true, "max_tokens": 50, "ignore_eos": true}))
	st := readStream(t, resp.Body)
	resp.Body.Close()
	if st.done || st.err == nil || !errors.Is(st.err, io.ErrUnexpectedEOF) {
		t.Errorf("stream ended with [DONE] %v, error %v; want no [DONE] and an unexpected EOF", st.done, st.err)
	}
	if len(st.chunks) != 7 {
		t.Errorf("%d chunks before the cut, want 7", len(st.chunks))
	}

	// Unstreamed, the connection is cut before any answer.
	req, _ := http.NewRequestWithContext(t.Context(), "POST", ts.URL+"/v1/chat/completions",
		bytes.NewReader([]byte(`{"messages":[{"role":"user","content":"x"}],"max_tokens":50,"ignore_eos":true}`)))
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("unstreamed request answered %d, want a cut connection", resp.StatusCode)
	}

	// An answer shorter than the limit is not cut.
	resp = post(t, t.Context(), ts.URL+"/v1/chat/completions", chatBody("x", map[string]any{"stream": true, "max_tokens": 5, "ignore_eos": true}))
	st = readStream(t, resp.Body)
	resp.Body.Close()
	if !st.done || st.err != nil {
		t.Errorf("5-token answer: [DONE] %v, error %v", st.done, st.err)
	}
}

func TestStallFault(t *testing.T) {
	const stall = 150 * time.Millisecond
	_, ts := newTestServer(t, Config{FixedTiming: true, Faults: Faults{StallFirstToken: stall}})
	t0 := time.Now()
	resp := post(t, t.Context(), ts.URL+"/v1/chat/completions", chatBody("x", map[string]any{"stream": true, "max_tokens": 3}))
	headers := time.Since(t0)
	st := readStream(t, resp.Body)
	resp.Body.Close()
	if headers < stall {
		t.Errorf("headers after %v, want at least the %v stall", headers, stall)
	}
	if !st.done {
		t.Error("stalled stream did not complete")
	}
}

func TestRefuseFault(t *testing.T) {
	r, err := Start(t.Context(), fast, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	client := &http.Client{Transport: &http.Transport{}}
	get := func() error {
		resp, err := client.Get(r.URL() + "/models")
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get(); err != nil {
		t.Fatalf("before the fault: %v", err)
	}
	r.Server().SetFaults(Faults{Refuse: true})
	// The open keep-alive connection is cut; a new one is refused.
	if err := get(); err == nil {
		t.Error("request on an open connection served while refusing")
	}
	if c, err := net.Dial("tcp", r.Addr()); err == nil {
		c.Close()
		t.Error("connection accepted while refusing")
	}
	r.Server().SetFaults(Faults{})
	if err := get(); err != nil {
		t.Errorf("after the fault: %v (listen error %v)", err, r.ListenErr())
	}
}

func TestRefuseForEndsByItself(t *testing.T) {
	s := New(fast)
	defer s.Close()
	changes := make(chan bool, 4)
	s.setOnRefuse(func(refuse bool) { changes <- refuse })
	if <-changes {
		t.Fatal("refusing from the start")
	}
	t0 := time.Now()
	s.SetFaults(Faults{Refuse: true, RefuseFor: 50 * time.Millisecond, Slow: 2})
	if !<-changes {
		t.Fatal("first change is not to refuse")
	}
	if <-changes {
		t.Fatal("second change is not to accept")
	}
	if d := time.Since(t0); d < 50*time.Millisecond {
		t.Errorf("refusal ended after %v, before refuse_for", d)
	}
	if diff := cmp.Diff(Faults{Slow: 2}, s.Faults()); diff != "" {
		t.Errorf("faults after refuse_for (-want +got):\n%s", diff)
	}
}

func TestFaultsAdmin(t *testing.T) {
	s, ts := newTestServer(t, fast)
	body := `{"error_rate":0.25,"error_status":503,"die_after_tokens":3,"stall_first_token":"1.5s","slow":2}`
	resp, err := http.Post(ts.URL+"/sim/faults", "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	got := decode[Faults](t, resp, 200)
	want := Faults{ErrorRate: 0.25, ErrorStatus: 503, DieAfterTokens: 3, StallFirstToken: 1500 * time.Millisecond, Slow: 2}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("POST answer (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, s.Faults()); diff != "" {
		t.Errorf("faults in force (-want +got):\n%s", diff)
	}
	resp, err = http.Get(ts.URL + "/sim/faults")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, decode[Faults](t, resp, 200)); diff != "" {
		t.Errorf("GET (-want +got):\n%s", diff)
	}
	resp, err = http.Post(ts.URL+"/sim/faults", "application/json", bytes.NewReader([]byte(`{}`)))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Faults{}, decode[Faults](t, resp, 200)); diff != "" {
		t.Errorf("cleared (-want +got):\n%s", diff)
	}
}
