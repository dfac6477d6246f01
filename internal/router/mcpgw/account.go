package mcpgw

// Every tool call accounted once: a tools/call becomes one
// observe.ToolCall, however it ended (refused, limited, answered, timed
// out), handed to the observers the router gave; its execute_tool span
// starts as it arrives.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/observe"
)

// Observers are what reads each tool call once it has ended.
type Observers struct {
	List observe.ToolObservers
	// Tracing starts each call's span; nil when traces are off.
	Tracing *observe.Tracing
}

// SetObservers makes o read every tool call from now on.
func (g *Gateway) SetObservers(o Observers) { g.obs.Store(&o) }

// callKey is the context key a call's ToolCall is held under while it
// is sent, so that the upstream's handler can say how it ended.
type callKey struct{}

// call serves one tools/call and accounts for it once.
func (g *Gateway) call(ctx context.Context, method string, r *mcp.CallToolRequest, key *tenant.Key, next mcp.MethodHandler) (mcp.Result, error) {
	c := &observe.ToolCall{ID: callID(), Start: time.Now(), Tool: observe.CutToolName(r.Params.Name), BytesIn: int64(len(r.Params.Arguments))}
	if key != nil {
		c.KeyID, c.Tenant = key.ID, key.Tenant
	}
	c.Server, c.Listed = g.serverOf(r.Params.Name)
	obs := g.obs.Load()
	if obs != nil && obs.Tracing != nil {
		var header http.Header
		if e := r.GetExtra(); e != nil {
			header = e.Header
		}
		ctx, c.Span = obs.Tracing.StartTool(ctx, header, c.Tool, c.Start)
	}
	res, err := g.send(context.WithValue(ctx, callKey{}, c), method, r, key, next)
	c.Duration = time.Since(c.Start)
	if obs != nil {
		obs.List.ObserveTool(c)
	}
	return res, err
}

// send refuses the call, or sends it on, and notes how it ended in c.
func (g *Gateway) send(ctx context.Context, method string, r *mcp.CallToolRequest, key *tenant.Key, next mcp.MethodHandler) (mcp.Result, error) {
	c := ctx.Value(callKey{}).(*observe.ToolCall)
	if !allows(key, r.Params.Name) {
		c.Status = observe.ToolRefused
		return nil, unknown("tool", r.Params.Name)
	}
	if err := g.admit(ctx, key); err != nil {
		c.Status = observe.ToolLimited
		return nil, err
	}
	res, err := next(ctx, method, r)
	switch {
	case err == nil:
		c.Status = observe.ToolOK
		if tr, ok := res.(*mcp.CallToolResult); ok && tr.IsError {
			c.Status = observe.ToolError
		}
		if b, merr := json.Marshal(res); merr == nil {
			c.BytesOut = int64(len(b))
		}
	case c.Status != "":
		// The upstream's handler said how it ended.
	case !c.Listed:
		c.Status = observe.ToolRefused
	case errors.Is(err, context.Canceled):
		c.Status = observe.ToolCanceled
	default:
		c.Status = observe.ToolFailed
	}
	return res, err
}

// noteCall sets how the call in ctx ended, if one is there.
func noteCall(ctx context.Context, s observe.ToolStatus) {
	if c, ok := ctx.Value(callKey{}).(*observe.ToolCall); ok {
		c.Status = s
	}
}

// callID is a tool call's id, unique across gateways: its ledger
// record's.
func callID() string {
	var b [12]byte
	rand.Read(b[:])
	return "mcp-" + hex.EncodeToString(b[:])
}

// serverOf is the server that lists tool, and whether one does.
func (g *Gateway) serverOf(tool string) (string, bool) {
	g.lmu.Lock()
	defer g.lmu.Unlock()
	s, ok := g.listed[tool]
	return s, ok
}

// setListed makes tools the ones server lists, in place of what it
// listed before.
func (g *Gateway) setListed(server string, old, tools []string) {
	g.lmu.Lock()
	defer g.lmu.Unlock()
	for _, t := range old {
		if g.listed[t] == server {
			delete(g.listed, t)
		}
	}
	for _, t := range tools {
		g.listed[t] = server
	}
}
