// Package epp is llmgw as an Endpoint Picker: the Gateway API Inference
// Extension's protocol (proposal 004, v1) over Envoy's ext_proc, which a
// proxy in front (Envoy Gateway, kgateway, agentgateway, GKE's gateway)
// asks which endpoint serves each request. The request's steps are the
// router's (Router.Pick); this package reads and writes the protocol's
// messages, and its gRPC health.
package epp

import (
	"log/slog"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"gitea.mynodes.xyz/ilker/llmgw/internal/router"
)

// The protocol's names are extproc's: the same on both sides.

// Health services answered SERVING while the EPP serves: the protocol's
// two, and the ext_proc service's own name.
var healthServices = []string{"liveness", "readiness", extprocv3.ExternalProcessor_ServiceDesc.ServiceName}

// Options is what an EPP is built from.
type Options struct {
	// Router picks the endpoints and accounts for each request.
	Router *router.Router
	// MaxBodyBytes is the largest request body taken, as the gateway's
	// server.max_body_bytes; a larger one is answered 413.
	MaxBodyBytes int64
	// BodyTimeout bounds a request's body, from its headers to its last
	// chunk; a slower one is answered 408.
	BodyTimeout time.Duration
	// Fallbacks is how many endpoints to name after the pick.
	Fallbacks int
	Logger    *slog.Logger
}

// Server serves ext_proc's Process as an Endpoint Picker.
type Server struct {
	extprocv3.UnimplementedExternalProcessorServer
	opts   Options
	health *health.Server
}

var _ extprocv3.ExternalProcessorServer = (*Server)(nil)

// New is an EPP over opts.Router.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Server{opts: opts, health: health.NewServer()}
}

// Register serves s and its health on g, every health service SERVING.
func (s *Server) Register(g *grpc.Server) {
	extprocv3.RegisterExternalProcessorServer(g, s)
	healthpb.RegisterHealthServer(g, s.health)
	for _, name := range healthServices {
		s.health.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
	}
}

// Drain answers NOT_SERVING on every health service from now on, so that
// the proxy stops sending while the streams in flight end.
func (s *Server) Drain() { s.health.Shutdown() }
