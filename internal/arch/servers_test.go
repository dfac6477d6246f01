package arch

// Every listener llmgw opens is served by a server held to deadlines on
// headers, bodies and idle connections: its code makes servers in one
// file, internal/h1/servers.go, whose constructors take the deadlines.
// The test reads every Go file of the module but tests, and fails on a
// server made anywhere else: an http.Server or h1.Server written out, or
// net/http's functions that serve with a server of no deadlines.

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// serversFile is the one file that makes servers, relative to the
// module's root.
const serversFile = "internal/h1/servers.go"

// unheld are net/http's and httptest's functions that serve with a server
// of no deadlines, by import path.
var unheld = map[string][]string{
	"net/http":               {"ListenAndServe", "ListenAndServeTLS", "Serve", "ServeTLS"},
	"net/http/httptest":      {"NewServer", "NewUnstartedServer", "NewTLSServer"},
	"google.golang.org/grpc": {"NewServer"},
}

// serverTypes are the server types that must not be made but in
// serversFile, by import path.
var serverTypes = map[string]string{"net/http": "Server", module + "internal/h1": "Server"}

func TestServersHaveDeadlines(t *testing.T) {
	files := moduleFiles(t)
	for _, rel := range files {
		if rel == serversFile {
			continue
		}
		problems, err := serversIn(filepath.Join(moduleRoot, rel), rel, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Error(p)
		}
	}
}

// TestServersHaveDeadlinesCatches plants each way of making a server in
// a file and sees it found; the same file in serversFile's place, or a
// type of the same name from elsewhere, is let be.
func TestServersHaveDeadlinesCatches(t *testing.T) {
	tests := []struct {
		name, rel, src string
		want           []string // a problem naming each, in order
	}{
		{"a literal", "internal/x/x.go", `package x
import "net/http"
var s = &http.Server{Handler: nil}`, []string{"internal/x/x.go:3: http.Server"}},
		{"a renamed import, by new", "internal/x/x.go", `package x
import web "net/http"
var s = new(web.Server)`, []string{"internal/x/x.go:3: web.Server"}},
		{"h1's server", "internal/x/x.go", `package x
import "gitea.mynodes.xyz/ilker/llmgw/internal/h1"
var s = h1.Server{}`, []string{"internal/x/x.go:3: h1.Server"}},
		{"h1's server in h1", "internal/h1/other.go", `package h1
type Server struct{}
var s = &Server{}`, []string{"internal/h1/other.go:3: Server"}},
		{"ListenAndServe and httptest", "cmd/x/main.go", `package main
import ("net/http"; "net/http/httptest")
func main() { http.ListenAndServe(":1", nil); httptest.NewServer(nil) }`,
			[]string{"cmd/x/main.go:3: http.ListenAndServe", "cmd/x/main.go:3: httptest.NewServer"}},
		{"another Server type", "internal/x/x.go", `package x
type Server struct{}
var s = &Server{}`, nil},
		{"a request is no server", "internal/x/x.go", `package x
import "net/http"
var r = &http.Request{}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := serversIn(tt.rel, tt.rel, tt.src)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %q, want problems naming %q", got, tt.want)
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(got[i], w) {
					t.Errorf("problem %d is %q, want one naming %q", i, got[i], w)
				}
			}
		})
	}
}

// serversIn gives a problem for each server made in the Go file at path,
// named rel from the module's root, outside serversFile; src, when not
// nil, is the file's text.
func serversIn(path, rel string, src any) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	// imports maps each import's name in the file to its path.
	imports := make(map[string]string)
	for _, im := range f.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		name := p[strings.LastIndex(p, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		}
		imports[name] = p
	}
	inH1 := strings.HasPrefix(rel, "internal/h1/") && f.Name.Name == "h1"
	// isServer reports whether e names one of serverTypes.
	isServer := func(e ast.Expr) (string, bool) {
		switch e := e.(type) {
		case *ast.SelectorExpr:
			x, ok := e.X.(*ast.Ident)
			if ok && serverTypes[imports[x.Name]] == e.Sel.Name {
				return x.Name + "." + e.Sel.Name, true
			}
		case *ast.Ident:
			if inH1 && e.Name == "Server" {
				return e.Name, true
			}
		}
		return "", false
	}
	var problems []string
	add := func(n ast.Node, what string) {
		problems = append(problems, fmt.Sprintf("%s:%d: %s makes a server outside %s, which may have no deadlines: make it with h1.NewServer or h1.NewStdServer",
			rel, fset.Position(n.Pos()).Line, what, serversFile))
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CompositeLit:
			if what, ok := isServer(n.Type); ok {
				add(n, what)
			}
		case *ast.CallExpr:
			if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "new" && len(n.Args) == 1 {
				if what, ok := isServer(n.Args[0]); ok {
					add(n, what)
				}
			}
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && slices.Contains(unheld[imports[x.Name]], sel.Sel.Name) {
					add(n, x.Name+"."+sel.Sel.Name)
				}
			}
		}
		return true
	})
	return problems, nil
}
