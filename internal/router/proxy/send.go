package proxy

// Writing a request and reading the first of its answer with no read made
// before the answer is there. A request is written through a buffer, and
// its last piece from inside the wait for the answer (RawConn.Read), once
// that wait has put aside whatever readiness the connection had before:
// the answer's arrival then wakes the call, and the one read it makes
// finds the answer. Read first, as a plain write and read would, and the
// read would nearly always come before the answer and find nothing.
//
// An idle connection is looked at in the same wait, before the request's
// first byte is written (inbuf.quiet's look, one system call): a close or
// unasked-for bytes that came before the wait began are found by the
// look, and any after it wake the wait.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"syscall"
)

// errNotAlive is an idle connection found closed, or with bytes no request
// asked for, before a request was written on it.
var errNotAlive = errors.New("proxy: idle connection closed or not quiet")

// sendRequest writes req on c and waits for the first bytes of its
// answer, which c.in holds after. It fails with errNotAlive, having
// written nothing, when c is to be looked at and is not alive.
func (c *h1Conn) sendRequest(req *http.Request) error {
	bw := writers.Get().(*bufio.Writer)
	bw.Reset(&c.out)
	err := writeRequest(bw, req)
	if err == nil {
		c.out.last = true
		err = bw.Flush()
	}
	if err == nil {
		// Waiting for the answer holds no buffer.
		err = c.in.writeThenFill(c.out.held, c.out.look)
	}
	c.out.last, c.out.held, c.out.look = false, nil, false
	bw.Reset(nil)
	writers.Put(bw)
	return err
}

// heldWriter is what a request's buffer writes to: the connection, but for
// the request's last piece, which it holds for inbuf.writeThenFill.
type heldWriter struct {
	conn net.Conn
	in   *inbuf
	last bool   // the next write is the request's last
	held []byte // the last piece, not yet written; in the buffer's memory
	// look reports whether the connection, an idle one, is yet to be
	// looked at before the request's first byte is written.
	look bool
}

func (w *heldWriter) Write(p []byte) (int, error) {
	if w.last {
		w.held = p
		return len(p), nil
	}
	// A request longer than the buffer: its first part is written now,
	// after the look, and the wait for the answer begins after its last.
	if w.look {
		w.look = false
		if !w.in.quiet() {
			return 0, errNotAlive
		}
	}
	return w.conn.Write(p)
}

// writeThenFill writes p, the last of a request, and then waits for the
// answer and reads the first of it, as fill does; when look, it first
// looks at the connection as quiet does, and fails with errNotAlive,
// having written nothing, if it is not. The wait begins before the look
// and the write, so nothing that comes after either is missed, and no
// read is made until the answer has come. Where the socket takes only
// part of p at once, the rest is written as any write, with its deadline,
// and the answer read as fill reads it.
func (in *inbuf) writeThenFill(p []byte, look bool) error {
	if in.raw == nil || len(p) == 0 || in.buf != nil {
		if look && !in.quiet() {
			return errNotAlive
		}
		if _, err := in.conn.Write(p); err != nil {
			return err
		}
		return in.fill()
	}
	in.out, in.look, in.werr = p, look, nil
	err := in.raw.Read(in.writeReadFD)
	rest, werr, unlooked := in.out, in.werr, in.look
	in.out, in.look, in.werr = nil, false, nil
	switch {
	case werr == errNotAlive:
		return errNotAlive
	case unlooked || len(rest) > 0 && err != nil:
		return err // interrupted before the look or the write
	case werr != nil:
		return &net.OpError{Op: "write", Net: "tcp", Err: werr}
	case len(rest) > 0 && err == nil:
		if _, err := in.conn.Write(rest); err != nil {
			return err
		}
		return in.fill()
	}
	return in.settle(err)
}

// writeRead looks at the connection when in.look, writes what in.out
// holds, and reports false to wait for the answer once all of it is
// written; after, it reads as read does. A look that finds the connection
// not alive, or a write the socket takes in part or refuses, ends the
// wait.
func (in *inbuf) writeRead(fd uintptr) bool {
	if in.look {
		in.look = false
		if in.peek(fd); in.err != syscall.EAGAIN {
			in.werr = errNotAlive
			return true
		}
	}
	if len(in.out) == 0 {
		return in.read(fd)
	}
	for {
		n, err := syscall.Write(int(fd), in.out)
		if err == syscall.EINTR {
			continue
		}
		if n > 0 {
			in.out = in.out[n:]
		}
		if err != nil && err != syscall.EAGAIN {
			in.werr = err
		}
		return err != nil || len(in.out) > 0
	}
}

// writeRequest writes req as HTTP/1.1 with a known length, as llmgw's calls
// always have, into w; the caller flushes.
func writeRequest(w *bufio.Writer, req *http.Request) error {
	if req.ContentLength < 0 || req.Body != nil && req.ContentLength == 0 && req.Body != http.NoBody {
		return errors.New("proxy: a request body of unknown length")
	}
	w.WriteString(req.Method)
	w.WriteByte(' ')
	w.WriteString(req.URL.RequestURI())
	w.WriteString(" HTTP/1.1\r\nHost: ")
	w.WriteString(req.URL.Host)
	w.WriteString("\r\nContent-Length: ")
	w.Write(strconv.AppendInt(w.AvailableBuffer(), req.ContentLength, 10))
	w.WriteString("\r\n")
	for k, vs := range req.Header {
		for _, v := range vs {
			w.WriteString(k)
			w.WriteString(": ")
			w.WriteString(v)
			w.WriteString("\r\n")
		}
	}
	w.WriteString("\r\n")
	if req.Body != nil {
		n, err := io.Copy(w, req.Body)
		req.Body.Close()
		if err != nil {
			return err
		}
		if n != req.ContentLength {
			return fmt.Errorf("proxy: request body was %d bytes, not the %d announced", n, req.ContentLength)
		}
	}
	return nil
}
