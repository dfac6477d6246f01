package proxy

// The SSE relay: each event from the upstream reaches the client as soon as
// it is read. Nothing waits for company: the relay flushes whenever its next
// read could block, so an event is held back only while the events that
// arrived with it are written, and those leave in the same write. On the
// way it times every token, picks up the usage chunk (and drops it when only
// the gateway wanted it), and makes sure a stream that breaks never ends
// looking whole.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// relayBufSize is the read buffer of one relayed stream. A chunk of one
// token is 150–400 bytes; a longer line is read in pieces, so this bounds
// memory per open stream, not the size of an event.
const relayBufSize = 1 << 10

var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, relayBufSize) }}

// streamWriter writes events to the client. Its lock is held for each write
// and flush, as the keep-alive timer writes from its own goroutine.
type streamWriter struct {
	mu      sync.Mutex // protects the fields below and writes to w
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool  // headers sent
	pending bool  // written but not yet flushed
	err     error // the first write error: the client is gone

	keepAlive time.Duration // zero: no keep-alive comments
	ka        *time.Timer
}

func newStreamWriter(w http.ResponseWriter, keepAlive time.Duration) *streamWriter {
	s := &streamWriter{w: w, rc: http.NewResponseController(w), keepAlive: keepAlive}
	if keepAlive > 0 {
		s.ka = time.AfterFunc(keepAlive, s.comment)
	}
	return s
}

func (s *streamWriter) close() {
	if s.ka != nil {
		s.ka.Stop()
	}
}

func (s *streamWriter) startLocked() {
	if s.started {
		return
	}
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // and a proxy in front of llmgw should not buffer either
	s.w.WriteHeader(http.StatusOK)
	s.started = true
}

// event writes one event, its optional type line and its data, into the
// response's buffer; flush sends it.
func (s *streamWriter) event(kind, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	s.startLocked()
	if len(kind) > 0 {
		s.write("event: ", kind, "\n")
	}
	s.write("data: ", data, "\n\n")
	s.pending = true
	if s.ka != nil {
		s.ka.Reset(s.keepAlive)
	}
	return s.err
}

// flush sends what event wrote.
func (s *streamWriter) flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flushLocked()
	return s.err
}

func (s *streamWriter) write(prefix string, b []byte, suffix string) {
	if s.err != nil {
		return
	}
	if _, s.err = io.WriteString(s.w, prefix); s.err != nil {
		return
	}
	if _, s.err = s.w.Write(b); s.err != nil {
		return
	}
	_, s.err = io.WriteString(s.w, suffix)
}

func (s *streamWriter) flushLocked() {
	if s.err == nil && s.pending {
		s.err = s.rc.Flush()
	}
	s.pending = false
}

// comment sends a keep-alive comment and arms the next. Once it has sent
// one, the headers are out and the call can no longer be retried: the
// price of keeping a slow stream's client waiting.
func (s *streamWriter) comment() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return
	}
	s.startLocked()
	_, s.err = io.WriteString(s.w, ": keep-alive\n\n")
	s.pending = true
	s.flushLocked()
	s.ka.Reset(s.keepAlive)
}

func (s *streamWriter) wrote() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started
}

// relay streams resp to the client.
func (p *Proxy) relay(ctx context.Context, dog *watchdog, w http.ResponseWriter, c *Call, resp *http.Response) Outcome {
	sw := newStreamWriter(w, c.KeepAlive)
	defer sw.close()
	br := readers.Get().(*bufio.Reader)
	br.Reset(resp.Body)
	defer func() {
		br.Reset(nil)
		readers.Put(br)
	}()

	var (
		o                  Outcome
		first, last        time.Time
		events             int64
		sawDone, sawFinish bool
		kind               []byte // the pending event's type, from an "event:" line
		long               []byte // a line longer than the buffer, put together
		readErr, clientErr error
	)
	for clientErr == nil {
		if !lineBuffered(br) {
			// The next read may wait on the upstream: what is written
			// goes out first.
			if clientErr = sw.flush(); clientErr != nil {
				break
			}
		}
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if err != nil && (!errors.Is(err, io.EOF) || len(line) == 0) {
			readErr = err
			break
		}
		dog.event()
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) == 0 || line[0] == ':':
			// An event's end, or a comment: events are flushed as they come
			// and keep-alives are the gateway's own.
			continue
		case bytes.HasPrefix(line, []byte("event:")):
			kind = append(kind[:0], bytes.TrimSpace(line[6:])...)
			continue
		case !bytes.HasPrefix(line, []byte("data:")):
			continue // id: and retry: mean nothing to a completion stream
		}
		data := line[5:]
		if len(data) > 0 && data[0] == ' ' {
			data = data[1:]
		}
		k := kind
		kind = kind[:0]

		switch {
		case bytes.Equal(data, openai.Done):
			sawDone = true
		case openai.HasToken(data):
			now := time.Now()
			if events == 0 {
				first = now
				o.TTFT = now.Sub(c.Start)
			} else if c.Gap != nil {
				c.Gap.Observe(now.Sub(last).Seconds())
			}
			last = now
			events++
		case isErrorEvent(data) && o.Reason == "":
			o.Reason = "stream_error"
			o.Err = openai.BadGateway(errors.New("upstream sent an error event"))
		}
		if !sawFinish && openai.HasFinish(data) {
			sawFinish = true
		}
		if openai.HasUsage(data) {
			if u, err := openai.UsageOf(data); err == nil && u != nil {
				o.Usage = u
			}
			if c.StripUsage && openai.IsUsageOnly(data) {
				continue
			}
		}
		clientErr = sw.event(k, data)
	}
	dog.stop()
	if clientErr == nil {
		clientErr = sw.flush()
	}

	if events > 0 {
		o.Decode = last.Sub(first)
	}
	if o.Usage == nil {
		o.Usage = &openai.Usage{PromptTokens: c.PromptEstimate, CompletionTokens: events, TotalTokens: c.PromptEstimate + events}
		o.Estimated = true
	}
	o.Status = http.StatusOK
	if clientErr != nil {
		o.Status, o.Reason, o.Err = openai.StatusClientClosed, "", clientErr
	} else if ended, ok := cancelled(ctx); ok && !sawDone {
		ended.Usage, ended.Estimated, ended.TTFT, ended.Decode = o.Usage, o.Estimated, o.TTFT, o.Decode
		o = ended
	} else if !sawDone {
		if errors.Is(readErr, io.EOF) && sawFinish {
			// The answer is whole; the backend only left out the terminator.
			sw.event(nil, openai.Done)
			sw.flush()
		} else {
			o.Reason, o.Err = "stream_broken", openai.BadGateway(readErr)
		}
	}
	o.Wrote = sw.wrote()
	if o.Err != nil && o.Status != openai.StatusClientClosed {
		e := openai.AsError(o.Err)
		o.Status = e.Status
		if o.Wrote {
			// The client has part of an answer: end with an error event
			// and no [DONE], so that it cannot take the part for the whole.
			sw.event(nil, e.Body())
			sw.flush()
		}
	}
	return o
}

// lineBuffered reports whether br holds a whole line, which it can then
// return without reading.
func lineBuffered(br *bufio.Reader) bool {
	b, _ := br.Peek(br.Buffered())
	return bytes.IndexByte(b, '\n') >= 0
}

func isErrorEvent(data []byte) bool {
	return bytes.HasPrefix(bytes.TrimLeft(data, " "), []byte(`{"error"`))
}
