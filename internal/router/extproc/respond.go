package extproc

// The answer's phase of a Process stream: the endpoint's answer told to
// the EPP as a proxy in full-duplex streamed mode tells it — its headers
// with :status and the endpoint that served it, then its body as it was
// read, the last piece with end_of_stream — off the request's path. What
// the EPP has not yet taken waits in a bounded queue; when that is full,
// the rest of the body is dropped and counted, and the EPP is told the
// end alone. Its replies are read and let be: an immediate answer cannot
// change an answer already under way.

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

const (
	// queueLen bounds the messages waiting for the EPP. A stream's
	// pieces come a token or a few at a time, tens a second, and an EPP
	// takes each in well under a millisecond: 256 is seconds of an EPP
	// that stalled before anything is dropped. The queue keeps two places
	// more for the end (the headers, end_of_stream), which always fit.
	queueLen = 256
	// queueBytes bounds the bytes waiting: a plain answer comes in a few
	// large pieces.
	queueBytes = 1 << 20
)

// Counter counts what an answer's phase dropped: prometheus.Counter is one.
type Counter interface{ Add(float64) }

// startResponse readies a's answer phase on its stream: a goroutine sends
// what is queued, and one reads the EPP's replies, until Done and the EPP
// has taken the end, or for at most timeout after Done.
func (a *Answer) startResponse(timeout time.Duration, dropped Counter) {
	a.grace, a.dropped = timeout, dropped
	a.q = make(chan *extprocv3.ProcessingRequest, queueLen+2)
	a.replies = make(chan struct{})
	go a.readReplies()
	go a.send()
}

// Tap is told an answer of the call as it comes (proxy.Call's Tap): the
// first 2xx answer's headers are told to the EPP, and the function
// returned takes its body's pieces. Any other answer is told at Done, as
// the call's end, for a retry may yet be served: nil. Tap never waits.
func (a *Answer) Tap(status int, h http.Header, host string) func(piece []byte, eos bool) {
	if a == nil || a.q == nil || status < 200 || status > 299 {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.told || a.closed || a.gone {
		return nil
	}
	a.told = true
	a.pushLocked(responseHeaders(status, h, host), 0)
	return a.piece
}

// piece queues one piece of the answer's body, a copy, unless the EPP is
// behind: then it, and the rest of the body after it, are dropped.
func (a *Answer) piece(b []byte, eos bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ended || a.closed {
		return
	}
	if a.lagging || a.gone || len(a.q) >= queueLen || a.queued+len(b) > queueBytes {
		// The end (an empty eos) is told at Done all the same.
		a.lagging = true
		if len(b) > 0 {
			a.drop(1)
		}
		return
	}
	a.pushLocked(responseBody(bytes.Clone(b), eos), len(b))
	a.ended = eos
}

// pushLocked queues m, of size body bytes; a's lock is held and the
// queue has room: a piece found it below queueLen, and the headers and
// the end have two places of their own.
func (a *Answer) pushLocked(m *extprocv3.ProcessingRequest, size int) {
	if a.gone {
		if size > 0 {
			a.drop(1)
		}
		return
	}
	a.q <- m
	a.queued += size
}

// drop counts n pieces the EPP was not told.
func (a *Answer) drop(n int) {
	if a.dropped != nil && n > 0 {
		a.dropped.Add(float64(n))
	}
}

// Done tells the EPP the call's end, off the request's path: a call whose
// answer it was not told of (no 2xx answer came) as the response's
// headers with status and the endpoint that served it (host:port; empty
// for none), then end_of_stream when it was not sent. The stream ends
// once the EPP has taken the end, or timeout after Done. A nil Answer is
// let be; Done must be called once the call has ended.
func (a *Answer) Done(status int, served string) {
	if a == nil || a.q == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return
	}
	a.closed = true
	if !a.told {
		a.pushLocked(responseHeaders(status, nil, served), 0)
	}
	if !a.ended {
		a.pushLocked(responseBody(nil, true), 0)
	}
	close(a.q)
	if !a.gone {
		a.late = time.AfterFunc(a.grace, a.cancel)
	}
}

// send sends what is queued, in order, until Done's end has gone or the
// stream broke; then closes its side and waits for the EPP to end its.
func (a *Answer) send() {
	defer a.finish()
	for m := range a.q {
		err := a.st.Send(m)
		a.mu.Lock()
		a.queued -= len(m.GetResponseBody().GetBody())
		if err != nil {
			// The EPP is gone: what waits is dropped, and so is whatever
			// comes after.
			a.gone = true
			for len(a.q) > 0 {
				if m := <-a.q; len(m.GetResponseBody().GetBody()) > 0 {
					a.drop(1)
				}
			}
		}
		a.mu.Unlock()
		if err != nil {
			return
		}
	}
	if a.st.CloseSend() == nil {
		<-a.replies
	}
}

// finish ends the stream: the replies' reader stops with it, and the
// client's connection is released.
func (a *Answer) finish() {
	a.cancel()
	<-a.replies
	a.mu.Lock()
	a.gone = true
	if a.late != nil {
		a.late.Stop()
	}
	a.mu.Unlock()
	a.c.release()
}

// readReplies reads the EPP's replies to the answer's phase until the
// stream ends, and lets them be. Once it has ended, nothing more is sent.
func (a *Answer) readReplies() {
	defer close(a.replies)
	for {
		if _, err := a.st.Recv(); err != nil {
			a.mu.Lock()
			a.gone = true
			a.mu.Unlock()
			return
		}
	}
}

// responseHeaders is the message of an answer's headers: its status, h,
// and the endpoint that served it, when not empty, in the metadata.
func responseHeaders(status int, h http.Header, served string) *extprocv3.ProcessingRequest {
	hs := make([]*corev3.HeaderValue, 0, 1+len(h))
	hs = append(hs, &corev3.HeaderValue{Key: ":status", RawValue: strconv.AppendInt(nil, int64(status), 10)})
	for k, vs := range h {
		for _, v := range vs {
			hs = append(hs, &corev3.HeaderValue{Key: strings.ToLower(k), RawValue: []byte(v)})
		}
	}
	md := &corev3.Metadata{}
	if served != "" {
		s, _ := structpb.NewStruct(map[string]any{ServedKey: served})
		md.FilterMetadata = map[string]*structpb.Struct{DestinationNamespace: s}
	}
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{Headers: &corev3.HeaderMap{Headers: hs}}}, MetadataContext: md}
}

// responseBody is the message of a piece of an answer's body.
func responseBody(b []byte, eos bool) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{Body: b, EndOfStream: eos}}}
}
