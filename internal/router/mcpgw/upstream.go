package mcpgw

// One upstream MCP server: its connection, kept up with backoff; its
// tools and prompts, listed under its name and taken off the list while
// it is down; and its ejection after calls that time out in a row.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Bounds on what a server may list, so that one server's list cannot
// grow the gateway's or a client's without end. A tool's description is
// passed to clients as data, cut at maxDescription bytes; a tool whose
// schemas take more than maxSchema bytes is left out.
const (
	maxListed      = 1000
	maxPages       = 50
	maxDescription = 4 << 10
	maxSchema      = 64 << 10
)

// Reconnecting: the first retry after minBackoff, doubling to maxBackoff.
const (
	minBackoff = 500 * time.Millisecond
	maxBackoff = 30 * time.Second
)

// A connected server is pinged every pingEvery, and closed after
// pingFailures pings in a row go unanswered: a dead server leaves the
// list within about a minute and a half even while no call is made to it.
const (
	pingEvery    = 30 * time.Second
	pingFailures = 3
)

// ejectAfter is how many calls in a row may time out before the server is
// taken off the list and connected again: one slow tool is the tool's,
// three in a row are the server's.
const ejectAfter = 3

type upstream struct {
	g      *Gateway
	cfg    Server
	cancel context.CancelFunc
	done   chan struct{} // closed once run has returned

	mu        sync.Mutex         // protects the fields below
	sess      *mcp.ClientSession // nil while down
	tools     []string           // the names listed for it, namespaced
	prompts   []string
	resources []string // the URIs it lists, each listed by it alone
	timeouts  int      // calls timed out in a row
}

// start connects to s, and keeps connecting until the upstream is closed.
func (g *Gateway) start(s Server) *upstream {
	if s.Timeout <= 0 {
		s.Timeout = DefaultTimeout
	}
	ctx, cancel := context.WithCancel(g.ctx)
	u := &upstream{g: g, cfg: s, cancel: cancel, done: make(chan struct{})}
	go u.run(ctx)
	return u
}

// close stops the upstream, takes its tools off the list and waits for it.
func (u *upstream) close() {
	u.cancel()
	<-u.done
}

func (u *upstream) run(ctx context.Context) {
	defer close(u.done)
	backoff := minBackoff
	for ctx.Err() == nil {
		sess, err := u.connect(ctx)
		if err == nil {
			u.g.log.Info("mcp server connected", "server", u.cfg.Name)
			backoff = minBackoff
			u.setSession(sess)
			u.refresh(ctx, sess)
			stop := context.AfterFunc(ctx, func() { sess.Close() })
			sess.Wait()
			stop()
			u.setSession(nil)
			u.unlist()
			if ctx.Err() != nil {
				return
			}
			u.g.log.Warn("mcp server went away", "server", u.cfg.Name)
		} else if ctx.Err() == nil {
			u.g.log.Warn("connecting to an mcp server", "server", u.cfg.Name, "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// connect opens a session with the server, within its timeout.
func (u *upstream) connect(ctx context.Context) (*mcp.ClientSession, error) {
	var t mcp.Transport
	if u.cfg.URL != "" {
		t = &mcp.StreamableClientTransport{
			Endpoint:   u.cfg.URL,
			HTTPClient: &http.Client{Transport: &headers{set: u.cfg.Headers, identity: u.cfg.IdentityHeader}},
			MaxRetries: -1,
		}
	} else {
		cmd := exec.CommandContext(ctx, u.cfg.Command[0], u.cfg.Command[1:]...)
		cmd.Env = u.cfg.Env
		if cmd.Env == nil {
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
		}
		t = &mcp.CommandTransport{Command: cmd}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "llmgw", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler:   func(context.Context, *mcp.ToolListChangedRequest) { u.relist() },
		PromptListChangedHandler: func(context.Context, *mcp.PromptListChangedRequest) { u.relist() },
		// Health: a server that misses pingFailures pings in a row is
		// taken as gone, its tools off the list until it is connected
		// again.
		KeepAlive:                 pingEvery,
		KeepAliveFailureThreshold: pingFailures,
	})
	cctx, cancel := context.WithTimeout(ctx, u.cfg.Timeout)
	defer cancel()
	return c.Connect(cctx, t, nil)
}

func (u *upstream) setSession(s *mcp.ClientSession) {
	u.mu.Lock()
	u.sess, u.timeouts = s, 0
	u.mu.Unlock()
}

func (u *upstream) session() *mcp.ClientSession {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.sess
}

func (u *upstream) status() Status {
	u.mu.Lock()
	defer u.mu.Unlock()
	return Status{Name: u.cfg.Name, Up: u.sess != nil, Tools: len(u.tools)}
}

// relist lists the server's tools and prompts again, as it said they
// changed.
func (u *upstream) relist() {
	if s := u.session(); s != nil {
		go u.refresh(u.g.ctx, s)
	}
}

// refresh lists what sess offers and puts it on the gateway's list under
// the server's name, in place of what was there.
func (u *upstream) refresh(ctx context.Context, sess *mcp.ClientSession) {
	ctx, cancel := context.WithTimeout(ctx, u.cfg.Timeout)
	defer cancel()
	var tools []*mcp.Tool
	if init := sess.InitializeResult(); init != nil && init.Capabilities != nil && init.Capabilities.Tools != nil {
		tools = u.listTools(ctx, sess)
	}
	var prompts []*mcp.Prompt
	if init := sess.InitializeResult(); init != nil && init.Capabilities != nil && init.Capabilities.Prompts != nil {
		prompts = u.listPrompts(ctx, sess)
	}
	var resources []*mcp.Resource
	if init := sess.InitializeResult(); init != nil && init.Capabilities != nil && init.Capabilities.Resources != nil {
		resources = u.listResources(ctx, sess)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.sess != sess {
		return // gone since
	}
	srv := u.g.srv
	srv.RemoveTools(u.tools...)
	srv.RemovePrompts(u.prompts...)
	old := u.tools
	u.tools, u.prompts = nil, nil
	for _, t := range tools {
		name := u.cfg.Name + Separator + t.Name
		srv.AddTool(bounded(t, name), u.callTool(t.Name))
		u.tools = append(u.tools, name)
	}
	for _, p := range prompts {
		name := u.cfg.Name + Separator + p.Name
		q := *p
		q.Name, q.Description = name, cut(p.Description, maxDescription)
		srv.AddPrompt(&q, u.getPrompt(p.Name))
		u.prompts = append(u.prompts, name)
	}
	u.g.setListed(u.cfg.Name, old, u.tools)
	u.listResourcesOn(srv, resources)
}

// unlist takes the server's tools and prompts off the gateway's list.
func (u *upstream) unlist() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.g.srv.RemoveTools(u.tools...)
	u.g.srv.RemovePrompts(u.prompts...)
	u.g.setListed(u.cfg.Name, u.tools, nil)
	u.listResourcesOn(u.g.srv, nil)
	u.tools, u.prompts = nil, nil
}

func (u *upstream) listTools(ctx context.Context, sess *mcp.ClientSession) []*mcp.Tool {
	var all []*mcp.Tool
	p := &mcp.ListToolsParams{}
	for range maxPages {
		res, err := sess.ListTools(ctx, p)
		if err != nil {
			u.g.log.Warn("listing an mcp server's tools", "server", u.cfg.Name, "err", err)
			break
		}
		for _, t := range res.Tools {
			if len(all) < maxListed && fits(t) {
				all = append(all, t)
			}
		}
		if res.NextCursor == "" || len(all) >= maxListed {
			break
		}
		p.Cursor = res.NextCursor
	}
	return all
}

func (u *upstream) listPrompts(ctx context.Context, sess *mcp.ClientSession) []*mcp.Prompt {
	var all []*mcp.Prompt
	p := &mcp.ListPromptsParams{}
	for range maxPages {
		res, err := sess.ListPrompts(ctx, p)
		if err != nil {
			u.g.log.Warn("listing an mcp server's prompts", "server", u.cfg.Name, "err", err)
			break
		}
		for _, q := range res.Prompts {
			if len(all) < maxListed && q != nil && q.Name != "" {
				all = append(all, q)
			}
		}
		if res.NextCursor == "" || len(all) >= maxListed {
			break
		}
		p.Cursor = res.NextCursor
	}
	return all
}

// fits reports whether t has a name and its schemas are within maxSchema
// bytes, an input schema for an object among them.
func fits(t *mcp.Tool) bool {
	if t == nil || t.Name == "" {
		return false
	}
	in, err := json.Marshal(t.InputSchema)
	if err != nil || len(in) > maxSchema {
		return false
	}
	var obj struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(in, &obj) != nil || obj.Type != "object" {
		return false
	}
	out, err := json.Marshal(t.OutputSchema)
	return err == nil && len(in)+len(out) <= maxSchema
}

// bounded is t as the gateway lists it: under name, its description cut.
func bounded(t *mcp.Tool, name string) *mcp.Tool {
	c := *t
	c.Name = name
	c.Description = cut(t.Description, maxDescription)
	return &c
}

// cut is s, at most n bytes of it, cut at a character's start.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// noted counts a call's end toward ejection: a timeout in a row of
// ejectAfter closes the session, which takes its tools off the list until
// it is connected again; any other end resets the count.
func (u *upstream) noted(sess *mcp.ClientSession, err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.sess != sess {
		return
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		u.timeouts = 0
		return
	}
	if u.timeouts++; u.timeouts >= ejectAfter {
		u.g.log.Warn("mcp server ejected: its calls time out", "server", u.cfg.Name, "in_a_row", u.timeouts)
		u.timeouts = 0
		go sess.Close()
	}
}

// headers sets a server's configured headers, and the caller's identity,
// on each request to it.
type headers struct {
	set      http.Header
	identity string // the header name; empty for none
}

func (h *headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.set {
		r.Header[k] = v
	}
	if h.identity != "" {
		if id, ok := r.Context().Value(identity{}).(string); ok {
			r.Header.Set(h.identity, id)
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

// identity is the context key a tool call carries its caller's identity
// under, for a server's IdentityHeader.
type identity struct{}
