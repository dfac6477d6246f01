package proxy

// A tapped answer: its body's pieces handed to a Call's Tap as they are
// read, whichever way the call reads them (a piece at a time as a stream
// is relayed, or whole as a plain answer is).

import (
	"errors"
	"io"
	"net/http"
)

// Tap is told an answer as the upstream sent it, before anything in it
// is changed: its status, its headers and the endpoint's host:port as
// they come, on the calling goroutine. What it returns, when not nil, is
// handed the body's pieces as they are read (each valid only during the
// call), eos with the last at the body's clean end. Neither may block.
type Tap func(status int, h http.Header, host string) func(piece []byte, eos bool)

// tap tells c's Tap, if any, of resp, and has its body's pieces handed
// on as they are read.
func (c *Call) tap(resp *http.Response) {
	if c.Tap == nil {
		return
	}
	if piece := c.Tap(resp.StatusCode, resp.Header, c.URL.Host); piece != nil {
		resp.Body = tapped(resp.Body, piece)
	}
}

// tappedBody hands what is read of body to tap.
type tappedBody struct {
	io.ReadCloser
	tap func(piece []byte, eos bool)
}

func (t *tappedBody) Read(b []byte) (int, error) {
	n, err := t.ReadCloser.Read(b)
	if eos := errors.Is(err, io.EOF); n > 0 || eos {
		t.tap(b[:n], eos)
	}
	return n, err
}

// tappedPieces is a tappedBody over a body read a piece at a time.
type tappedPieces struct {
	tappedBody
	pieces pieceReader
}

func (t *tappedPieces) next(max int, wait bool) ([]byte, error) {
	b, err := t.pieces.next(max, wait)
	if eos := errors.Is(err, io.EOF); len(b) > 0 || eos {
		t.tap(b, eos)
	}
	return b, err
}

// tapped is body with its pieces handed to tap as they are read.
func tapped(body io.ReadCloser, tap func([]byte, bool)) io.ReadCloser {
	if p, ok := body.(pieceReader); ok {
		return &tappedPieces{tappedBody: tappedBody{ReadCloser: body, tap: tap}, pieces: p}
	}
	return &tappedBody{ReadCloser: body, tap: tap}
}
