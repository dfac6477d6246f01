package bench

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"
)

const (
	roleChunk  = `{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`
	tokenChunk = `{"choices":[{"index":0,"delta":{"content":" hi"},"finish_reason":null}]}`
	usageChunk = `{"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":64}}}`
)

// sse writes events as data lines ending in nl.
func sse(nl string, datas ...string) string {
	var b strings.Builder
	for _, d := range datas {
		b.WriteString("data: " + d + nl + nl)
	}
	return b.String()
}

// readAll reads every event of r.
func readAll(r io.Reader) ([]Event, error) {
	er := NewEventReader(r)
	var evs []Event
	for {
		ev, err := er.Next()
		if err == io.EOF {
			return evs, nil
		}
		if err != nil {
			return evs, err
		}
		evs = append(evs, Event{Name: ev.Name, Data: bytes.Clone(ev.Data)})
	}
}

func TestEventReader(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		want  []Event
		wantE error
	}{
		{"lf", "data: a\n\ndata: b\n\n", []Event{{Data: []byte("a")}, {Data: []byte("b")}}, nil},
		{"crlf", "data: a\r\n\r\ndata: b\r\n\r\n", []Event{{Data: []byte("a")}, {Data: []byte("b")}}, nil},
		{"lone cr", "data: a\r\rdata: b\r\r", []Event{{Data: []byte("a")}, {Data: []byte("b")}}, nil},
		{"comments", ": ping\n\n: hello\ndata: a\n: mid\n\n", []Event{{Data: []byte("a")}}, nil},
		{"no space after colon", "data:a\n\n", []Event{{Data: []byte("a")}}, nil},
		{"two spaces keep one", "data:  a\n\n", []Event{{Data: []byte(" a")}}, nil},
		{"multi-line data", "data: {\"a\":\ndata: 1}\n\n", []Event{{Data: []byte("{\"a\":\n1}")}}, nil},
		{"named event", "event: error\ndata: x\n\n", []Event{{Name: "error", Data: []byte("x")}}, nil},
		{"fields without data dispatch nothing", "event: x\nid: 3\n\ndata: y\n\n", []Event{{Data: []byte("y")}}, nil},
		{"bare data field", "data\n\n", []Event{{Data: []byte{}}}, nil},
		{"empty stream", "", nil, nil},
		{"cut inside an event", "data: a\n\ndata: b", []Event{{Data: []byte("a")}}, io.ErrUnexpectedEOF},
		{"cut before the blank line", "data: a\n", nil, io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			readers := map[string]func() io.Reader{
				"whole":    func() io.Reader { return strings.NewReader(tt.in) },
				"one byte": func() io.Reader { return iotest.OneByteReader(strings.NewReader(tt.in)) },
			}
			for split := 1; split < len(tt.in); split++ {
				readers[fmt.Sprintf("split at %d", split)] = func() io.Reader {
					return io.MultiReader(iotest.HalfReader(strings.NewReader(tt.in[:split])), strings.NewReader(tt.in[split:]))
				}
			}
			for how, mk := range readers {
				got, err := readAll(mk())
				if !errors.Is(err, tt.wantE) {
					t.Errorf("%s: error %v, want %v", how, err, tt.wantE)
				}
				if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b []byte) bool { return bytes.Equal(a, b) })); diff != "" {
					t.Errorf("%s: events (-want +got):\n%s", how, diff)
				}
			}
		})
	}
}

// measured is what measureStream gives, without the timings.
type measured struct {
	Tokens, Gaps               int
	Prompt, Completion, Cached int64
	Err                        string
}

func TestMeasureStream(t *testing.T) {
	ok := measured{Tokens: 3, Gaps: 2, Prompt: 100, Completion: 3, Cached: 64}
	tests := []struct {
		name string
		in   string
		want measured
	}{
		{"lf", sse("\n", roleChunk, tokenChunk, tokenChunk, tokenChunk, usageChunk, "[DONE]"), ok},
		{"crlf", sse("\r\n", roleChunk, tokenChunk, tokenChunk, tokenChunk, usageChunk, "[DONE]"), ok},
		{"comments between", ": keepalive\n\n" + sse("\n", tokenChunk) + ": x\n\n" + sse("\n", tokenChunk, tokenChunk, usageChunk, "[DONE]"), ok},
		{"no usage", sse("\n", tokenChunk, tokenChunk, "[DONE]"), measured{Tokens: 2, Gaps: 1}},
		{"missing done", sse("\n", tokenChunk, tokenChunk, usageChunk), measured{Tokens: 2, Gaps: 1, Prompt: 100, Completion: 3, Cached: 64, Err: errNoDone.Error()}},
		{"error event", sse("\n", tokenChunk, `{"error":{"message":"backend died","type":"upstream_error","param":null,"code":null}}`, "[DONE]"),
			measured{Tokens: 1, Err: errErrorEvent.Error() + ": backend died"}},
		{"named error event", sse("\n", tokenChunk) + "event: error\ndata: {\"message\":\"boom\"}\n\n" + sse("\n", "[DONE]"),
			measured{Tokens: 1, Err: errErrorEvent.Error() + `: {"message":"boom"}`}},
		{"null error is no error", sse("\n", `{"error":null,"choices":[{"delta":{"content":"x"}}]}`, "[DONE]"), measured{Tokens: 1}},
		{"cut mid event", sse("\n", tokenChunk) + "data: {\"choi", measured{Tokens: 1, Err: "reading stream: " + io.ErrUnexpectedEOF.Error()}},
		{"events after done", sse("\n", tokenChunk, "[DONE]", tokenChunk), measured{Tokens: 1, Err: errAfterDone.Error()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var res Result
			err := measureStream(iotest.OneByteReader(strings.NewReader(tt.in)), time.Now(), &res)
			got := measured{Tokens: res.Tokens, Gaps: len(res.Gaps), Prompt: res.PromptTokens, Completion: res.CompletionTokens, Cached: res.CachedTokens}
			if err != nil {
				got.Err = err.Error()
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if res.Tokens > 0 && (res.TTFT <= 0 || res.LastToken < res.TTFT || res.E2E < res.LastToken) {
				t.Errorf("times out of order: ttft %v, last token %v, e2e %v", res.TTFT, res.LastToken, res.E2E)
			}
		})
	}
}

// pacedReader hands out one chunk per Read, waiting on a channel before
// each, so a test controls when each event arrives.
type pacedReader struct {
	chunks []string
	next   chan struct{}
}

func (p *pacedReader) Read(b []byte) (int, error) {
	if len(p.chunks) == 0 {
		return 0, io.EOF
	}
	<-p.next
	n := copy(b, p.chunks[0])
	p.chunks[0] = p.chunks[0][n:]
	if p.chunks[0] == "" {
		p.chunks = p.chunks[1:]
	}
	return n, nil
}

// TestMeasureStreamTimesEachEvent checks that each token is timed when
// its event arrives, not when the body ends: the gap recorded between
// two tokens is the pause the server made between them. Timed at the end,
// the gap would be about zero; it may fall short of the pause by however
// late the reader ran after the first event, so half the pause is the bar.
func TestMeasureStreamTimesEachEvent(t *testing.T) {
	const pause = 30 * time.Millisecond
	pr := &pacedReader{chunks: []string{sse("\n", tokenChunk), sse("\n", tokenChunk), sse("\n", "[DONE]")}, next: make(chan struct{})}
	go func() {
		pr.next <- struct{}{}
		time.Sleep(pause) // the server's pause between two tokens
		pr.next <- struct{}{}
		pr.next <- struct{}{}
	}()
	var res Result
	if err := measureStream(pr, time.Now(), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Gaps) != 1 {
		t.Fatalf("gaps %v, want one", res.Gaps)
	}
	if gap := time.Duration(float64(res.Gaps[0]) * float64(time.Second)); gap < pause/2 {
		t.Errorf("gap %v, want about the server's pause %v", gap, pause)
	}
}

func FuzzEventReader(f *testing.F) {
	f.Add("data: a\r\n\r\n: c\rdata: b\n\n", 3)
	f.Add(sse("\n", roleChunk, tokenChunk, usageChunk, "[DONE]"), 17)
	f.Fuzz(func(t *testing.T, in string, split int) {
		whole, errWhole := readAll(strings.NewReader(in))
		if len(in) == 0 {
			split = 0
		} else {
			split = int(uint(split) % uint(len(in)))
		}
		parts, errParts := readAll(io.MultiReader(strings.NewReader(in[:split]), iotest.OneByteReader(strings.NewReader(in[split:]))))
		if (errWhole == nil) != (errParts == nil) {
			t.Fatalf("whole read error %v, split read error %v", errWhole, errParts)
		}
		if !cmp.Equal(whole, parts, cmp.Comparer(func(a, b []byte) bool { return bytes.Equal(a, b) })) {
			t.Fatalf("reading whole gave %q, reading split at %d gave %q", whole, split, parts)
		}
	})
}

// BenchmarkMeasureStream is the driver's own cost per streamed event:
// framing, classifying and timing one token chunk.
func BenchmarkMeasureStream(b *testing.B) {
	const events = 200
	body := []byte(sse("\n", append(append([]string{roleChunk}, repeat(tokenChunk, events)...), usageChunk, "[DONE]")...))
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	var res Result
	for b.Loop() {
		res = Result{Gaps: res.Gaps[:0]}
		if err := measureStream(bytes.NewReader(body), time.Now(), &res); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*(events+3)), "ns/event")
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}
