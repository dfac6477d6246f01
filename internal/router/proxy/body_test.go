package proxy

import (
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// tcpPair is a loopback TCP connection: the test writes to up, the
// upstream side, and reads from down through an inbuf.
func tcpPair(t testing.TB) (up net.Conn, down *inbuf) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	d, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	up = <-accepted
	if up == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { up.Close(); d.Close() })
	d.SetDeadline(time.Now().Add(10 * time.Second))
	down = new(inbuf)
	down.init(d)
	return up, down
}

// readAll reads b to its end, a piece at a time, pieces of at most max.
func readAll(b *body, max int) (string, error) {
	var got strings.Builder
	for {
		piece, err := b.next(max, true)
		got.Write(piece)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return got.String(), err
		}
	}
}

func TestBodyFramings(t *testing.T) {
	long := strings.Repeat("x", maxChunkLine)
	for _, tt := range []struct {
		name    string
		framing int
		length  int64
		raw     string // what the upstream sends after the head
		want    string
		err     error  // nil: the body ends cleanly
		rest    string // what is left unread after a clean end
	}{
		{"length", byLength, 11, "hello world", "hello world", nil, ""},
		{"length, empty", byLength, 0, "", "", nil, ""},
		{"length, cut short", byLength, 11, "hello", "hello", io.ErrUnexpectedEOF, ""},
		{"length, bytes after it", byLength, 5, "helloHTTP/1.1", "hello", nil, "HTTP/1.1"},
		{"chunks", byChunks, -1, "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", "hello world", nil, ""},
		{"chunks, upper-case size and an extension", byChunks, -1, "B;name=value\r\nhello world\r\n0\r\n\r\n", "hello world", nil, ""},
		{"chunks, spaces after the size", byChunks, -1, "5 \t\r\nhello\r\n0\r\n\r\n", "hello", nil, ""},
		{"chunks, 16 digits", byChunks, -1, "0000000000000005\r\nhello\r\n0\r\n\r\n", "hello", nil, ""},
		{"chunks, a trailer", byChunks, -1, "5\r\nhello\r\n0\r\nX-Trailer: 1\r\nX-Other:\t a b \r\n\r\n", "hello", nil, ""},
		{"chunks, bytes after the end", byChunks, -1, "5\r\nhello\r\n0\r\n\r\nHTTP/1.1 200", "hello", nil, "HTTP/1.1 200"},
		{"chunks, bare LF after a size", byChunks, -1, "5\nhello\r\n0\r\n\r\n", "", errFraming, ""},
		{"chunks, bare LF after data", byChunks, -1, "5\r\nhello\n0\r\n\r\n", "hello", errFraming, ""},
		{"chunks, bare LF ending the trailer", byChunks, -1, "5\r\nhello\r\n0\r\n\n", "hello", errFraming, ""},
		{"chunks, bare LF in the trailer", byChunks, -1, "5\r\nhello\r\n0\r\nX: 1\n\r\n", "hello", errFraming, ""},
		{"chunks, CR inside a size line", byChunks, -1, "5\r;x\r\nhello\r\n0\r\n\r\n", "", errFraming, ""},
		{"chunks, cut mid-chunk", byChunks, -1, "a\r\nhello", "hello", io.ErrUnexpectedEOF, ""},
		{"chunks, cut before the last", byChunks, -1, "5\r\nhello\r\n", "hello", io.ErrUnexpectedEOF, ""},
		{"chunks, cut in the trailer", byChunks, -1, "5\r\nhello\r\n0\r\nX: 1\r\n", "hello", io.ErrUnexpectedEOF, ""},
		{"chunks, bad size", byChunks, -1, "zz\r\nhello\r\n", "", errFraming, ""},
		{"chunks, plus sign", byChunks, -1, "+5\r\nhello\r\n0\r\n\r\n", "", errFraming, ""},
		{"chunks, minus zero", byChunks, -1, "-0\r\n\r\n", "", errFraming, ""},
		{"chunks, 0x", byChunks, -1, "0x5\r\nhello\r\n0\r\n\r\n", "", errFraming, ""},
		{"chunks, space before the size", byChunks, -1, " 5\r\nhello\r\n0\r\n\r\n", "", errFraming, ""},
		{"chunks, space before an extension", byChunks, -1, "5 ;x\r\nhello\r\n0\r\n\r\n", "", errFraming, ""},
		{"chunks, empty size", byChunks, -1, ";x\r\nhello\r\n0\r\n\r\n", "", errFraming, ""},
		{"chunks, 17 digits", byChunks, -1, "00000000000000005\r\nhello\r\n0\r\n\r\n", "", errFraming, ""},
		{"chunks, over the largest length", byChunks, -1, "8000000000000000\r\nhello", "", errFraming, ""},
		{"chunks, a size line too long", byChunks, -1, "5;" + long + "\r\nhello\r\n0\r\n\r\n", "", errFraming, ""},
		{"chunks, too much extension for the data", byChunks, -1, strings.Repeat("1;"+long[:1000]+"\r\nx\r\n", 20) + "0\r\n\r\n", strings.Repeat("x", 16), errFraming, ""},
		{"chunks, data longer than its size", byChunks, -1, "3\r\nhello\r\n0\r\n\r\n", "hel", errFraming, ""},
		{"chunks, a CR alone after data", byChunks, -1, "3\r\nhel\rlo", "hel", errFraming, ""},
		{"chunks, a trailer line with no colon", byChunks, -1, "5\r\nhello\r\n0\r\nX-Trailer\r\n\r\n", "hello", errTrailer, ""},
		{"chunks, a trailer name with a space", byChunks, -1, "5\r\nhello\r\n0\r\nX Trailer: 1\r\n\r\n", "hello", errTrailer, ""},
		{"chunks, a trailer value with a control byte", byChunks, -1, "5\r\nhello\r\n0\r\nX: a\x01\r\n\r\n", "hello", errTrailer, ""},
		{"chunks, a folded trailer line", byChunks, -1, "5\r\nhello\r\n0\r\nX: a\r\n b\r\n\r\n", "hello", errTrailer, ""},
		{"chunks, a trailer too long", byChunks, -1, "5\r\nhello\r\n0\r\n" + strings.Repeat("X: "+long[:100]+"\r\n", 20) + "\r\n", "hello", errFraming, ""},
		{"to the close", byClose, -1, "hello world", "hello world", nil, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// Every split of what is sent into two writes decodes alike;
			// of a long one, a few.
			splits := make([]int, 0, len(tt.raw)+1)
			for split := 0; split <= len(tt.raw); split++ {
				if len(tt.raw) <= 64 || split < 8 || len(tt.raw)-split < 8 || split%509 == 0 {
					splits = append(splits, split)
				}
			}
			for _, split := range splits {
				up, down := tcpPair(t)
				go func() {
					io.WriteString(up, tt.raw[:split])
					time.Sleep(time.Millisecond) // most often, two reads
					io.WriteString(up, tt.raw[split:])
					up.Close()
				}()
				b := &body{in: down, framing: tt.framing, remain: tt.length}
				got, err := readAll(b, 4)
				if got != tt.want || !errors.Is(err, tt.err) {
					t.Fatalf("split at %d: %q, %v; want %q, %v", split, got, err, tt.want, tt.err)
				}
				if tt.err != nil {
					continue
				}
				// What follows the end is not dropped: the connection's
				// owner must see it to know the connection is not for reuse.
				time.Sleep(2 * time.Millisecond)
				rest := string(down.buffered())
				for len(rest) < len(tt.rest) && down.fill() == nil {
					rest = string(down.buffered())
				}
				if rest != tt.rest {
					t.Fatalf("split at %d: %q left after the end, want %q", split, rest, tt.rest)
				}
				if tt.rest == "" && down.buf != nil {
					t.Fatalf("split at %d: a buffer is held after the end", split)
				}
			}
		})
	}
}

// Asked not to wait, a body says so when its next piece is not in, though
// part of the framing before it is; and between pieces it holds no buffer.
func TestBodyWouldWait(t *testing.T) {
	up, down := tcpPair(t)
	b := &body{in: down, framing: byChunks, remain: -1}
	io.WriteString(up, "5\r\nhello")
	if piece, err := b.next(100, true); string(piece) != "hello" || err != nil {
		t.Fatalf("first piece: %q, %v", piece, err)
	}
	io.WriteString(up, "\r")
	time.Sleep(10 * time.Millisecond)
	for range 2 {
		if piece, err := b.next(100, false); !errors.Is(err, errWouldWait) {
			t.Fatalf("with the next chunk not in: %q, %v; want errWouldWait", piece, err)
		}
	}
	io.WriteString(up, "\n5\r\nworld\r\n")
	if piece, err := b.next(100, true); string(piece) != "world" || err != nil {
		t.Fatalf("second piece: %q, %v", piece, err)
	}
	if piece, err := b.next(100, false); !errors.Is(err, errWouldWait) {
		t.Fatalf("after the second piece: %q, %v; want errWouldWait", piece, err)
	}

	// Waiting for the next piece, the connection holds no buffer.
	done := make(chan string)
	go func() {
		piece, _ := b.next(100, true)
		done <- string(piece)
	}()
	time.Sleep(10 * time.Millisecond)
	io.WriteString(up, "1\r\n!\r\n")
	if got := <-done; got != "!" {
		t.Fatalf("third piece: %q", got)
	}
	if _, err := b.next(100, false); !errors.Is(err, errWouldWait) {
		t.Fatal("no errWouldWait after the third piece")
	}
	if down.buf != nil {
		t.Error("an inbuf with nothing in it holds a buffer")
	}
}

// A head read past its end leaves what followed it to the body, in order
// before what the connection has yet to give.
func TestInbufUnread(t *testing.T) {
	up, down := tcpPair(t)
	io.WriteString(up, " world")
	up.Close()
	if err := down.fill(); err != nil {
		t.Fatal(err)
	}
	down.unread([]byte("hello"))
	got, err := readAll(&body{in: down, framing: byClose}, 3)
	if got != "hello world" || err != nil {
		t.Fatalf("%q, %v", got, err)
	}
}

// idleConn is an upstream connection over down's.
func idleConn(down *inbuf) *h1Conn {
	c := &h1Conn{Conn: down.conn}
	c.in.init(down.conn)
	return c
}

// An idle upstream connection is alive while a read would wait, and not
// once the server has closed it or sent what no request asked for.
func TestConnAlive(t *testing.T) {
	up, down := tcpPair(t)
	c := idleConn(down)
	if !c.alive() {
		t.Fatal("an open connection is not alive")
	}
	if !c.alive() {
		t.Fatal("a check changed what the next finds")
	}
	io.WriteString(up, "HTTP/1.1 200 OK\r\n")
	time.Sleep(10 * time.Millisecond)
	if c.alive() {
		t.Error("a connection with unasked-for bytes is alive")
	}

	up, down = tcpPair(t)
	c = idleConn(down)
	up.Close()
	time.Sleep(10 * time.Millisecond)
	if c.alive() {
		t.Error("a connection the server closed is alive")
	}
}
