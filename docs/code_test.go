package docs

// What the pages' names are held to (names_test.go): the identifiers and
// declarations of llmgw's Go code, the words of its chart and rules, the
// files of its tree, the metrics of reference/metrics.md and the flags of
// its commands.

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// root is the top of llmgw's tree, from this package's directory.
const root = ".."

// code is what the pages' names are held to: the Go code, the chart and
// the rules, the files of the tree, the metrics and the flags.
type code struct {
	idents  map[string]bool            // every identifier in a Go file
	words   map[string]bool            // every word of deploy/'s YAML and templates
	pkgs    map[string]map[string]bool // key: package name; value: its top-level names
	members map[string]map[string]bool // key: type name, and "pkg.Type"; value: its methods and fields
	files   []string                   // every file and directory, slash-separated from the root
	isDir   map[string]bool            // key: each of files; value: whether it is a directory
	metrics map[string]bool            // the metrics reference/metrics.md lists, and their labels
	records map[string]bool            // the recording rules of deploy/prometheus
	flags   map[string]bool            // every flag an llmgw command defines, without its dashes
}

// skipDir reports whether a walk of the tree leaves out the directory:
// version control, dependencies installed for tests, hidden directories.
func skipDir(name string) bool {
	return name == "node_modules" || name != "." && name != ".." && strings.HasPrefix(name, ".")
}

// loadCode reads the tree: every Go file but test data, the chart and
// rules under deploy/, and reference/metrics.md.
func loadCode(t *testing.T) *code {
	t.Helper()
	c := &code{
		idents:  make(map[string]bool),
		words:   make(map[string]bool),
		pkgs:    make(map[string]map[string]bool),
		members: make(map[string]map[string]bool),
		metrics: make(map[string]bool),
		records: make(map[string]bool),
		isDir:   make(map[string]bool),
		flags:   map[string]bool{"help": true, "h": true},
	}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && skipDir(d.Name()) {
			return filepath.SkipDir
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if rel != "." {
			c.files = append(c.files, rel)
			c.isDir[rel] = d.IsDir()
		}
		switch {
		case d.IsDir():
		case strings.HasSuffix(p, ".go") && !strings.Contains("/"+rel, "/testdata/"):
			f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			c.addGo(f, strings.HasSuffix(p, "_test.go") || !strings.HasPrefix(rel, "internal/") && !strings.HasPrefix(rel, "cmd/"))
		case strings.HasPrefix(rel, "deploy/") && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml") || strings.HasSuffix(p, ".tpl")):
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, w := range wordRE.FindAllString(string(b), -1) {
				c.words[w] = true
			}
			for _, m := range recordDefRE.FindAllStringSubmatch(string(b), -1) {
				c.records[m[1]] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("reference/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range metricRowRE.FindAllStringSubmatch(string(b), -1) {
		c.metrics[m[1]] = true
		for l := range strings.SplitSeq(m[2], ",") {
			c.metrics[strings.TrimSpace(l)] = true
		}
	}
	if len(c.metrics) < 50 || len(c.flags) < 50 || len(c.pkgs) < 20 {
		t.Fatalf("read %d metrics, %d flags, %d packages: the tree or reference/metrics.md is not as this test reads it", len(c.metrics), len(c.flags), len(c.pkgs))
	}
	return c
}

// wordRE is a word as identifiers are written.
var wordRE = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)

// metricRowRE is a row of reference/metrics.md's table of metrics: the
// metric, its labels.
var metricRowRE = regexp.MustCompile("(?m)^\\| `([a-z0-9_]+)` \\| [a-z]+ \\| ([a-z0-9_, ]*) \\|")

// recordDefRE is a recording rule of the rules' file.
var recordDefRE = regexp.MustCompile(`(?m)^\s*- record: (\S+)`)

// flagMakers are the methods of flag.FlagSet and cli.FlagSet that define
// a flag, each taking its name as its first string literal.
var flagMakers = map[string]bool{
	"Bool": true, "BoolVar": true, "BoolFunc": true, "Duration": true, "DurationVar": true,
	"Float64": true, "Float64Var": true, "Func": true, "Int": true, "IntVar": true,
	"Int64": true, "Int64Var": true, "String": true, "StringVar": true, "TextVar": true,
	"Uint": true, "UintVar": true, "Uint64": true, "Uint64Var": true, "Var": true,
	"Choice": true, "ChoiceVar": true,
}

// addGo adds a Go file's identifiers and declarations, and, unless it is
// a test or a tool outside the binary, the flags it defines.
func (c *code) addGo(f *ast.File, notBinary bool) {
	pkg := f.Name.Name
	if c.pkgs[pkg] == nil {
		c.pkgs[pkg] = make(map[string]bool)
	}
	member := func(typ, name string) {
		for _, k := range []string{typ, pkg + "." + typ} {
			if c.members[k] == nil {
				c.members[k] = make(map[string]bool)
			}
			c.members[k][name] = true
		}
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				c.pkgs[pkg][d.Name.Name] = true
			} else if typ := recvType(d.Recv.List[0].Type); typ != "" {
				member(typ, d.Name.Name)
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					c.pkgs[pkg][s.Name.Name] = true
					if st, ok := s.Type.(*ast.StructType); ok {
						for _, fl := range st.Fields.List {
							for _, n := range fl.Names {
								member(s.Name.Name, n.Name)
							}
							if len(fl.Names) == 0 { // embedded: its name is its type's
								member(s.Name.Name, recvType(fl.Type))
							}
						}
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						c.pkgs[pkg][n.Name] = true
					}
				}
			}
		}
	}
	imported := make(map[string]bool) // the names the file's imports are known by: slog.String defines no flag
	for _, im := range f.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		name := p[strings.LastIndex(p, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		}
		imported[name] = true
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Ident:
			c.idents[n.Name] = true
		case *ast.CallExpr:
			sel, ok := n.Fun.(*ast.SelectorExpr)
			if notBinary || !ok || !flagMakers[sel.Sel.Name] || imported[exprName(sel.X)] {
				break
			}
			for _, a := range n.Args[:min(2, len(n.Args))] {
				if lit, ok := a.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if name, err := strconv.Unquote(lit.Value); err == nil {
						c.flags[name] = true
					}
					break
				}
			}
		}
		return true
	})
}

// exprName is an identifier's name, or "".
func exprName(e ast.Expr) string {
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// recvType is the name of a receiver's or an embedded field's type:
// Router for *Router, pool.Pool, or Ring[T].
func recvType(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return recvType(e.X)
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.IndexExpr:
		return recvType(e.X)
	case *ast.IndexListExpr:
		return recvType(e.X)
	}
	return ""
}
