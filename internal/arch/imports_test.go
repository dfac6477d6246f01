// Package arch holds the import rules of docs/ARCHITECTURE.md as a test:
// each package's imports, read with go list, against what it may import.
// The rules are about each package's own code; its tests may import
// what they need (the router's build catalogs from config.Config).
package arch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os/exec"
	pathpkg "path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "gitea.mynodes.xyz/ilker/llmgw/"

// rule is one line of ARCHITECTURE.md's import rules. A package matching
// from (a path, or a tree with "/...") that is not in unless imports none
// of deny, or, when only is not nil, none of llmgw's packages but those
// in only. With reach the rule holds for everything the package reaches
// through others too, not its own imports alone.
type rule struct {
	from   string
	unless []string
	deny   []string
	only   []string
	reach  bool
	why    string
}

// rules are ARCHITECTURE.md's "Import rules"; paths are the module's.
var rules = []rule{
	{from: "internal/router/...", reach: true,
		deny: []string{"internal/control/admin", "internal/control/keys", "internal/control/ledger", "internal/control/store", "internal/config", "internal/app"},
		why:  "the router reads the control plane through the catalog's and tenants' snapshots and records usage through its own interface; internal/app builds its options"},
	{from: "internal/control/...", reach: true,
		deny: []string{"internal/router/...", "internal/app", "internal/config"},
		why:  "the control plane never imports the router"},
	{from: "internal/console", reach: true,
		deny: []string{"internal/router/...", "internal/app", "internal/config"},
		why:  "the console reads the gateway through an interface of its own, which internal/app satisfies from the router"},
	{from: "...", unless: []string{"internal/app", "internal/router/..."},
		deny: []string{"internal/router/..."},
		why:  "only internal/app sees both sides"},
	{from: "...", unless: []string{"internal/app", "internal/bench", "cmd/llmgw"},
		deny: []string{"internal/config"},
		why:  "the configuration file is read by the wiring, which gives every other part plain values"},
	{from: "internal/translate", only: []string{"internal/openai"},
		why: "translation is one layer whose arrows point down, to the wire"},
	{from: "internal/config", only: []string{"internal/control/catalog", "internal/control/tenant", "internal/control/access"},
		why: "the configuration is data: its own shape, the catalog's, the tenants' and the roles'"},
	{from: "internal/openai", only: []string{},
		why: "the wire is at the bottom"},
	{from: "internal/tokenize", only: []string{},
		why: "the tokenizer is shared by the gateway, the simulator and the bench"},
	{from: "internal/control/catalog", only: []string{}, why: "the catalog is data"},
	{from: "internal/control/tenant", only: []string{}, why: "tenants, keys and limits are data"},
	{from: "internal/control/usage", only: []string{}, why: "usage records are data"},
	{from: "internal/control/access", only: []string{}, why: "identities and roles are data"},
	{from: "internal/control/audit", only: []string{}, why: "the audit trail is data"},
	{from: "internal/control/alert", deny: []string{"internal/control/store"}, why: "the store keeps alerts; the alerts read it through an interface of their own"},
	{from: "internal/router/observe",
		only: []string{"internal/control/catalog", "internal/control/tenant", "internal/control/usage", "internal/limits", "internal/openai", "internal/router/admission", "internal/router/proxy"},
		why:  "an observer reads a Completed request and what it settles with, never the router, its pools or its read model"},
	{from: "internal/router/status",
		only: []string{"internal/control/catalog", "internal/router/admission", "internal/router/observe", "internal/router/pool", "internal/router/scrape"},
		why:  "the read model reads the pools, admission and the scrapes as values, never the router or an upstream call"},
	{from: "internal/router/...", unless: []string{"internal/router", "internal/router/status", "internal/router/virtual", "internal/router/mcpgw"},
		deny: []string{"internal/router/observe", "internal/router/status"},
		why:  "the parts a request passes through (pools, admission, the call, the scrapes, the peers) never see its observers or the read model: what they come to reaches them as a Completed"},
	{from: "internal/router/mcpgw", deny: []string{"internal/router/status"},
		why: "the MCP gateway ends each tool call as one observe.ToolCall, as the router's root ends a request as a Completed, and never reads the read model"},
}

// known are the imports that break a rule today, each to go: a new
// forbidden import fails, and so does an entry here that is no longer
// made. None break one now.
var known []edge

// edge is one import: from imports to, both module paths.
type edge struct{ from, to string }

// pkg is what go list says of one package, the module's prefix taken off
// every path.
type pkg struct {
	ImportPath string
	Imports    []string // the module's packages it imports
	Deps       []string // the module's packages it reaches
}

// TestImportRules reads every package of the tree with go list, one run
// in each module (the main one at the root and deploy/'s beside it), and
// fails on a directory of Go files that no run gave.
func TestImportRules(t *testing.T) {
	modules, dirs, err := goTree(moduleRoot)
	if err != nil {
		t.Fatal(err)
	}
	var pkgs []pkg
	for _, m := range modules {
		cmd := exec.Command("go", "list", "-json=ImportPath,Imports,Deps", "./...")
		cmd.Dir = filepath.Join(moduleRoot, m)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list in %s: %v\n%s", cmd.Dir, err, stderr.Bytes())
		}
		got, err := decode(out)
		if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, got...)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list gave %d packages, too few to be this module's", len(pkgs))
	}
	for _, d := range dirs {
		if !slices.ContainsFunc(pkgs, func(p pkg) bool { return p.ImportPath == d }) {
			t.Errorf("%s holds Go files, but no go list gave its package", d)
		}
	}
	for _, p := range check(pkgs, rules, known) {
		t.Error(p)
	}
}

// goTree gives the directories under root, relative to it, that hold a
// go.mod (modules, "." for root's own) and those that hold Go files
// (dirs), leaving out what the go command leaves out: testdata, and
// directories whose names begin with "." or "_", and vendor and
// node_modules.
func goTree(root string) (modules, dirs []string, err error) {
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if path != root && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		dir := pathpkg.Dir(rel)
		switch {
		case d.Name() == "go.mod":
			modules = append(modules, dir)
		case strings.HasSuffix(d.Name(), ".go") && !slices.Contains(dirs, dir):
			dirs = append(dirs, dir)
		}
		return nil
	})
	return modules, dirs, err
}

// skipDir reports whether the go command and these tests pass over a
// directory of this name.
func skipDir(name string) bool {
	return strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") ||
		name == "testdata" || name == "vendor" || name == "node_modules"
}

// TestImportRulesCatch runs the check on made-up packages: a forbidden
// import planted in each way a rule can be broken is caught, and a known
// exception no longer made is reported.
func TestImportRulesCatch(t *testing.T) {
	base := []pkg{
		{ImportPath: "internal/app", Imports: []string{"internal/router", "internal/control/store", "internal/config"}},
		{ImportPath: "internal/router", Imports: []string{"internal/control/catalog", "internal/limits"}},
		{ImportPath: "internal/limits", Imports: []string{"internal/control/tenant"}},
		{ImportPath: "internal/control/store", Imports: []string{"internal/control/tenant"}},
		{ImportPath: "internal/control/catalog"},
		{ImportPath: "internal/control/tenant"},
		{ImportPath: "internal/translate", Imports: []string{"internal/openai", "internal/tokenize"}},
		{ImportPath: "internal/openai"},
		{ImportPath: "internal/tokenize"},
		{ImportPath: "internal/bench", Imports: []string{"internal/app", "internal/config"}},
		{ImportPath: "internal/router/observe", Imports: []string{"internal/control/catalog", "internal/router/proxy"}},
		{ImportPath: "internal/router/status", Imports: []string{"internal/router/observe", "internal/router/pool"}},
		{ImportPath: "internal/router/proxy"},
		{ImportPath: "internal/router/pool", Imports: []string{"internal/control/catalog"}},
	}
	tests := []struct {
		name  string
		plant edge   // an import added to base, if any
		known []edge // the exceptions
		want  string // in one of the problems; "" for none at all
	}{
		{name: "as built", known: []edge{{"internal/translate", "internal/tokenize"}}},
		{name: "router imports the store", plant: edge{"internal/router", "internal/control/store"},
			known: []edge{{"internal/translate", "internal/tokenize"}}, want: "internal/router imports internal/control/store:"},
		{name: "router reaches the store through limits", plant: edge{"internal/limits", "internal/control/store"},
			known: []edge{{"internal/translate", "internal/tokenize"}}, want: "internal/router reaches internal/control/store"},
		{name: "control imports the router", plant: edge{"internal/control/store", "internal/router"},
			known: []edge{{"internal/translate", "internal/tokenize"}}, want: "internal/control/store imports internal/router"},
		{name: "bench imports the router", plant: edge{"internal/bench", "internal/router"},
			known: []edge{{"internal/translate", "internal/tokenize"}}, want: "internal/bench imports internal/router"},
		{name: "router imports config", plant: edge{"internal/router", "internal/config"},
			known: []edge{{"internal/translate", "internal/tokenize"}}, want: "internal/router imports internal/config"},
		{name: "translate imports beside openai", plant: edge{"internal/translate", "internal/limits"},
			known: []edge{{"internal/translate", "internal/tokenize"}}, want: "internal/translate imports internal/limits"},
		{name: "the wire imports a package of llmgw", plant: edge{"internal/openai", "internal/tokenize"},
			known: []edge{{"internal/translate", "internal/tokenize"}}, want: "internal/openai imports internal/tokenize"},
		{name: "a known exception not made", known: []edge{{"internal/translate", "internal/tokenize"}, {"internal/translate", "internal/router/proxy"}},
			want: "internal/translate no longer imports internal/router/proxy"},
		{name: "an exception not known", want: "internal/translate imports internal/tokenize"},
		{name: "an observer imports the router", plant: edge{"internal/router/observe", "internal/router"},
			known: []edge{{"internal/translate", "internal/tokenize"}}, want: "internal/router/observe imports internal/router:"},
		{name: "an observer imports the pools", plant: edge{"internal/router/observe", "internal/router/pool"},
			known: []edge{{"internal/translate", "internal/tokenize"}}, want: "internal/router/observe imports internal/router/pool"},
		{name: "the read model imports an upstream call", plant: edge{"internal/router/status", "internal/router/proxy"},
			known: []edge{{"internal/translate", "internal/tokenize"}}, want: "internal/router/status imports internal/router/proxy"},
		{name: "the pools import an observer", plant: edge{"internal/router/pool", "internal/router/observe"},
			known: []edge{{"internal/translate", "internal/tokenize"}}, want: "internal/router/pool imports internal/router/observe"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pkgs := make([]pkg, len(base))
			for i, p := range base {
				p.Imports = slices.Clone(p.Imports)
				if p.ImportPath == tt.plant.from {
					p.Imports = append(p.Imports, tt.plant.to)
				}
				pkgs[i] = p
			}
			fillDeps(pkgs)
			got := check(pkgs, rules, tt.known)
			switch {
			case tt.want == "" && len(got) > 0:
				t.Errorf("got %q, want no problem", got)
			case tt.want != "" && !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, tt.want) }):
				t.Errorf("got %q, want a problem saying %q", got, tt.want)
			}
		})
	}
}

// check gives every import in pkgs that breaks a rule and is not known,
// and every known one that is no longer made.
func check(pkgs []pkg, rules []rule, known []edge) []string {
	var problems []string
	used := make(map[edge]bool)
	for _, p := range pkgs {
		for _, r := range rules {
			if !match(r.from, p.ImportPath) || matchAny(r.unless, p.ImportPath) {
				continue
			}
			imports := p.Imports
			if r.reach {
				imports = p.Deps
			}
			for _, to := range imports {
				if r.only != nil && matchAny(r.only, to) || r.only == nil && !matchAny(r.deny, to) {
					continue
				}
				e := edge{p.ImportPath, to}
				if slices.Contains(known, e) {
					used[e] = true
					continue
				}
				verb := "imports"
				if !slices.Contains(p.Imports, to) {
					verb = "reaches"
				}
				problems = append(problems, fmt.Sprintf("%s %s %s: %s", p.ImportPath, verb, to, r.why))
			}
		}
	}
	for _, e := range known {
		if !used[e] {
			problems = append(problems, fmt.Sprintf("%s no longer imports %s against the rules: take it off the known exceptions", e.from, e.to))
		}
	}
	return problems
}

// match reports whether path is pattern, or under it when pattern ends
// in "/..."; "..." alone matches every path.
func match(pattern, path string) bool {
	if pattern == "..." {
		return true
	}
	if tree, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == tree || strings.HasPrefix(path, tree+"/")
	}
	return path == pattern
}

func matchAny(patterns []string, path string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool { return match(p, path) })
}

// decode reads go list's stream of JSON objects, keeping of each
// package's imports the module's own.
func decode(out []byte) ([]pkg, error) {
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return pkgs, nil
		} else if err != nil {
			return nil, fmt.Errorf("reading go list: %w", err)
		}
		p.ImportPath = strings.TrimPrefix(p.ImportPath, module)
		p.Imports, p.Deps = ours(p.Imports), ours(p.Deps)
		pkgs = append(pkgs, p)
	}
}

// ours is the module's packages among paths, the module's prefix taken
// off.
func ours(paths []string) []string {
	var own []string
	for _, s := range paths {
		if rest, ok := strings.CutPrefix(s, module); ok {
			own = append(own, rest)
		}
	}
	return own
}

// fillDeps sets each package's Deps from the Imports of pkgs, as go list
// would.
func fillDeps(pkgs []pkg) {
	imports := make(map[string][]string, len(pkgs))
	for _, p := range pkgs {
		imports[p.ImportPath] = p.Imports
	}
	for i := range pkgs {
		seen := make(map[string]bool)
		var visit func(string)
		visit = func(path string) {
			for _, to := range imports[path] {
				if !seen[to] {
					seen[to] = true
					visit(to)
				}
			}
		}
		visit(pkgs[i].ImportPath)
		pkgs[i].Deps = nil
		for to := range seen {
			pkgs[i].Deps = append(pkgs[i].Deps, to)
		}
		slices.Sort(pkgs[i].Deps)
	}
}
