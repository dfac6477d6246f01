package proxy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// framedProvider reads a binary stream whose messages are a 4-byte
// length, 8 bytes of padding, a chat chunk and 4 more bytes: the shape
// of AWS's event-stream messages, without their headers and CRCs.
type framedProvider struct{}

func (framedProvider) StreamContentType() string          { return "application/vnd.amazon.eventstream" }
func (framedProvider) Answer(body []byte) ([]byte, error) { return body, nil }
func (framedProvider) Error(_ int, body []byte) []byte    { return body }
func (framedProvider) Stream() openai.EventDecoder        { return framedDecoder{} }

type framedDecoder struct{}

func (framedDecoder) Event(_, data []byte, chunks [][]byte) [][]byte {
	return append(chunks, append([]byte(nil), data[12:len(data)-4]...))
}

func message(chunk string) string {
	b := make([]byte, 12, 16+len(chunk))
	binary.BigEndian.PutUint32(b, uint32(16+len(chunk)))
	return string(append(append(b, chunk...), 0, 0, 0, 0))
}

// TestRelayBinaryStream relays an event stream whose messages arrive cut
// anywhere, as chat events, timing each token; a stream cut inside a
// message is broken.
func TestRelayBinaryStream(t *testing.T) {
	whole := message(roleChunk) + message(tokA) + message(tokB) + message(finish) + message("[DONE]")
	for _, c := range []struct {
		name, wire string
		wantOK     bool
	}{
		{"whole", whole, true},
		{"cut inside a message", whole[:len(whole)-3], false},
		{"impossible length", "\x00\x00\x00\x03abcdefghijklmnop", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
				for i := 0; i < len(c.wire); i += 7 { // pieces that cut messages and their lengths
					io.WriteString(w, c.wire[i:min(i+7, len(c.wire))])
					w.(http.Flusher).Flush()
				}
			}))
			defer up.Close()
			p := New(time.Second, nil)
			defer p.CloseIdle()
			rec := httptest.NewRecorder()
			o := p.Do(context.Background(), rec, &Call{URL: mustURL(t, up.URL), Header: Headers("", true), Body: []byte(`{}`), Stream: true, Start: time.Now(), Provider: framedProvider{}})
			if ok := o.Reason == ReasonNone; ok != c.wantOK || !ok && o.Reason != ReasonStreamBroken {
				t.Fatalf("outcome %+v", o)
			}
			if c.wantOK && (rec.Body.String() != sse(roleChunk, tokA, tokB, finish)+"data: [DONE]\n\n" || o.Usage.CompletionTokens != 2) {
				t.Errorf("relayed %q, usage %+v", rec.Body.String(), o.Usage)
			}
		})
	}
}

type signer struct{ err error }

func (s signer) Sign(_ context.Context, req *http.Request, body []byte) error {
	req.Header.Set("Authorization", "signed "+req.URL.Host+" "+string(body))
	return s.err
}

// TestCallSigned signs each call's own copy of the headers as it is sent;
// a signer that fails is the pool's credentials failing, a 502.
func TestCallSigned(t *testing.T) {
	seen := make(chan string, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"choices":[]}`)
	}))
	defer up.Close()
	p := New(time.Second, nil)
	defer p.CloseIdle()
	h := Headers("", false)
	o := p.Do(context.Background(), httptest.NewRecorder(), &Call{URL: mustURL(t, up.URL), Header: h, Body: []byte(`{}`), Start: time.Now(), Sign: signer{}})
	if got := <-seen; o.Status != 200 || got != "signed "+strings.TrimPrefix(up.URL, "http://")+" {}" || h.Get("Authorization") != "" {
		t.Errorf("status %d, upstream saw %q, shared headers %v", o.Status, got, h)
	}
	o = p.Do(context.Background(), httptest.NewRecorder(), &Call{URL: mustURL(t, up.URL), Header: h, Body: []byte(`{}`), Start: time.Now(), Sign: signer{errors.New("no credentials")}})
	if o.Status != 502 || o.Reason != ReasonStatusAuth || !o.Retryable() {
		t.Errorf("a failed signature: %+v", o)
	}
}

// TestRetryAfter reads seconds and HTTP dates, and nothing else.
func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"": 0, "2": 2 * time.Second, "0": 0, "-3": 0, "soon": 0, "1.5": 0,
		"Mon, 07 Dec 2026 12:00:30 GMT": 30 * time.Second, "Mon, 07 Dec 2026 11:00:00 GMT": 0,
		"99999999999999": maxRetryAfter,
	} {
		if got := retryAfter(v, now); got != want {
			t.Errorf("Retry-After %q: %s, want %s", v, got, want)
		}
	}
}

type tokenSigner struct{ header, token string }

func (s tokenSigner) Sign(_ context.Context, req *http.Request, _ []byte) error {
	req.Header.Set(s.header, s.token)
	return nil
}

// TestSignedCredentialsRedacted: an upstream that quotes back the
// credential a signer put on the call, bare, finds it redacted in what
// the client is relayed, as a key in the pool's own headers would be.
func TestSignedCredentialsRedacted(t *testing.T) {
	const token = "ya29.c0ASRK0GZsecret-vertex-token"
	for _, header := range []string{"Authorization", "X-Goog-Api-Key", "X-Amz-Security-Token"} {
		t.Run(header, func(t *testing.T) {
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				fmt.Fprintf(w, `{"error":{"message":"the request with %s was malformed"}}`, strings.TrimPrefix(r.Header.Get(header), "Bearer "))
			}))
			defer up.Close()
			p := New(time.Second, nil)
			defer p.CloseIdle()
			rec := httptest.NewRecorder()
			v := token
			if header == "Authorization" {
				v = "Bearer " + token
			}
			o := p.Do(context.Background(), rec, &Call{URL: mustURL(t, up.URL), Header: Headers("", false), Body: []byte(`{}`), Start: time.Now(), Sign: tokenSigner{header, v}})
			if o.Status != http.StatusBadRequest || strings.Contains(rec.Body.String(), "secret-vertex-token") || !strings.Contains(rec.Body.String(), redacted) {
				t.Errorf("status %d, client got %s", o.Status, rec.Body.String())
			}
		})
	}
}
