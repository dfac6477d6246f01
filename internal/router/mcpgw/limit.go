package mcpgw

// Tool calls a minute, per key and per tenant level, through the same
// limiter as the model APIs (in process, or shared on Redis by every
// gateway), counted in scopes of their own apart from model requests.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/limits"
)

// Limiter decides whether a tool call may go; limits.Limiter is one.
type Limiter interface {
	Admit(ctx context.Context, r limits.Request) (limits.Decision, error)
}

// CodeRateLimited is the JSON-RPC error code of a tool call refused by a
// limit, in the range JSON-RPC leaves to servers.
const CodeRateLimited = -32029

// admit takes one tool call from the key's and its tenant levels' tool
// limits, or says why it may not go.
func (g *Gateway) admit(ctx context.Context, key *tenant.Key) error {
	if g.opts.Limits == nil || key == nil {
		return nil
	}
	scopes := make([]limits.Scope, 0, 4)
	if key.Limits.ToolRPM > 0 {
		scopes = append(scopes, limits.Scope{Name: "tools:key:" + key.ID, Limits: tenant.Limits{RPM: key.Limits.ToolRPM}})
	}
	if g.opts.TenantLimits != nil {
		for _, tl := range g.opts.TenantLimits(key.Tenant) {
			if tl.ToolRPM > 0 {
				scopes = append(scopes, limits.Scope{Name: "tools:tenant:" + tl.Path, Limits: tenant.Limits{RPM: tl.ToolRPM}})
			}
		}
	}
	if len(scopes) == 0 {
		return nil
	}
	d, err := g.opts.Limits.Admit(ctx, limits.Request{Scopes: scopes, Now: time.Now()})
	if errors.Is(err, limits.ErrUnavailable) || (err != nil && ctx.Err() == nil) {
		g.log.Warn("tool call limits could not be read", "err", err)
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "tool call limits cannot be read right now"}
	}
	if err != nil {
		return err
	}
	if !d.Allowed {
		secs := int64(math.Ceil(d.RetryAfter.Seconds()))
		return &jsonrpc.Error{Code: CodeRateLimited, Message: fmt.Sprintf("rate limit exceeded: tool calls a minute; retry after %d s", max(secs, 1))}
	}
	return nil
}
