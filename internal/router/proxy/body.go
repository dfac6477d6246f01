package proxy

// Reading an upstream answer's body with no buffer held while it waits. A
// stream spends nearly all of its life waiting for its next token, and a
// gateway holds thousands of them: a read buffer is taken from a pool when
// the connection has something to read, and given back once all of it has
// been consumed. The body is decoded in place in that buffer — by length,
// in chunks, or to the connection's close — and handed out a piece at a
// time, without a copy.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"syscall"
)

// inBufSize is the read buffer of a connection with something to read. An
// event of one token is 150-400 bytes, and a few arrive together at most;
// a longer one is read in pieces.
const inBufSize = 2 << 10

var inBufs = sync.Pool{New: func() any { b := make([]byte, inBufSize); return &b }}

// inbuf is what has been read from a connection and not yet consumed.
type inbuf struct {
	conn net.Conn
	raw  syscall.RawConn // nil when conn has no file descriptor: reads then wait with a buffer held
	buf  *[]byte         // nil while empty
	r, w int             // the unconsumed bytes are (*buf)[r:w]

	// The read raw makes when the connection has something to read, and
	// what it got: made once, as a method value is an allocation.
	readFD func(fd uintptr) bool
	n      int
	err    error
}

// init readies in to read conn; in must not move after.
func (in *inbuf) init(conn net.Conn) {
	in.conn = conn
	if sc, ok := conn.(syscall.Conn); ok {
		in.raw, _ = sc.SyscallConn()
		in.readFD = in.read
	}
}

func (in *inbuf) buffered() []byte {
	if in.buf == nil {
		return nil
	}
	return (*in.buf)[in.r:in.w]
}

func (in *inbuf) consume(n int) {
	in.r += n
	if in.r == in.w {
		in.release()
	}
}

// release gives the buffer back; what it held is dropped.
func (in *inbuf) release() {
	if in.buf != nil {
		if cap(*in.buf) == inBufSize { // not one grown for a long line
			inBufs.Put(in.buf)
		}
		in.buf, in.r, in.w = nil, 0, 0
	}
}

// unread puts b back before what in holds: what a bufio.Reader that read
// an answer's head through in had read past it.
func (in *inbuf) unread(b []byte) {
	if len(b) == 0 {
		return
	}
	rest := in.buffered()
	var nb *[]byte
	if len(b)+len(rest) > inBufSize {
		g := make([]byte, len(b)+len(rest))
		nb = &g
	} else {
		nb = inBufs.Get().(*[]byte)
	}
	n := copy(*nb, b)
	n += copy((*nb)[n:], rest)
	in.release()
	in.buf, in.r, in.w = nb, 0, n
}

// Read reads what in holds, then the connection: for the bufio.Reader an
// answer's head is parsed with.
func (in *inbuf) Read(p []byte) (int, error) {
	if b := in.buffered(); len(b) > 0 {
		n := copy(p, b)
		in.consume(n)
		return n, nil
	}
	return in.conn.Read(p)
}

// fill reads more from the connection, waiting until it has some. With
// nothing held, it waits without a buffer and takes one only once there
// is something to read into it.
func (in *inbuf) fill() error {
	if in.r == in.w {
		in.release()
	}
	if in.buf == nil && in.raw != nil {
		return in.readWhenReady()
	}
	if in.buf == nil {
		in.buf = inBufs.Get().(*[]byte)
	}
	b := *in.buf
	if in.r > 0 {
		in.w = copy(b, b[in.r:in.w])
		in.r = 0
	}
	if in.w == len(b) {
		// A line longer than the buffer: grow it for this one.
		g := make([]byte, 2*len(b))
		copy(g, b[:in.w])
		in.release()
		in.buf, in.w = &g, len(b)
		b = g
	}
	n, err := in.conn.Read(b[in.w:])
	in.w += n
	if n > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

func (in *inbuf) readWhenReady() error {
	err := in.raw.Read(in.readFD)
	switch {
	case err != nil:
		// A deadline, or the connection closed.
	case in.err != nil:
		err = &net.OpError{Op: "read", Net: "tcp", Err: in.err}
	case in.n == 0:
		err = io.EOF
	}
	if err != nil {
		in.release()
		return err
	}
	in.r, in.w = 0, in.n
	return nil
}

// read reads fd into a buffer it takes for the purpose, and reports false
// to wait when fd has nothing to read yet.
func (in *inbuf) read(fd uintptr) bool {
	in.buf = inBufs.Get().(*[]byte)
	for {
		in.n, in.err = syscall.Read(int(fd), *in.buf)
		if in.err != syscall.EINTR {
			break
		}
	}
	if in.err == syscall.EAGAIN {
		in.release()
		return false
	}
	return true
}

// line returns the next line, without its line end, once it is all read.
func (in *inbuf) line() ([]byte, error) {
	for {
		b := in.buffered()
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line := b[:i]
			in.r += i + 1 // consumed; the caller uses line before the next fill
			if len(line) > 0 && line[len(line)-1] == '\r' {
				line = line[:len(line)-1]
			}
			return line, nil
		}
		if len(b) >= maxFramingLine {
			return nil, errFraming
		}
		if err := in.fill(); err != nil {
			return nil, err
		}
	}
}

// maxFramingLine bounds a chunk's size line and a trailer line.
const maxFramingLine = 4 << 10

var errFraming = errors.New("proxy: malformed chunked encoding")

// errWouldWait is what body.next says, asked not to wait, when the next
// piece is not yet read.
var errWouldWait = errors.New("the next piece is not yet read")

// How a body's end is known.
const (
	byLength = iota
	byChunks
	byClose
)

// Where a chunked body's decoding is.
const (
	chunkSize    = iota // before a chunk's size line
	chunkData           // in a chunk's data
	chunkEnd            // before the line end after a chunk's data
	chunkTrailer        // after the last chunk, before the trailer's end
)

// body decodes an answer's body from its connection's inbuf.
type body struct {
	in      *inbuf
	framing int
	remain  int64 // bytes left: of the body by length, of the chunk in chunks
	state   int   // in chunks
	done    bool
}

// next returns the body's next piece, of at most max bytes, valid until
// the following call; io.EOF at the end. Without wait it returns
// errWouldWait rather than wait for the connection.
func (b *body) next(max int, wait bool) ([]byte, error) {
	if b.in.r == b.in.w {
		b.in.release() // the piece before, now used, was its last
	}
	for !b.done {
		if b.framing == byChunks && b.state != chunkData {
			if !wait && !b.lineReady() {
				return nil, errWouldWait
			}
			if err := b.framingLine(); err != nil {
				return nil, err
			}
			if b.in.r == b.in.w {
				b.in.release()
			}
			continue
		}
		if b.framing == byLength && b.remain == 0 {
			b.done = true
			break
		}
		have := b.in.buffered()
		if len(have) == 0 {
			if !wait {
				return nil, errWouldWait
			}
			if err := b.in.fill(); err != nil {
				if errors.Is(err, io.EOF) && b.framing == byClose {
					b.done = true
					break
				}
				return nil, unexpected(err)
			}
			continue
		}
		n := min(len(have), max)
		if b.framing != byClose {
			n = int(min(int64(n), b.remain))
			if b.remain -= int64(n); b.remain == 0 && b.framing == byChunks {
				b.state = chunkEnd
			}
		}
		b.in.r += n // the buffer goes back with the next fill, once the piece is used
		return have[:n], nil
	}
	b.in.release()
	return nil, io.EOF
}

// complete reports whether the whole body is read.
func (b *body) complete() bool {
	return b.done || b.framing == byLength && b.remain == 0
}

// lineReady reports whether a whole line is read.
func (b *body) lineReady() bool {
	return bytes.IndexByte(b.in.buffered(), '\n') >= 0
}

// framingLine reads one line of a chunked body's framing: a chunk's size,
// the line end after its data, or a line of the trailer.
func (b *body) framingLine() error {
	line, err := b.in.line()
	if err != nil {
		return unexpected(err)
	}
	switch b.state {
	case chunkEnd:
		if len(line) != 0 {
			return fmt.Errorf("%w: %q after a chunk's data", errFraming, line)
		}
		b.state = chunkSize
	case chunkTrailer:
		b.done = len(line) == 0
	case chunkSize:
		if i := bytes.IndexByte(line, ';'); i >= 0 {
			line = line[:i] // a chunk extension, which means nothing here
		}
		size, err := strconv.ParseInt(string(bytes.Trim(line, " \t")), 16, 64)
		if err != nil || size < 0 {
			return fmt.Errorf("%w: size %q", errFraming, line)
		}
		if size == 0 {
			b.state = chunkTrailer
		} else {
			b.remain, b.state = size, chunkData
		}
	}
	return nil
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
