package h1

// The servers llmgw opens its listeners with, each held to Deadlines: the
// API listener's (this package's server, or net/http's), the admin
// listener's and the simulator's, and the gRPC server of the Endpoint Picker's. internal/arch's test fails on a server
// made anywhere else, so that none goes without its deadlines.

import (
	"fmt"
	"net/http"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// Deadlines bound how long a client may take over what it sends, on every
// listener llmgw opens. None may be zero.
type Deadlines struct {
	// Header bounds a request's line and headers, from its first byte.
	Header time.Duration
	// Body bounds a request's body, from the end of its headers to its
	// last byte; a read of the body past it fails with a timeout (an
	// os.ErrDeadlineExceeded), which the handler answers, and the
	// connection closes after the answer. Once the body is read the
	// deadline bounds nothing, so that a long answer is not bounded by
	// it. A handler may set a deadline of its own in its place through
	// http.ResponseController. It is the only deadline on a body: the
	// router sets none of its own.
	Body time.Duration
	// Idle bounds the wait for the next request on a kept-alive
	// connection.
	Idle time.Duration
}

// check panics on a deadline left out: a server without one is a
// mistake in llmgw, never a configuration.
func (d Deadlines) check() {
	if d.Header <= 0 || d.Body <= 0 || d.Idle <= 0 {
		panic(fmt.Sprintf("h1: a server needs every deadline, got %+v", d))
	}
}

// NewServer is this package's server of h, held to d.
func NewServer(h http.Handler, d Deadlines) *Server {
	d.check()
	return &Server{Handler: h, ReadHeaderTimeout: d.Header, BodyTimeout: d.Body, IdleTimeout: d.Idle}
}

// NewStdServer is net/http's server of h, held to d. net/http has no
// deadline on a body alone (its ReadTimeout counts from a request's first
// byte, headers and all), so each request with a body is handed to h
// with a read deadline d.Body from the end of its headers, set through
// http.ResponseController. net/http lifts it once the body is read, as it
// begins to watch for the client leaving, so that a long answer (a
// profile taken for its seconds, a stream) is not bounded by it.
func NewStdServer(h http.Handler, d Deadlines) *http.Server {
	d.check()
	return &http.Server{Handler: bodyDeadline{next: h, d: d.Body}, ReadHeaderTimeout: d.Header, IdleTimeout: d.Idle}
}

// bodyDeadline serves next with a deadline d on reading each request's
// body.
type bodyDeadline struct {
	next http.Handler
	d    time.Duration
}

func (h bodyDeadline) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Body != nil && r.Body != http.NoBody {
		http.NewResponseController(w).SetReadDeadline(time.Now().Add(h.d))
	}
	h.next.ServeHTTP(w, r)
}

// GRPC bounds a gRPC listener: its deadlines, and the largest message it
// takes or sends.
type GRPC struct {
	Deadlines
	// MaxMessage is the largest message, in bytes, a stream may carry
	// either way; a larger one fails the stream with ResourceExhausted.
	MaxMessage int
}

// grpcPingMin is the least time between a client's keepalive pings that
// a gRPC listener accepts; a client that pings more often is closed.
const grpcPingMin = 5 * time.Second

// NewGRPCServer is a gRPC server held to g: a connection's handshake to
// g.Header, an idle connection closed after g.Idle, a silent one (no
// answer to a keepalive ping within g.Header) closed, keepalive pings no
// more often than every grpcPingMin, and messages to g.MaxMessage. A
// stream's own messages are held to g.Body by its handler.
func NewGRPCServer(g GRPC, opts ...grpc.ServerOption) *grpc.Server {
	g.check()
	if g.MaxMessage <= 0 {
		panic(fmt.Sprintf("h1: a gRPC server needs a message bound, got %d", g.MaxMessage))
	}
	return grpc.NewServer(append([]grpc.ServerOption{
		grpc.ConnectionTimeout(g.Header),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: g.Idle, Time: g.Idle, Timeout: g.Header}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: grpcPingMin, PermitWithoutStream: true}),
		grpc.MaxRecvMsgSize(g.MaxMessage),
		grpc.MaxSendMsgSize(g.MaxMessage),
	}, opts...)...)
}
