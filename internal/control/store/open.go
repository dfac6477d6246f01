// Opening a store from its URL: sqlite:PATH, postgres://..., memory:.

package store

import (
	"context"
	"fmt"
	"strings"
)

// Open opens the store a URL names and brings its schema up to date:
//
//	sqlite:PATH           a SQLite file, created if missing; PATH may be relative, or :memory:
//	postgres://...        a PostgreSQL database (postgresql:// too), in pgx's URL syntax
//	memory:               an in-memory store, gone when the process ends
func Open(ctx context.Context, url string) (Store, error) {
	switch {
	case strings.HasPrefix(url, "sqlite:"):
		return OpenSQLite(ctx, strings.TrimPrefix(url, "sqlite:"))
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		return OpenPostgres(ctx, url)
	case url == "memory:":
		return NewMemory(), nil
	case url == "":
		return nil, fmt.Errorf("store url is empty; want sqlite:PATH, postgres://... or memory:")
	default:
		scheme, _, _ := strings.Cut(url, ":")
		return nil, fmt.Errorf("store url scheme %q is not supported; want sqlite:PATH, postgres://... or memory:", scheme)
	}
}
