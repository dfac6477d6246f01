package proxy

// The SSE relay: each event from the upstream reaches the client as soon as
// it is read. Nothing waits for company: the relay flushes whenever its next
// read could block, so an event is held back only while the events that
// arrived with it are written, and those leave in the same write. On the
// way it times every token, picks up the usage chunk (and drops it when only
// the gateway wanted it), and makes sure a stream that breaks never ends
// looking whole.

import (
	"bytes"
	"context"
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

// maxEventLine bounds one line of an upstream's stream. A token's event is
// a few hundred bytes and a final chunk with every logprob a few hundred
// KiB; a line that runs on past this is a broken or hostile upstream, and
// its stream ends rather than grow without bound.
const maxEventLine = 4 << 20

var errLineTooLong = fmt.Errorf("upstream sent a stream line longer than %d bytes", maxEventLine)

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
// response's buffer; flush sends it.
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

// relay streams resp to the client.
func (p *Proxy) relay(ctx context.Context, dog *watchdog, w http.ResponseWriter, c *Call, resp *http.Response) Outcome {
	sw := newStreamWriter(w, c.KeepAlive, c.Idle)
	defer sw.close()
	src := piecesOf(resp.Body)
	var (
		tr      EventTranslator // nil: events are relayed as they came
		emit    Emit
		dec     EventDecoder // nil: the upstream's events are chat chunks
		decoded [][]byte     // one event's chat chunks, from dec
	)
	if c.Translate != nil {
		tr, emit = c.Translate.Stream(), sw.event
	}
	if c.Provider != nil {
		dec = c.Provider.Stream()
	}

	var (
		o                  Outcome
		first, last        time.Time
		events             int64
		sawDone, sawFinish bool
		kind               []byte // the pending event's type, from an "event:" line
		piece              []byte // read and not yet relayed
		partial            []byte // a line begun in an earlier piece
		renamed            []byte // the event's data with the catalog's model name
		readErr, clientErr error
	)
	for clientErr == nil {
		line, ok := cutLine(&piece)
		if !ok {
			if len(partial)+len(piece) > maxEventLine {
				readErr = errLineTooLong
				break
			}
			partial = append(partial, piece...)
			var err error
			piece, err = src.next(math.MaxInt, false)
			if errors.Is(err, errWouldWait) {
				// The next read waits on the upstream: what is written
				// goes out first.
				if clientErr = sw.flush(); clientErr != nil {
					break
				}
				piece, err = src.next(math.MaxInt, true)
			}
			if err == nil {
				continue
			}
			if !errors.Is(err, io.EOF) || len(partial) == 0 {
				readErr = err
				break
			}
			line = partial // the last line, with no line end
		} else if len(partial) > 0 {
			line = append(partial, line...)
		}
		partial = partial[:0]
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
		var one [1][]byte
		one[0] = data
		chunks := one[:]
		if dec != nil {
			// The provider's event, as the chat chunks it means.
			decoded, k = dec.Event(k, data, decoded[:0]), nil
			chunks = decoded
		}
		for _, data := range chunks {
			switch {
			case bytes.Equal(data, openai.Done):
				sawDone = true
			case openai.HasToken(data):
				now := time.Now()
				if events == 0 {
					first = now
					o.TTFT = now.Sub(c.Start)
					if c.FirstToken != nil {
						c.FirstToken(now)
					}
				} else if c.Gap != nil {
					c.Gap.Observe(now.Sub(last).Seconds())
				}
				last = now
				events++
			case isErrorEvent(data):
				// The upstream's own words reach the client: without
				// a secret in them.
				data, _ = redact(data, sentKeys(c.Header))
				if o.Reason == "" {
					o.Reason = "stream_error"
					o.Err = openai.BadGateway(errors.New("upstream sent an error event"))
				}
			case isErrorObject(data):
				data, _ = redact(data, sentKeys(c.Header))
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
			if c.Model != "" {
				if out, ok := openai.RenameModel(renamed, data, c.Model); ok {
					renamed, data = out, out
				}
			}
			if tr != nil {
				clientErr = tr.Event(data, emit)
			} else {
				clientErr = sw.event(k, data)
			}
			if clientErr != nil {
				break
			}
		}
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
			if tr != nil {
				tr.Event(openai.Done, emit)
			} else {
				sw.event(nil, openai.Done)
			}
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
			if tr != nil {
				tr.Fail(e, emit)
			} else {
				sw.event(nil, e.Body())
			}
			sw.flush()
		}
	}
	return o
}

// cutLine takes the first line, with its line end, off *piece, and false
// when *piece holds no whole line.
func cutLine(piece *[]byte) ([]byte, bool) {
	i := bytes.IndexByte(*piece, '\n')
	if i < 0 {
		return nil, false
	}
	line := (*piece)[:i+1]
	*piece = (*piece)[i+1:]
	return line, true
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
