package mcpgw

// Resources: each server's listed under their own URIs, their names as
// server__name, a read sent to the server that lists the URI. A URI
// another server lists already stays that server's, and one that does
// not parse as an absolute URI is left out.

import (
	"context"
	"net/url"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// resource is a listed resource's server and name as listed.
type resource struct{ server, name string }

func (u *upstream) listResources(ctx context.Context, sess *mcp.ClientSession) []*mcp.Resource {
	var all []*mcp.Resource
	p := &mcp.ListResourcesParams{}
	for range maxPages {
		res, err := sess.ListResources(ctx, p)
		if err != nil {
			u.g.log.Warn("listing an mcp server's resources", "server", u.cfg.Name, "err", err)
			break
		}
		for _, r := range res.Resources {
			if len(all) >= maxListed || r == nil || r.Name == "" || len(r.URI) > maxSchema {
				continue
			}
			if v, err := url.Parse(r.URI); err == nil && v.Scheme != "" {
				all = append(all, r)
			}
		}
		if res.NextCursor == "" || len(all) >= maxListed {
			break
		}
		p.Cursor = res.NextCursor
	}
	return all
}

// listResourcesOn makes resources the server's on srv, in place of what
// it listed before; u.mu is held.
func (u *upstream) listResourcesOn(srv *mcp.Server, resources []*mcp.Resource) {
	g := u.g
	g.lmu.Lock()
	var gone []string
	for _, uri := range u.resources {
		if g.resources[uri].server == u.cfg.Name {
			delete(g.resources, uri)
			gone = append(gone, uri)
		}
	}
	u.resources = nil
	var add []*mcp.Resource
	for _, r := range resources {
		if _, taken := g.resources[r.URI]; taken {
			continue
		}
		q := *r
		q.Name, q.Description = u.cfg.Name+Separator+r.Name, cut(r.Description, maxDescription)
		g.resources[r.URI] = resource{server: u.cfg.Name, name: q.Name}
		u.resources = append(u.resources, r.URI)
		add = append(add, &q)
	}
	g.lmu.Unlock()
	srv.RemoveResources(gone...)
	for _, r := range add {
		srv.AddResource(r, u.readResource)
	}
}

// readResource sends a read on to the server, within its timeout.
func (u *upstream) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	sess := u.session()
	if sess == nil {
		return nil, errDown(u.cfg.Name)
	}
	cctx, cancel := context.WithTimeout(u.callContext(ctx, req), u.cfg.Timeout)
	defer cancel()
	res, err := sess.ReadResource(cctx, &mcp.ReadResourceParams{Meta: req.Params.Meta, URI: req.Params.URI})
	u.noted(sess, err)
	if err != nil {
		return nil, u.callError(err)
	}
	return res, nil
}

// resourceName is the name the resource at uri is listed under; empty for
// none.
func (g *Gateway) resourceName(uri string) string {
	g.lmu.Lock()
	defer g.lmu.Unlock()
	return g.resources[uri].name
}
