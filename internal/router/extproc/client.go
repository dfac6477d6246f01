// Package extproc is the Gateway API Inference Extension's Endpoint
// Picker protocol (proposal 004, v1) over Envoy's ext_proc, from the
// proxy's side: a pool of policy epp asks an EPP — llm-d's, or another
// llmgw's epp listener — for each request's endpoints. The names of the
// protocol, which llmgw's own EPP (internal/router/epp) answers with, are
// here too.
package extproc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"
)

// The protocol's names: the headers a proxy sends and the EPP answers
// with, and the metadata namespaces they travel in.
const (
	// DestinationHeader holds the endpoints picked, host:port, the pick
	// first and its fallbacks after; the same value goes in the dynamic
	// metadata's DestinationNamespace.
	DestinationHeader    = "x-gateway-destination-endpoint"
	DestinationNamespace = "envoy.lb"
	// SubsetKey holds, in the request's metadata under SubsetNamespace,
	// the host:port of the endpoints the proxy may send to.
	SubsetKey       = "x-gateway-destination-endpoint-subset"
	SubsetNamespace = "envoy.lb.subset_hint"
	// ServedKey holds, in the response's metadata under
	// DestinationNamespace, the endpoint the proxy sent the request to.
	ServedKey = "x-gateway-destination-endpoint-served"
	// ObjectiveHeader names the request's objective; FairnessHeader the
	// tenant whose share of a queue it takes; RewriteHeader the model it
	// is served as.
	ObjectiveHeader = "x-gateway-inference-objective"
	FairnessHeader  = "x-gateway-inference-fairness-id"
	RewriteHeader   = "x-gateway-model-name-rewrite"
)

// maxMessage bounds a message from an EPP: a body rewritten, at most the
// request's own size and a little.
const maxMessage = 64 << 20

// Client asks one EPP. It is safe for concurrent use; its connection is
// made on the first ask, and made again when it breaks, until Retire.
type Client struct {
	conn *grpc.ClientConn
	epp  extprocv3.ExternalProcessorClient

	mu      sync.Mutex
	open    int  // asks under way and answers not yet Done
	retired bool // no more asks; the connection closes once open is 0
}

// Dial is a Client of the EPP at addr, host:port: over TLS when tlsOn,
// without checking the certificate, which an EPP makes and signs itself;
// else in plain text. It connects lazily: a bad address fails here, a
// down EPP at the first Ask.
func Dial(addr string, tlsOn bool) (*Client, error) {
	creds := insecure.NewCredentials()
	if tlsOn {
		creds = credentials.NewTLS(&tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12})
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessage)))
	if err != nil {
		return nil, fmt.Errorf("epp %s: %w", addr, err)
	}
	return &Client{conn: conn, epp: extprocv3.NewExternalProcessorClient(conn)}, nil
}

// Close closes the client's connection.
func (c *Client) Close() error { return c.conn.Close() }

// ErrRetired is the answer of a Client that was retired.
var ErrRetired = errors.New("the EPP's connection was retired")

// Retire ends c: it asks no more, and its connection closes once every
// ask under way has ended and every Answer it gave is Done.
func (c *Client) Retire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.retired {
		return
	}
	c.retired = true
	if c.open == 0 {
		c.conn.Close()
	}
}

// hold counts an ask or answer against c's connection; false when c was
// retired.
func (c *Client) hold() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.retired {
		return false
	}
	c.open++
	return true
}

// release ends a hold, closing a retired client's connection at the last.
func (c *Client) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open--; c.open == 0 && c.retired {
		c.conn.Close()
	}
}

// Request is what the EPP is told of a request.
type Request struct {
	Path   string      // the API's path, such as /v1/chat/completions
	Header http.Header // headers to send it: the objective, the fairness id
	Body   []byte
	// Dropped counts the pieces of the answer's body the EPP was not
	// told, being behind or gone; nil counts none.
	Dropped Counter
}

// Answer is the EPP's pick.
type Answer struct {
	// Endpoints are host:port, the pick first and its fallbacks after.
	Endpoints []string
	// Header holds the headers the EPP set for the server, but for the
	// destination, content-length and pseudo-headers.
	Header http.Header
	// Body is the body the EPP rewrote, or the request's own.
	Body []byte

	st     extprocv3.ExternalProcessor_ProcessClient
	cancel context.CancelFunc // ends the stream
	c      *Client            // released when the stream has ended

	// The answer's phase (respond.go).
	grace   time.Duration // how long the EPP has to take the end after Done
	dropped Counter       // counts the pieces it was not told; nil for none
	q       chan *extprocv3.ProcessingRequest
	replies chan struct{} // closed when the EPP's replies have ended

	mu      sync.Mutex  // protects the fields below, and sends on q
	queued  int         // body bytes in q
	told    bool        // an answer's headers are in q: its body is the one told
	ended   bool        // end_of_stream is in q
	lagging bool        // a piece was dropped: so is the rest of the body
	closed  bool        // Done was called, and q closed
	gone    bool        // the stream has ended: nothing more is sent
	late    *time.Timer // ends the stream grace after Done
}

// Refusal is the EPP's immediate answer: a status and body for the
// client, such as 429 when it shed the request, 503 when it found no
// endpoint.
type Refusal struct {
	Status int
	Body   []byte
	// RetryAfter is its Retry-After header, in seconds; zero for none.
	RetryAfter int
}

func (r *Refusal) Error() string { return fmt.Sprintf("the EPP refused the request with %d", r.Status) }

// ErrNoAnswer wraps a failure to hear the EPP's pick: down, late, or an
// answer that is no pick.
var ErrNoAnswer = errors.New("no answer from the EPP")

// Ask asks the EPP where req goes, waiting for its answer until ctx ends
// or timeout has passed. The error is a *Refusal when the EPP refused the
// request, and wraps ErrNoAnswer when it gave no pick. An Answer holds
// the stream open for the answer's phase: its Tap tells the EPP the
// answer as it comes, and its Done, which must be called, the call's end.
func (c *Client) Ask(ctx context.Context, req Request, timeout time.Duration) (*Answer, error) {
	if !c.hold() {
		return nil, fmt.Errorf("%w: %w", ErrNoAnswer, ErrRetired)
	}
	// The stream outlives the request's context, to its Done; until the
	// answer, it ends with that context or the timeout.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	left := context.AfterFunc(ctx, cancel)
	late := time.AfterFunc(timeout, cancel)
	a, err := c.ask(sctx, req)
	left()
	if !late.Stop() {
		var refused *Refusal
		if !errors.As(err, &refused) {
			err = fmt.Errorf("%w: not within %s", ErrNoAnswer, timeout)
		}
	}
	if err != nil {
		cancel()
		c.release()
		return nil, err
	}
	a.cancel, a.c = cancel, c
	a.startResponse(timeout, req.Dropped)
	return a, nil
}

func (c *Client) ask(ctx context.Context, req Request) (*Answer, error) {
	st, err := c.epp.Process(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoAnswer, err)
	}
	if err := st.Send(requestHeaders(req)); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoAnswer, err)
	}
	body := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{Body: req.Body, EndOfStream: true}}}
	if err := st.Send(body); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoAnswer, err)
	}
	a, err := readAnswer(st, req.Body)
	if err != nil {
		return nil, err
	}
	a.st = st
	return a, nil
}

// requestHeaders is req's headers message, as a proxy sends it.
func requestHeaders(req Request) *extprocv3.ProcessingRequest {
	hs := []*corev3.HeaderValue{
		{Key: ":method", RawValue: []byte(http.MethodPost)},
		{Key: ":path", RawValue: []byte(req.Path)},
		{Key: "content-type", RawValue: []byte("application/json")},
		{Key: "content-length", RawValue: strconv.AppendInt(nil, int64(len(req.Body)), 10)},
	}
	for k, vs := range req.Header {
		for _, v := range vs {
			hs = append(hs, &corev3.HeaderValue{Key: strings.ToLower(k), RawValue: []byte(v)})
		}
	}
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{Headers: &corev3.HeaderMap{Headers: hs}}}}
}

// readAnswer reads the EPP's answers to the request phase: the headers',
// then the body's, or an immediate answer.
func readAnswer(st extprocv3.ExternalProcessor_ProcessClient, body []byte) (*Answer, error) {
	a := &Answer{Header: http.Header{}, Body: body}
	var rewritten []byte
	rewrote := false
	for {
		m, err := st.Recv()
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNoAnswer, err)
		}
		switch r := m.Response.(type) {
		case *extprocv3.ProcessingResponse_ImmediateResponse:
			return nil, refusal(r.ImmediateResponse)
		case *extprocv3.ProcessingResponse_RequestHeaders:
			a.read(r.RequestHeaders.GetResponse().GetHeaderMutation(), m.DynamicMetadata)
		case *extprocv3.ProcessingResponse_RequestBody:
			cr := r.RequestBody.GetResponse()
			switch mu := cr.GetBodyMutation().GetMutation().(type) {
			case *extprocv3.BodyMutation_StreamedResponse:
				rewritten, rewrote = append(rewritten, mu.StreamedResponse.Body...), true
				if !mu.StreamedResponse.EndOfStream {
					continue
				}
			case *extprocv3.BodyMutation_Body:
				rewritten, rewrote = mu.Body, true
			}
			if rewrote {
				a.Body = rewritten
			}
			if len(a.Endpoints) == 0 {
				return nil, fmt.Errorf("%w: it named no endpoint", ErrNoAnswer)
			}
			return a, nil
		}
	}
}

// read takes the endpoints and headers from the headers' answer and its
// metadata: the header's destination, else the metadata's.
func (a *Answer) read(mu *extprocv3.HeaderMutation, md *structpb.Struct) {
	dest := ""
	for _, o := range mu.GetSetHeaders() {
		h := o.GetHeader()
		v := string(h.GetRawValue())
		if v == "" {
			v = h.GetValue()
		}
		switch k := strings.ToLower(h.GetKey()); {
		case k == DestinationHeader:
			dest = v
		case k == "content-length", strings.HasPrefix(k, ":"):
			// The body's length is the call's own; a pseudo-header
			// (llm-d's EPP sets :path and :method) is no header of an
			// HTTP/1.1 request.
		default:
			a.Header.Set(k, v)
		}
	}
	if dest == "" {
		dest = md.GetFields()[DestinationNamespace].GetStructValue().GetFields()[DestinationHeader].GetStringValue()
	}
	for _, e := range strings.Split(dest, ",") {
		if e = strings.TrimSpace(e); e != "" {
			a.Endpoints = append(a.Endpoints, e)
		}
	}
}

// refusal is an immediate answer as a Refusal.
func refusal(r *extprocv3.ImmediateResponse) *Refusal {
	f := &Refusal{Status: int(r.GetStatus().GetCode()), Body: r.GetBody()}
	if f.Status == 0 {
		f.Status = http.StatusInternalServerError
	}
	for _, o := range r.GetHeaders().GetSetHeaders() {
		if strings.EqualFold(o.GetHeader().GetKey(), "retry-after") {
			v := string(o.GetHeader().GetRawValue())
			if v == "" {
				v = o.GetHeader().GetValue()
			}
			f.RetryAfter, _ = strconv.Atoi(v)
		}
	}
	return f
}
