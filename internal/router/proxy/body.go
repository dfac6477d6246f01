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
	"math"
	"net"
	"sync"
	"syscall"

	"golang.org/x/net/http/httpguts"
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

	// The read raw makes when the connection has something to read, the
	// look quiet takes, and what they got: made once, as a method value
	// is an allocation.
	readFD      func(fd uintptr) bool
	peekFD      func(fd uintptr) bool
	writeReadFD func(fd uintptr) bool
	n           int
	err         error
	peeked      [1]byte
	out         []byte // what writeRead is to write; nil but during writeThenFill
	look        bool   // writeRead is to look at the connection before it writes
	werr        error  // what writeRead's write failed with
}

// init readies in to read conn; in must not move after.
func (in *inbuf) init(conn net.Conn) {
	in.conn = conn
	if sc, ok := conn.(syscall.Conn); ok {
		in.raw, _ = sc.SyscallConn()
		in.readFD = in.read
		in.peekFD = in.peek
		in.writeReadFD = in.writeRead
	}
}

// quiet reports whether the connection is open with nothing to read: a
// read would wait. One that finds the end, an error, or bytes no request
// asked for is not. It reads nothing, and costs one system call.
func (in *inbuf) quiet() bool {
	if len(in.buffered()) > 0 {
		return false
	}
	if in.raw == nil {
		return true // no way to look; the first read will tell
	}
	if err := in.raw.Read(in.peekFD); err != nil {
		return false
	}
	return in.err == syscall.EAGAIN
}

func (in *inbuf) peek(fd uintptr) bool {
	for {
		_, _, in.err = syscall.Recvfrom(int(fd), in.peeked[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		if in.err != syscall.EINTR {
			return true
		}
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
	return in.settle(in.raw.Read(in.readFD))
}

// settle is what a wait for the connection to read, err its error, left
// in: the bytes read, or why none were.
func (in *inbuf) settle(err error) error {
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

// crlfLine returns the next line, without its CRLF, once it is all read.
// A line that ends in a bare LF, holds a CR before its end, or runs past
// max bytes with its CRLF is malformed: net/http's reading of chunked
// framing, which refuses a bare LF since CVE-2025-22871.
func (in *inbuf) crlfLine(max int) ([]byte, error) {
	for {
		b := in.buffered()
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line := b[:i]
			switch {
			case i+1 > max:
				return nil, fmt.Errorf("%w: a line longer than %d bytes", errFraming, max)
			case i == 0 || line[i-1] != '\r':
				return nil, errBareLF
			case bytes.IndexByte(line[:i-1], '\r') >= 0:
				return nil, errBareCR
			}
			in.r += i + 1 // consumed; the caller uses line before the next fill
			return line[:i-1], nil
		}
		if len(b) >= max {
			return nil, fmt.Errorf("%w: a line longer than %d bytes", errFraming, max)
		}
		if err := in.fill(); err != nil {
			return nil, err
		}
	}
}

const (
	// maxChunkLine bounds a chunk's size line, its extensions and CRLF
	// included: 16 hex digits and, from a server that sends any, a few
	// bytes of extension. net/http's transport allows what fits its read
	// buffer, 2 KiB as StdTransport sets it.
	maxChunkLine = 2 << 10
	// maxChunkOverhead bounds the framing a chunked body may carry beyond
	// 16 bytes a chunk and twice its data, as net/http's does: a body of
	// one byte a chunk is a stream, one with kilobytes of extension to a
	// byte is not.
	maxChunkOverhead = 16 << 10
	// maxTrailer bounds a chunked body's trailer, its lines and the empty
	// one that ends it: nothing llmgw relays uses trailers. net/http's
	// transport allows what fits its read buffer, 2 KiB as StdTransport
	// sets it.
	maxTrailer = 2 << 10
)

var (
	errFraming = errors.New("proxy: malformed chunked encoding")
	errBareLF  = fmt.Errorf("%w: a line ends in a bare LF", errFraming)
	errBareCR  = fmt.Errorf("%w: a CR inside a line", errFraming)
	// errTrailer is a trailer line that is not a field — a token, a colon
	// and a value of visible characters, spaces and tabs — or does not
	// end in a CRLF. net/http's transport also takes a field folded over
	// two lines, a name with a space in it, and bare LF line ends once a
	// CRLF CRLF follows.
	errTrailer = fmt.Errorf("%w: a malformed trailer", errFraming)
)

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
	chunkEnd            // before the CRLF after a chunk's data
	chunkTrailer        // after the last chunk, before the trailer's end
)

// body decodes an answer's body from its connection's inbuf.
type body struct {
	in      *inbuf
	framing int
	remain  int64 // bytes left: of the body by length, of the chunk in chunks
	state   int   // in chunks
	done    bool

	overhead int64 // in chunks: framing beyond what the data read allows; see maxChunkOverhead
	trailer  int   // in chunks: bytes of the trailer read
}

// next returns the body's next piece, of at most max bytes, valid until
// the following call; io.EOF at the end. Without wait it returns
// errWouldWait rather than wait for the connection. Bytes read past the
// end stay in the inbuf, for the connection's owner to find.
func (b *body) next(max int, wait bool) ([]byte, error) {
	if b.in.r == b.in.w {
		b.in.release() // the piece before, now used, was its last
	}
	for !b.done {
		if b.framing == byChunks && b.state != chunkData {
			if !wait && !b.framingReady() {
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
	if b.in.r == b.in.w {
		b.in.release()
	}
	return nil, io.EOF
}

// complete reports whether the whole body is read.
func (b *body) complete() bool {
	return b.done || b.framing == byLength && b.remain == 0
}

// framingReady reports whether the next piece of a chunked body's framing
// is read, or enough of it to tell it is malformed.
func (b *body) framingReady() bool {
	have := b.in.buffered()
	if b.state == chunkEnd {
		return len(have) >= 2 || len(have) == 1 && have[0] != '\r'
	}
	return bytes.IndexByte(have, '\n') >= 0
}

// framingLine reads one piece of a chunked body's framing: a chunk's size
// line, the CRLF after its data, or a line of the trailer.
func (b *body) framingLine() error {
	switch b.state {
	case chunkEnd:
		for {
			have := b.in.buffered()
			if len(have) >= 2 && have[0] == '\r' && have[1] == '\n' {
				b.in.r += 2
				b.state = chunkSize
				return nil
			}
			if len(have) >= 2 || len(have) == 1 && have[0] != '\r' {
				return fmt.Errorf("%w: %q after a chunk's data", errFraming, have[:min(len(have), 2)])
			}
			if err := b.in.fill(); err != nil {
				return unexpected(err)
			}
		}
	case chunkTrailer:
		line, err := b.in.crlfLine(maxTrailer - b.trailer)
		if errors.Is(err, errBareLF) || errors.Is(err, errBareCR) {
			return fmt.Errorf("%w: a line not ended by its CRLF alone", errTrailer)
		}
		if err != nil {
			return unexpected(err)
		}
		b.trailer += len(line) + 2
		if len(line) == 0 {
			b.done = true
		} else if !validTrailerLine(line) {
			return fmt.Errorf("%w: %q", errTrailer, line)
		}
		return nil
	}
	line, err := b.in.crlfLine(maxChunkLine)
	if err != nil {
		return unexpected(err)
	}
	size, ok := chunkSizeOf(line)
	if !ok {
		return fmt.Errorf("%w: size line %q", errFraming, line)
	}
	b.overhead += int64(len(line)) + 2 // the line, and the CRLF after the chunk's data
	if size >= b.overhead/2 {
		b.overhead = 0
	} else {
		b.overhead = max(b.overhead-16-2*size, 0)
	}
	if b.overhead > maxChunkOverhead {
		return fmt.Errorf("%w: too much framing for the data", errFraming)
	}
	if size == 0 {
		b.state = chunkTrailer
	} else {
		b.remain, b.state = size, chunkData
	}
	return nil
}

// chunkSizeOf reads a chunk's size line, with spaces and tabs after it
// and any extensions, which mean nothing here: the size is 1 to 16 hex
// digits, no sign and no space before it or before the extensions.
func chunkSizeOf(line []byte) (int64, bool) {
	line = bytes.TrimRight(line, " \t")
	if i := bytes.IndexByte(line, ';'); i >= 0 {
		line = line[:i]
	}
	if len(line) == 0 || len(line) > 16 {
		return 0, false
	}
	var size uint64
	for _, c := range line {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		size = size<<4 | uint64(c)
	}
	if size > math.MaxInt64 {
		return 0, false
	}
	return int64(size), true
}

// validTrailerLine reports whether line is a header field.
func validTrailerLine(line []byte) bool {
	name, value, ok := bytes.Cut(line, []byte(":"))
	return ok && httpguts.ValidHeaderFieldName(string(name)) && httpguts.ValidHeaderFieldValue(string(value))
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
