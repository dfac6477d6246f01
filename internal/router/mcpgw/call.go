package mcpgw

// What a key may see and call: the tools and prompts its tool globs
// allow, listed and answered; any other refused with MCP's own error for
// a name that does not exist, before anything reaches a server.

import (
	"context"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/observe"
)

// govern is the receiving middleware every request to the gateway's MCP
// server passes: lists keep what the key may use, and a call or a prompt
// outside its globs is refused as unknown.
func (g *Gateway) govern(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		key := keyOf(req)
		switch r := req.(type) {
		case *mcp.CallToolRequest:
			return g.call(ctx, method, r, key, next)
		case *mcp.GetPromptRequest:
			if !allows(key, r.Params.Name) {
				return nil, unknown("prompt", r.Params.Name)
			}
		case *mcp.ReadResourceRequest:
			if name := g.resourceName(r.Params.URI); name != "" && !allows(key, name) {
				return nil, mcp.ResourceNotFoundError(r.Params.URI)
			}
		}
		res, err := next(ctx, method, req)
		if err != nil || key == nil {
			return res, err
		}
		switch r := res.(type) {
		case *mcp.ListToolsResult:
			c := *r
			c.Tools = nil
			for _, t := range r.Tools {
				if key.AllowsTool(t.Name) {
					c.Tools = append(c.Tools, t)
				}
			}
			if c.Tools == nil {
				c.Tools = []*mcp.Tool{}
			}
			return &c, nil
		case *mcp.ListResourcesResult:
			c := *r
			c.Resources = []*mcp.Resource{}
			for _, x := range r.Resources {
				if key.AllowsTool(x.Name) {
					c.Resources = append(c.Resources, x)
				}
			}
			return &c, nil
		case *mcp.ListPromptsResult:
			c := *r
			c.Prompts = nil
			for _, p := range r.Prompts {
				if key.AllowsTool(p.Name) {
					c.Prompts = append(c.Prompts, p)
				}
			}
			if c.Prompts == nil {
				c.Prompts = []*mcp.Prompt{}
			}
			return &c, nil
		}
		return res, err
	}
}

// allows reports whether key may use the tool or prompt name: any for a
// nil key.
func allows(key *tenant.Key, name string) bool {
	return key == nil || key.AllowsTool(name)
}

// unknown is the error the SDK answers a name it does not know with, so
// that a tool outside a key's globs answers as one that does not exist.
func unknown(what, name string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown %s %q", what, name)}
}

// errDown answers a call to a server that is not connected.
func errDown(server string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("mcp server %q is unavailable", server)}
}

// callTool is the handler of the server's tool name: the call sent on to
// the server, within its timeout, with the caller's identity when the
// server asks for it.
func (u *upstream) callTool(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		sess := u.session()
		if sess == nil {
			noteCall(ctx, observe.ToolUnavailable)
			return nil, errDown(u.cfg.Name)
		}
		cctx, cancel := context.WithTimeout(u.callContext(ctx, req), u.cfg.Timeout)
		defer cancel()
		res, err := sess.CallTool(cctx, &mcp.CallToolParams{Meta: req.Params.Meta, Name: name, Arguments: req.Params.Arguments})
		u.noted(sess, err)
		if err != nil {
			noteCall(ctx, callStatus(err))
			return nil, u.callError(err)
		}
		return res, nil
	}
}

// getPrompt is the handler of the server's prompt name.
func (u *upstream) getPrompt(name string) mcp.PromptHandler {
	return func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		sess := u.session()
		if sess == nil {
			return nil, errDown(u.cfg.Name)
		}
		ctx, cancel := context.WithTimeout(u.callContext(ctx, req), u.cfg.Timeout)
		defer cancel()
		res, err := sess.GetPrompt(ctx, &mcp.GetPromptParams{Meta: req.Params.Meta, Name: name, Arguments: req.Params.Arguments})
		u.noted(sess, err)
		if err != nil {
			return nil, u.callError(err)
		}
		return res, nil
	}
}

// callContext is ctx carrying the caller's identity, when the server is
// to be told it.
func (u *upstream) callContext(ctx context.Context, req mcp.Request) context.Context {
	if u.cfg.IdentityHeader == "" {
		return ctx
	}
	key := keyOf(req)
	if key == nil {
		return ctx
	}
	return context.WithValue(ctx, identity{}, key.ID+" "+key.Tenant)
}

// callStatus is how a call that failed with err ended.
func callStatus(err error) observe.ToolStatus {
	var we *jsonrpc.Error
	switch {
	case errors.As(err, &we):
		return observe.ToolFailed
	case errors.Is(err, context.DeadlineExceeded):
		return observe.ToolTimeout
	case errors.Is(err, context.Canceled):
		return observe.ToolCanceled
	}
	return observe.ToolUnavailable
}

// callError is what a client is told of a call that failed: the
// server's own JSON-RPC error as it gave it, a timeout or its absence in
// llmgw's words; never the transport's detail, which may name its URL.
func (u *upstream) callError(err error) error {
	var we *jsonrpc.Error
	switch {
	case errors.As(err, &we):
		return we
	case errors.Is(err, context.DeadlineExceeded):
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("mcp server %q timed out", u.cfg.Name)}
	case errors.Is(err, context.Canceled):
		return err
	}
	u.g.log.Warn("mcp call failed", "server", u.cfg.Name, "err", err)
	return errDown(u.cfg.Name)
}
