package openai

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"gitea.mynodes.xyz/ilker/llmgw/internal/lineartest"
)

// specEvent is an event as strings, for comparing.
type specEvent struct{ Type, Data string }

// specRead is a reference reading of a whole stream after the WHATWG
// rules ("Parsing an event stream", "Interpreting an event stream"),
// written for plainness rather than speed: the events its blank lines
// dispatch, whether the stream ends inside an event (a field read since
// the last blank line, counting a last line with no line end), and the
// longest line and data buffer it holds, for a bound.
func specRead(in string) (events []specEvent, inside bool, longestLine, longestData int) {
	// The whole stream's lines, a last one without a line end included;
	// the specification reads only those that end.
	var lines []string
	rest := in
	for {
		i := strings.IndexAny(rest, "\r\n")
		if i < 0 {
			break
		}
		lines = append(lines, rest[:i])
		if strings.HasPrefix(rest[i:], "\r\n") {
			rest = rest[i+2:]
		} else {
			rest = rest[i+1:]
		}
	}
	ended := len(lines)
	if rest != "" {
		lines = append(lines, rest)
	}
	var (
		data    []string // the event's data lines
		dataLen int      // their length joined
		typ     string
	)
	for n, line := range lines {
		longestLine = max(longestLine, len(line))
		if n == 0 {
			line = strings.TrimPrefix(line, "\uFEFF")
		}
		switch {
		case line == "":
			if n < ended && data != nil {
				events = append(events, specEvent{typ, strings.Join(data, "\n")})
			}
			data, dataLen, typ, inside = nil, 0, "", false
		case line[0] == ':':
		default:
			inside = true
			name, value, found := strings.Cut(line, ":")
			if found {
				value = strings.TrimPrefix(value, " ")
			}
			switch name {
			case "data":
				if data != nil {
					dataLen++
				}
				data = append(data, value)
				dataLen += len(value)
				longestData = max(longestData, dataLen)
			case "event":
				typ = value
			}
		}
	}
	return events, inside, longestLine, longestData
}

// frame feeds in to a Framer bounded by max in the pieces split gives,
// each in a buffer of its own that is overwritten once the Framer is
// done with it, and returns the events of Next, End's and the error.
func frame(in string, split func(rest string) int, max int) (events []specEvent, last *specEvent, err error) {
	f := Framer{Max: max}
	buf := make([]byte, len(in))
	for len(in) > 0 || split == nil {
		n := len(in)
		if split != nil {
			n = split(in)
		}
		piece := buf[:copy(buf, in[:n])]
		in = in[n:]
		for {
			ev, ok, err := f.Next(&piece)
			if err != nil {
				return events, nil, err
			}
			if !ok {
				break
			}
			events = append(events, specEvent{string(ev.Type), string(ev.Data)})
		}
		if len(piece) != 0 {
			return events, nil, fmt.Errorf("Next left %q of its piece", piece)
		}
		for i := range n {
			buf[i] = 'x' // the piece is gone: the Framer must have kept what it needs
		}
		if split == nil {
			break
		}
	}
	ev, ok, err := f.End()
	if ok {
		last = &specEvent{string(ev.Type), string(ev.Data)}
	}
	return events, last, err
}

// randomSplit gives pieces of random sizes, often one byte and now and
// then many, seeded.
func randomSplit(seed uint64) func(string) int {
	r := rand.New(rand.NewPCG(seed, seed>>32))
	return func(rest string) int {
		n := 1 + r.IntN(8)
		if r.IntN(4) == 0 {
			n = 1 + r.IntN(len(rest))
		}
		return min(n, len(rest))
	}
}

// checkFramer holds the Framer to specRead on in, split by split.
func checkFramer(t *testing.T, in string, split func(string) int, max int) {
	t.Helper()
	want, inside, longestLine, longestData := specRead(in)
	got, last, err := frame(in, split, max)
	if max > 0 && (longestLine > max || longestData > max) {
		if !errors.Is(err, ErrEventTooLong) {
			t.Fatalf("%q, bound %d: error %v, want ErrEventTooLong", in, max, err)
		}
		if len(got) > len(want) || !cmp.Equal(got, want[:len(got)], cmpopts.EquateEmpty()) {
			t.Fatalf("%q, bound %d: events before the error %q, want a start of %q", in, max, got, want)
		}
		return
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("%q: events (-spec +framer):\n%s", in, diff)
	}
	// The event left at the end is the one a blank line would dispatch.
	closed, _, _, _ := specRead(in + "\n\n")
	var wantLast *specEvent
	if len(closed) > len(want) {
		wantLast = &closed[len(want)]
	}
	if diff := cmp.Diff(wantLast, last); diff != "" {
		t.Fatalf("%q: last event (-spec +framer):\n%s", in, diff)
	}
	if inside != errors.Is(err, io.ErrUnexpectedEOF) || (!inside && err != nil) {
		t.Fatalf("%q: End's error %v, want io.ErrUnexpectedEOF %v", in, err, inside)
	}
}

func TestFramer(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []specEvent
		last *specEvent // End's
		err  error      // End's
	}{
		{"lf", "data: a\n\ndata: b\n\n", []specEvent{{"", "a"}, {"", "b"}}, nil, nil},
		{"crlf", "data: a\r\n\r\ndata: b\r\n\r\n", []specEvent{{"", "a"}, {"", "b"}}, nil, nil},
		{"lone cr", "data: a\r\rdata: b\r\r", []specEvent{{"", "a"}, {"", "b"}}, nil, nil},
		{"comments", ": ping\n\n: hello\ndata: a\n: mid\n\n", []specEvent{{"", "a"}}, nil, nil},
		{"no space after colon", "data:a\n\n", []specEvent{{"", "a"}}, nil, nil},
		{"two spaces keep one", "data:  a\n\n", []specEvent{{"", " a"}}, nil, nil},
		{"multi-line data", "data: {\"a\":\ndata: 1}\n\n", []specEvent{{"", "{\"a\":\n1}"}}, nil, nil},
		{"named event", "event: error\ndata: x\n\ndata: y\n\n", []specEvent{{"error", "x"}, {"", "y"}}, nil, nil},
		{"fields without data dispatch nothing", "event: x\nid: 3\nretry: 5\n\ndata: y\n\n", []specEvent{{"", "y"}}, nil, nil},
		{"unknown fields", "foo: 1\ndata: y\nDATA: z\n\n", []specEvent{{"", "y"}}, nil, nil},
		{"bare data field", "data\n\n", []specEvent{{"", ""}}, nil, nil},
		{"byte order mark", "\uFEFFdata: a\n\n\uFEFFdata: b\n\n", []specEvent{{"", "a"}}, nil, nil},
		{"empty stream", "", nil, nil, nil},
		{"only a comment, cut", ": ping", nil, nil, nil},
		{"cut before the blank line", "data: a\n", nil, &specEvent{"", "a"}, io.ErrUnexpectedEOF},
		{"cut inside the last line", "data: a\n\ndata: b", []specEvent{{"", "a"}}, &specEvent{"", "b"}, io.ErrUnexpectedEOF},
		{"cut after a type", "data: a\n\nevent: x\n", []specEvent{{"", "a"}}, nil, io.ErrUnexpectedEOF},
		{"cut inside multi-line data", "event: e\ndata: a\ndata: b", nil, &specEvent{"e", "a\nb"}, io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			splits := map[string]func(string) int{
				"whole":    nil,
				"one byte": func(string) int { return 1 },
			}
			for at := 1; at < len(tt.in); at++ {
				first := true
				splits[fmt.Sprintf("split at %d", at)] = func(rest string) int {
					if first {
						first = false
						return at
					}
					return len(rest)
				}
			}
			for how, split := range splits {
				got, last, err := frame(tt.in, split, 0)
				if !errors.Is(err, tt.err) || (tt.err == nil && err != nil) {
					t.Errorf("%s: error %v, want %v", how, err, tt.err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("%s: events (-want +got):\n%s", how, diff)
				}
				if diff := cmp.Diff(tt.last, last); diff != "" {
					t.Errorf("%s: last event (-want +got):\n%s", how, diff)
				}
			}
			checkFramer(t, tt.in, nil, 0)
			checkFramer(t, tt.in, func(string) int { return 1 }, 0)
		})
	}
}

// An event is returned as soon as its blank line is read: the rest of
// the piece stays for the next call, and nothing waits for more bytes.
func TestFramerReturnsEachEventAtItsBlankLine(t *testing.T) {
	var f Framer
	piece := []byte("data: a\n\ndata: b\n\ndata: c")
	for _, want := range []string{"a", "b"} {
		ev, ok, err := f.Next(&piece)
		if !ok || err != nil || string(ev.Data) != want {
			t.Fatalf("Next gave %q, %v, %v; want %q", ev.Data, ok, err, want)
		}
	}
	if string(piece) != "data: c" {
		t.Fatalf("after two events the piece holds %q", piece)
	}
	if _, ok, err := f.Next(&piece); ok || err != nil || len(piece) != 0 {
		t.Fatalf("an event without its blank line was returned (%v, %v)", ok, err)
	}
	piece = []byte("\n\n")
	if ev, ok, _ := f.Next(&piece); !ok || string(ev.Data) != "c" {
		t.Fatalf("the event's end in the next piece gave %q, %v", ev.Data, ok)
	}
}

// Events that lie whole in a piece, as a backend writes them, cost no
// allocation: their data is handed on from the piece.
func TestFramerAllocations(t *testing.T) {
	stream := []byte(strings.Repeat("data: {\"choices\":[{\"delta\":{\"content\":\" token\"}}]}\n\n", 4) +
		"event: content_block_delta\ndata: {}\n\n: comment\r\n\r\n")
	f := Framer{Max: 1 << 20} // one stream, its events read over and over
	if n := testing.AllocsPerRun(100, func() {
		piece := stream
		for {
			_, ok, err := f.Next(&piece)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
		}
	}); n != 0 {
		t.Errorf("%v allocations a stream, want 0", n)
	}
}

// A line or an event's data past Max fails the stream, after the
// events before it, however the stream is split.
func TestFramerMax(t *testing.T) {
	for _, in := range []string{
		"data: a\n\ndata: " + strings.Repeat("x", 20) + "\n\n",
		"data: a\n\ndata: " + strings.Repeat("x", 20),
		"data: a\n\n: " + strings.Repeat("x", 20) + "\n",
		"data: a\n\n" + strings.Repeat("data: xxxx\n", 4) + "\n",
	} {
		for seed := range uint64(20) {
			checkFramer(t, in, randomSplit(seed), 16)
		}
		if _, _, err := frame(in, randomSplit(1), 16); !errors.Is(err, ErrEventTooLong) {
			t.Errorf("%q: error %v, want ErrEventTooLong", in, err)
		}
	}
}

// A long line, an event of many data lines, or many comments, fed in
// pieces of 16 bytes, take time and memory in proportion to their length.
// A long line's items are 64 bytes, so that both runs' lines outgrow the
// caches: a line that fits in them is read faster than one that does not.
func TestFramerGrowsLinearly(t *testing.T) {
	for _, tc := range []struct {
		name, head, item, tail string
		piece                  int // bytes a piece; 0: the whole stream in one
	}{
		{"line", "data: ", strings.Repeat("x", 64), "\n\n", 16},
		{"data lines", "", "data: x\n", "\n", 16},
		{"comments", "data: x\n", ": c\n", "\n", 16},
		// One piece: each line's end is looked for from where the last
		// one ended, never from the piece's start, whichever end it is.
		{"LF lines, one piece", "", "data: x\n", "\n", 0},
		{"CR lines, one piece", "", "data: x\r", "\r", 0},
		{"CRLF lines, one piece", "", "data: x\r\n", "\r\n", 0},
		{"CR lines, then an LF, one piece", "", "data: x\r", "\r\n", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lineartest.Linear(t, 256, func(t testing.TB, n int) func() {
				in := []byte(tc.head + strings.Repeat(tc.item, n) + tc.tail)
				size := tc.piece
				if size == 0 {
					size = len(in)
				}
				return func() {
					f := Framer{Max: len(in)}
					events := 0
					for p := in; len(p) > 0; {
						piece := p[:min(size, len(p))]
						p = p[len(piece):]
						for {
							_, ok, err := f.Next(&piece)
							if err != nil {
								t.Fatal(err)
							}
							if !ok {
								break
							}
							events++
						}
					}
					if events != 1 {
						t.Fatalf("%d events, want 1", events)
					}
				}
			})
		})
	}
}

// FuzzFramerMatchesSpec holds the Framer, fed a stream in random pieces,
// to the reference reading of the specification: the same events, the
// same last event and error at the end, and the bound kept.
func FuzzFramerMatchesSpec(f *testing.F) {
	f.Add([]byte("data: a\r\n\r\n: c\rdata: b\n\n"), uint64(3), uint8(0))
	f.Add([]byte("event: e\ndata: {\"a\":\ndata: 1}\r\rdata: [DONE]\n\n"), uint64(17), uint8(0))
	f.Add([]byte("\uFEFFdata\n\ndata:x\r\n\rid: 1\nretry: 2\nevent: e\nfoo\n:\n\n"), uint64(5), uint8(0))
	f.Add([]byte("data: aaaaaaaa\ndata: bbbbbbbb\n\ndata: cut"), uint64(9), uint8(12))
	f.Fuzz(func(t *testing.T, in []byte, seed uint64, max uint8) {
		checkFramer(t, string(in), randomSplit(seed), int(max))
	})
}

// BenchmarkFramer is the cost of framing one token's event, as a backend
// writes it, in pieces of 1 KiB.
func BenchmarkFramer(b *testing.B) {
	const events = 200
	stream := []byte(strings.Repeat(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" token"},"logprobs":null,"finish_reason":null}]}`+"\n\n", events))
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	var n int
	for b.Loop() {
		f := Framer{Max: 4 << 20}
		for p := stream; len(p) > 0; {
			piece := p[:min(1<<10, len(p))]
			p = p[len(piece):]
			for {
				ev, ok, _ := f.Next(&piece)
				if !ok {
					break
				}
				n += len(ev.Data)
			}
		}
	}
	if n == 0 {
		b.Fatal("no events")
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*events), "ns/event")
}
