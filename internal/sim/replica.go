// A replica on a real listener: Start serves one Server on an address,
// StartReplicas several on consecutive ports. The Refuse fault closes the
// listener and turning it off opens it again on the same address.

package sim

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/h1"
)

// replicaDeadlines bound what a client may take over its requests: their
// headers and bodies, as the gateway's API listener does by default, and
// the wait for the next request on a kept-alive connection, longer than
// the 90 s after which the gateway closes an idle upstream connection
// itself.
var replicaDeadlines = h1.Deadlines{Header: 10 * time.Second, Body: 30 * time.Second, Idle: 2 * time.Minute}

// Replica is a Server listening on an address.
type Replica struct {
	srv  *Server
	hs   *http.Server
	addr string // host:port actually bound

	mu        sync.Mutex // protects ln, closed, listenErr
	ln        net.Listener
	closed    bool
	listenErr error // why the listener could not be reopened after Refuse, if it could not

	serving   sync.WaitGroup // Serve calls
	closeOnce sync.Once
	done      chan struct{} // closed by Close
}

// Start serves a new replica of cfg on addr ("127.0.0.1:0" picks a free
// port) until ctx ends or Close is called.
func Start(ctx context.Context, cfg Config, addr string) (*Replica, error) {
	return startWithin(ctx, cfg, addr, replicaDeadlines)
}

// startWithin is Start with the server's deadlines d.
func startWithin(ctx context.Context, cfg Config, addr string, d h1.Deadlines) (*Replica, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("sim: listen on %s: %w", addr, err)
	}
	r := &Replica{
		srv:  New(cfg),
		addr: ln.Addr().String(),
		done: make(chan struct{}),
	}
	r.hs = h1.NewStdServer(r.srv, d)
	if cfg.Logger != nil {
		r.hs.ErrorLog = slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn)
	}
	r.mu.Lock()
	r.ln = ln
	r.serve(ln)
	r.mu.Unlock()
	r.srv.setOnRefuse(r.setRefuse)
	go func() {
		select {
		case <-ctx.Done():
			r.Close()
		case <-r.done:
		}
	}()
	return r, nil
}

// StartReplicas starts n replicas of cfg. When firstAddr names a port the
// replicas take it and the n-1 ports after it; with port 0 each gets a
// free port. On error none is left running.
func StartReplicas(ctx context.Context, cfg Config, n int, firstAddr string) ([]*Replica, error) {
	host, portStr, err := net.SplitHostPort(firstAddr)
	if err != nil {
		return nil, fmt.Errorf("sim: address %q: %w", firstAddr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("sim: address %q: port: %w", firstAddr, err)
	}
	var rs []*Replica
	for i := range n {
		addr := firstAddr
		if port != 0 {
			addr = net.JoinHostPort(host, strconv.Itoa(port+i))
		}
		r, err := Start(ctx, cfg, addr)
		if err != nil {
			for _, r := range rs {
				r.Close()
			}
			return nil, err
		}
		rs = append(rs, r)
	}
	return rs, nil
}

// serve runs the HTTP server on ln. r.mu must be held.
func (r *Replica) serve(ln net.Listener) {
	r.serving.Add(1)
	go func() {
		defer r.serving.Done()
		r.hs.Serve(ln) // returns when ln is closed
	}()
}

// setRefuse closes the listener, or opens it again on the same address.
func (r *Replica) setRefuse(refuse bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	switch {
	case refuse && r.ln != nil:
		r.ln.Close()
		r.ln = nil
	case !refuse && r.ln == nil:
		ln, err := net.Listen("tcp", r.addr)
		if err != nil {
			r.listenErr = err
			return
		}
		r.listenErr = nil
		r.ln = ln
		r.serve(ln)
	}
}

// URL is the replica's OpenAI base URL, ending in /v1.
func (r *Replica) URL() string { return "http://" + r.addr + "/v1" }

// Addr is the host:port the replica listens on.
func (r *Replica) Addr() string { return r.addr }

// Server is the replica's handler, for its faults and model.
func (r *Replica) Server() *Server { return r.srv }

// ListenErr is why the listener could not be reopened after the Refuse
// fault was turned off, or nil.
func (r *Replica) ListenErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.listenErr
}

// Close stops the replica at once: the listener, open connections and the
// step loop. It is safe to call more than once.
func (r *Replica) Close() {
	r.closeOnce.Do(func() {
		r.mu.Lock()
		r.closed = true
		r.mu.Unlock()
		close(r.done)
		r.hs.Close()
		r.serving.Wait()
		r.srv.Close()
	})
}

// Kill crashes the replica: its listener and every open connection close
// at once, so streams in flight break off without an end and new
// connections are refused, and it stays down. It is Close, named for what
// a fault schedule means by it.
func (r *Replica) Kill() { r.Close() }

// Speed is the replica's speed factor, 1 unless its Config said otherwise.
func (r *Replica) Speed() float64 { return r.srv.cfg.Speed }
