package proxy

// The SSE relay: each event from the upstream reaches the client as soon as
// it is read, the stream framed as the SSE specification reads it
// (openai.Framer). Nothing waits for company: the relay flushes whenever its next
// read could block, so an event is held back only while the events that
// arrived with it are written, and those leave in the same write. On the
// way it times every token, picks up the usage chunk (and drops it when only
// the gateway wanted it), and makes sure a stream that breaks never ends
// looking whole.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"sync"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// relayBufSize is the read buffer of a stream whose body is not read by
// llmgw's own transport: from an HTTPS upstream. A chunk of one token is
// 150-400 bytes; a longer line is read in pieces.
const relayBufSize = 1 << 10

// maxEventLine bounds one line of an upstream's stream, and one event's
// data. A token's event is a few hundred bytes and a final chunk with
// every logprob a few hundred KiB; a line or event that runs on past this
// is a broken or hostile upstream, and its stream ends rather than grow
// without bound.
const maxEventLine = 4 << 20

var errLineTooLong = fmt.Errorf("upstream sent a stream line or event longer than %d bytes", maxEventLine)

// errStreamClosed is what a keep-alive comment due after the relay ended
// finds: nothing more is written.
var errStreamClosed = errors.New("stream closed")

// pieceReader is an answer's body read a piece at a time, each piece valid
// until the next call. Asked not to wait, next returns errWouldWait rather
// than wait for the upstream.
type pieceReader interface {
	next(max int, wait bool) ([]byte, error)
}

// readerPieces reads any other body in pieces, through a buffer of its own.
type readerPieces struct {
	r   io.Reader
	buf []byte
}

func (p *readerPieces) next(max int, wait bool) ([]byte, error) {
	if !wait {
		return nil, errWouldWait
	}
	n, err := p.r.Read(p.buf[:min(max, len(p.buf))])
	if n > 0 {
		return p.buf[:n], nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return nil, err
}

func piecesOf(body io.Reader) pieceReader {
	if p, ok := body.(pieceReader); ok {
		return p
	}
	return &readerPieces{r: body, buf: make([]byte, relayBufSize)}
}

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

	// writeTimeout bounds each write to the client; zero, or a writer
	// that cannot set deadlines, means none.
	writeTimeout time.Duration
}

func newStreamWriter(w http.ResponseWriter, keepAlive, writeTimeout time.Duration) *streamWriter {
	s := &streamWriter{w: w, rc: http.NewResponseController(w), keepAlive: keepAlive, writeTimeout: writeTimeout}
	if keepAlive > 0 {
		s.ka = time.AfterFunc(keepAlive, s.comment)
	}
	return s
}

// close stops the keep-alive comments: none is written once it returns,
// so the handler may return. The write deadline holds until the server
// has finished the answer, and the server lifts it then.
func (s *streamWriter) close() {
	if s.ka != nil {
		s.ka.Stop()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = errStreamClosed
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
// response's buffer; flush sends it. Data of several lines, joined by
// "\n" as a framer joins them, goes as one data line each.
func (s *streamWriter) event(kind, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	s.startLocked()
	s.deadlineLocked()
	if len(kind) > 0 {
		s.write("event: ", kind, "\n")
	}
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		s.write("data: ", data[:i], "\n")
		data = data[i+1:]
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

// deadlineLocked gives the writes that follow writeTimeout to reach the
// client. A client that stops reading then ends its stream with a write
// error, rather than block the relay, and with it the upstream's slot, for
// as long as it likes.
func (s *streamWriter) deadlineLocked() {
	if s.writeTimeout <= 0 {
		return
	}
	if err := s.rc.SetWriteDeadline(time.Now().Add(s.writeTimeout)); err != nil {
		s.writeTimeout = 0 // the writer cannot: it is not a connection
	}
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
	s.deadlineLocked()
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

// relay streams resp to the client: the upstream's events framed as they
// arrive (frameEvents), each read and written by an observer, and what the
// stream came to settled at its end (finish).
func (p *Proxy) relay(end *ender, dog *watchdog, w http.ResponseWriter, c *Call, resp *http.Response) Outcome {
	sw := newStreamWriter(w, c.KeepAlive, c.Idle)
	defer sw.close()
	ob := observer{c: c, sw: sw}
	if c.Translate != nil {
		ob.tr, ob.emit = c.Translate.Stream(), sw.event
	}
	if c.Provider != nil {
		ob.dec = c.Provider.Stream()
	}
	frame := frameEvents
	if _, ok := c.Provider.(openai.BinaryStreamer); ok {
		frame = frameMessages
	}
	readErr, clientErr := frame(dog, sw, piecesOf(resp.Body), &ob)
	dog.stop()
	if clientErr == nil {
		clientErr = sw.flush()
	}
	return ob.finish(end, readErr, clientErr)
}

// frameEvents reads src's events and hands each to ob as soon as its
// blank line is read, flushing what was written whenever the next read
// could wait on the upstream. Each line read tells the watchdog the
// upstream is alive. readErr is how reading ended (io.EOF: the stream
// ended cleanly), clientErr the client's failure; one of them is set.
// A last event with no blank line after it is relayed all the same.
func frameEvents(dog *watchdog, sw *streamWriter, src pieceReader, ob *observer) (readErr, clientErr error) {
	f := openai.Framer{Max: maxEventLine}
	var piece []byte
	lines := 0
	for {
		ev, ok, err := f.Next(&piece)
		if n := f.Lines(); n != lines {
			lines = n
			dog.event()
		}
		if err != nil {
			return errLineTooLong, nil
		}
		if ok {
			if err := ob.event(ev); err != nil {
				return nil, err
			}
			continue
		}
		piece, err = src.next(math.MaxInt, false)
		if errors.Is(err, errWouldWait) {
			// The next read waits on the upstream: what is written
			// goes out first.
			if err := sw.flush(); err != nil {
				return nil, err
			}
			piece, err = src.next(math.MaxInt, true)
		}
		if err == nil {
			continue
		}
		if errors.Is(err, io.EOF) {
			if ev, ok, _ := f.End(); ok {
				dog.event()
				if err := ob.event(ev); err != nil {
					return nil, err
				}
			}
		}
		return err, nil
	}
}

// observer reads a stream's chat chunks on their way to the client: it
// times the tokens, keeps the usage, notes the finish, [DONE] and error
// events (redacting those), renames the model, and writes each chunk, or
// has the Translator write the client's events for it.
type observer struct {
	c       *Call
	sw      *streamWriter
	tr      openai.EventTranslator // nil: events are relayed as they came
	emit    openai.Emit
	dec     openai.EventDecoder // nil: the upstream's events are chat chunks
	decoded [][]byte            // one event's chat chunks, from dec
	renamed []byte              // a chunk's data with the catalog's model name

	o                  Outcome // Usage, TTFT and the upstream's fault, so far
	first, last        time.Time
	events             int64 // token events
	sawDone, sawFinish bool
}

// event relays one upstream event: a chat chunk, or with a Provider the
// chat chunks it means.
func (ob *observer) event(ev openai.Event) error {
	if ob.dec == nil {
		return ob.chunk(ev.Type, ev.Data)
	}
	ob.decoded = ob.dec.Event(ev.Type, ev.Data, ob.decoded[:0])
	for _, data := range ob.decoded {
		if err := ob.chunk(nil, data); err != nil {
			return err
		}
	}
	return nil
}

// chunk observes one chat chunk, of SSE type kind, and writes it on; an
// error is the client's.
func (ob *observer) chunk(kind, data []byte) error {
	data, relay := ob.observe(data)
	if !relay {
		return nil
	}
	if ob.c.Model != "" {
		if out, ok := openai.RenameModel(ob.renamed, data, ob.c.Model); ok {
			ob.renamed, data = out, out
		}
	}
	return ob.write(kind, data)
}

// observe reads a chunk for the outcome. It returns the chunk as the
// client may see it, an upstream's error with its secrets redacted, and
// false for a usage chunk only the gateway asked for.
func (ob *observer) observe(data []byte) ([]byte, bool) {
	switch {
	case bytes.Equal(data, openai.Done):
		ob.sawDone = true
	case openai.HasToken(data):
		ob.token(time.Now())
	case isErrorEvent(data):
		// The upstream's own words reach the client: without a secret
		// in them.
		data, _ = redact(data, sentKeys(ob.c.Header))
		if ob.o.Reason == ReasonNone {
			ob.o.Reason = ReasonStreamError
			ob.o.Err = openai.BadGateway(errors.New("upstream sent an error event"))
		}
	case isErrorObject(data):
		data, _ = redact(data, sentKeys(ob.c.Header))
	}
	if !ob.sawFinish && openai.HasFinish(data) {
		ob.sawFinish = true
		ob.o.FinishReason = openai.FinishReason(data)
	}
	if openai.HasUsage(data) {
		if u, err := openai.UsageOf(data); err == nil && u != nil {
			ob.o.Usage = u
		}
		if ob.c.StripUsage && openai.IsUsageOnly(data) {
			return data, false
		}
	}
	return data, true
}

// token times a token event that arrived at now: the first's TTFT, the
// gap since the one before for the others.
func (ob *observer) token(now time.Time) {
	if ob.events == 0 {
		ob.first = now
		ob.o.TTFT = now.Sub(ob.c.Start)
		if ob.c.FirstToken != nil {
			ob.c.FirstToken(now)
		}
	} else if ob.c.Gap != nil {
		ob.c.Gap.Observe(now.Sub(ob.last).Seconds())
	}
	ob.last = now
	ob.events++
}

// write sends one chunk to the client, through the Translator when there
// is one.
func (ob *observer) write(kind, data []byte) error {
	if ob.tr != nil {
		return ob.tr.Event(data, ob.emit)
	}
	return ob.sw.event(kind, data)
}

// finish is what the stream came to, once reading ended with readErr and
// writing with clientErr. A stream that ended cleanly after a finish but
// without [DONE] gets one; a broken stream whose client has part of an
// answer ends with an error event and no [DONE].
func (ob *observer) finish(end *ender, readErr, clientErr error) Outcome {
	o := ob.o
	if ob.events > 0 {
		o.Decode = ob.last.Sub(ob.first)
	}
	if o.Usage == nil {
		o.Usage = &openai.Usage{PromptTokens: ob.c.PromptEstimate, CompletionTokens: ob.events, TotalTokens: ob.c.PromptEstimate + ob.events}
		o.Estimated = true
	}
	o.Status = http.StatusOK
	if clientErr != nil {
		o.Status, o.Reason, o.Err = openai.StatusClientClosed, ReasonNone, clientErr
	} else if ended, ok := cancelled(end); ok && !ob.sawDone {
		ended.Usage, ended.Estimated, ended.TTFT, ended.Decode = o.Usage, o.Estimated, o.TTFT, o.Decode
		o = ended
	} else if !ob.sawDone {
		if errors.Is(readErr, io.EOF) && ob.sawFinish {
			// The answer is whole; the backend only left out the terminator.
			ob.write(nil, openai.Done)
			ob.sw.flush()
		} else {
			o.Reason, o.Err = ReasonStreamBroken, openai.BadGateway(readErr)
		}
	}
	o.Wrote = ob.sw.wrote()
	if o.Err != nil && o.Status != openai.StatusClientClosed {
		e := openai.AsError(o.Err)
		o.Status = e.Status
		if o.Wrote {
			// The client has part of an answer: end with an error event
			// and no [DONE], so that it cannot take the part for the whole.
			if ob.tr != nil {
				ob.tr.Fail(e, ob.emit)
			} else {
				ob.sw.event(nil, e.Body())
			}
			ob.sw.flush()
		}
	}
	return o
}

// isErrorEvent reports whether a chunk is an error as OpenAI streams one:
// {"error":{...}}.
func isErrorEvent(data []byte) bool {
	return bytes.HasPrefix(bytes.TrimLeft(data, " "), []byte(`{"error"`))
}

// isErrorObject reports whether a chunk is an error as SGLang (and vLLM
// before it took OpenAI's shape) streams one: {"object": "error", ...}.
func isErrorObject(data []byte) bool {
	rest, ok := bytes.CutPrefix(bytes.TrimLeft(data, " "), []byte(`{"object"`))
	if !ok {
		return false
	}
	rest, ok = bytes.CutPrefix(bytes.TrimLeft(rest, " "), []byte(":"))
	return ok && bytes.HasPrefix(bytes.TrimLeft(rest, " "), []byte(`"error"`))
}
