// Package mcpgw is llmgw's MCP gateway: /mcp on the API listener, MCP's
// Streamable HTTP transport in front of the configured MCP servers, whose
// tools and prompts it lists under the server's name ("github__create_issue").
// The router authenticates each request with the gateway's keys before it
// reaches this package; a session opened with one key answers no other.
package mcpgw

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
)

// Server is one upstream MCP server as the wiring resolved it from the
// configuration: reached at URL over Streamable HTTP, or started from
// Command and spoken to over stdio. Exactly one of URL and Command is set.
type Server struct {
	Name    string
	URL     string
	Command []string
	// Env is the command's environment, "NAME=value" pairs, its
	// credentials among them; nil gives it PATH and HOME alone.
	Env []string
	// Headers go with every request to URL, credentials among them; they
	// are never shown to a client or logged.
	Headers http.Header
	// IdentityHeader, when set, names the header each tool call carries
	// the calling key's id and tenant in ("key_id tenant/path").
	IdentityHeader string
	// Timeout bounds one call to the server; zero means DefaultTimeout.
	Timeout time.Duration
}

// DefaultTimeout bounds a call to a server that sets no timeout of its
// own: long enough for a tool that searches or builds, short enough that
// a stalled server frees its caller within a client's patience.
const DefaultTimeout = 60 * time.Second

// Separator joins a server's name and its tool's or prompt's name.
const Separator = "__"

// Options bound the gateway's sessions.
type Options struct {
	// MaxBodyBytes is the largest request body read, as for the model
	// APIs; a larger one gets 413.
	MaxBodyBytes int64
	// SessionTimeout closes a session idle for this long; zero means
	// DefaultSessionTimeout.
	SessionTimeout time.Duration
	// Limits takes each tool call from the key's and its tenant levels'
	// tool_rpm; nil limits nothing.
	Limits Limiter
	// TenantLimits gives the limits set on each level of a tenant path,
	// outermost first; nil means none.
	TenantLimits func(path string) []tenant.TenantLimits
	Logger       *slog.Logger
}

// DefaultSessionTimeout closes a session no request has used for this
// long, so that clients that go without a DELETE hold nothing for ever.
const DefaultSessionTimeout = 30 * time.Minute

// Gateway aggregates the upstream servers behind one MCP server. Set
// changes the servers; Close stops them.
type Gateway struct {
	opts    Options
	log     *slog.Logger
	srv     *mcp.Server
	handler http.Handler
	ctx     context.Context // every upstream's, ended by Close
	stop    context.CancelFunc

	mu  sync.Mutex           // protects ups
	ups map[string]*upstream // key: server name

	lmu       sync.Mutex          // protects listed and resources
	listed    map[string]string   // key: a tool as listed; value: its server
	resources map[string]resource // key: a resource's URI

	obs atomic.Pointer[Observers] // nil until the router sets them
}

// New makes a gateway with no servers.
func New(opts Options) *Gateway {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.SessionTimeout <= 0 {
		opts.SessionTimeout = DefaultSessionTimeout
	}
	g := &Gateway{opts: opts, log: opts.Logger, ups: map[string]*upstream{}, listed: map[string]string{}, resources: map[string]resource{}}
	g.ctx, g.stop = context.WithCancel(context.Background())
	g.srv = mcp.NewServer(&mcp.Implementation{Name: "llmgw", Version: "1"}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{
			Tools:     &mcp.ToolCapabilities{ListChanged: true},
			Prompts:   &mcp.PromptCapabilities{ListChanged: true},
			Resources: &mcp.ResourceCapabilities{ListChanged: true},
		},
	})
	g.srv.AddReceivingMiddleware(g.govern)
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.srv }, &mcp.StreamableHTTPOptions{
		MaxRequestBodyBytes: opts.MaxBodyBytes,
		SessionTimeout:      opts.SessionTimeout,
	})
	// The router has authenticated the request already: the verifier
	// reads the key it put in the context, and the SDK binds each session
	// to the key id that opened it (403 to any other).
	g.handler = auth.RequireBearerToken(func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
		info, _ := ctx.Value(keyInfo{}).(*auth.TokenInfo)
		if info == nil {
			return nil, auth.ErrInvalidToken
		}
		return info, nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(sdk)
	return g
}

// keyInfo is the context key under which ServeHTTP hands the request's
// key, as a TokenInfo, to the bearer-token check.
type keyInfo struct{}

// ServeHTTP answers /mcp for key, which the router has authenticated; a
// nil key (a gateway without keys) may use every tool and binds no
// session.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, hr *http.Request, key *tenant.Key) {
	info := &auth.TokenInfo{Extra: map[string]any{"key": key}}
	if key != nil {
		info.UserID = key.ID
		info.Expiration = key.Expires
	}
	// The SDK reads a bearer token, and a client may have sent its key as
	// x-api-key: what it finds stands for the key already checked.
	hr.Header.Set("Authorization", "Bearer checked")
	hr = hr.WithContext(context.WithValue(hr.Context(), keyInfo{}, info))
	g.handler.ServeHTTP(w, hr)
}

// keyOf is the key a request to the MCP server came with; nil without
// authentication.
func keyOf(req mcp.Request) *tenant.Key {
	extra := req.GetExtra()
	if extra == nil || extra.TokenInfo == nil {
		return nil
	}
	k, _ := extra.TokenInfo.Extra["key"].(*tenant.Key)
	return k
}

// Set makes servers the gateway's upstreams: a server new or changed is
// (re)connected, one gone is closed and its tools taken off the list.
func (g *Gateway) Set(servers []Server) {
	g.mu.Lock()
	defer g.mu.Unlock()
	keep := map[string]bool{}
	for _, s := range servers {
		keep[s.Name] = true
		if u := g.ups[s.Name]; u != nil && sameServer(u.cfg, s) {
			continue
		} else if u != nil {
			u.close()
		}
		g.ups[s.Name] = g.start(s)
	}
	for name, u := range g.ups {
		if !keep[name] {
			u.close()
			delete(g.ups, name)
		}
	}
}

// sameServer reports whether a and b configure the same server.
func sameServer(a, b Server) bool {
	return a.Name == b.Name && a.URL == b.URL && slices.Equal(a.Command, b.Command) &&
		slices.Equal(a.Env, b.Env) && a.IdentityHeader == b.IdentityHeader && a.Timeout == b.Timeout &&
		headersEqual(a.Headers, b.Headers)
}

func headersEqual(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// Close stops every upstream and ends every session.
func (g *Gateway) Close() {
	g.stop()
	g.mu.Lock()
	defer g.mu.Unlock()
	for name, u := range g.ups {
		u.close()
		delete(g.ups, name)
	}
}

// Status is one upstream server's state, as values.
type Status struct {
	Name  string
	Up    bool
	Tools int
}

// Status is every upstream's state, by name.
func (g *Gateway) Status() []Status {
	g.mu.Lock()
	defer g.mu.Unlock()
	var st []Status
	for _, u := range g.ups {
		st = append(st, u.status())
	}
	slices.SortFunc(st, func(a, b Status) int {
		if a.Name < b.Name {
			return -1
		}
		return 1
	})
	return st
}
