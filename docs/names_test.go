package docs

// The names the pages give, held to the code: a constant, function, type
// or field, a file or package, a metric, a command's flag. A page that
// names what no longer exists fails here, at its line.
//
// The rules, over the README and every page under docs/ but the decision
// records (a record names things as they were at its commit):
//
//   - A code span that is a Go name in camel case (`sloPressure`,
//     `PromptTokens`, `TestRedact`; a benchmark's sub-benchmark aside) is
//     an identifier of llmgw's Go code, declared there or used from
//     another package (`ReadHeaderTimeout`), or a word of the chart and
//     the rules under deploy/ (`ClusterIP`, `preStop`).
//   - A qualified name (`pool.Decode`, `Router.Status`,
//     `usage.Record.AppendJSON`) that starts with the name of one of
//     llmgw's packages goes on with a top-level declaration of a package
//     of that name, and then a method or field of that type; one that
//     starts with a type's name goes on with a method or field of a type
//     so named. Other qualified names (`time.Time.AppendText`) follow
//     the rule above, part by part.
//   - A path from the top of the tree (`internal/router/pool`,
//     `scripts/overhead.sh`, `internal/router/...`) exists. The tail of a
//     path (`proxy/redact.go`) ending in .go, .sh or .py is the tail of a
//     file's path. A file's name alone (`gate.go`, `policy_*.go`) is a
//     file of a directory its paragraph, or its table's row, named before
//     it (`internal/router/admission`, or the directory of
//     `internal/router/admission/slo.go`), and where it named none, of
//     any directory.
//   - A metric of llmgw's (`llmgw_`, `gen_ai_`), in a code span or a code
//     block, is listed in reference/metrics.md, whose table a test in
//     internal/app writes from the registry.
//   - A flag (`--name`) in a code span that starts with it or runs llmgw,
//     or on a code block's line that runs llmgw, is a flag of some llmgw
//     command. A flag of another program is written with its program
//     (`vllm serve --enable-prompt-tokens-details`).
//   - In a code block, a path from the top of the tree (`scripts/routing.sh`,
//     `./internal/router/...`) exists.

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// A span is a name a page gives, in a code span or on a code block's line.
type span struct {
	text  string
	line  int
	block bool // on a code block's line, not in a code span
	unit  int  // the paragraph, or the table's row, the span is in
}

// fenceRE is the line that opens or closes a code block.
var fenceRE = regexp.MustCompile("^\\s*(```|~~~)")

// codeSpanRE is an inline code span, which may run over a line's end.
var codeSpanRE = regexp.MustCompile("`([^`]+)`")

// spans are a page's code spans and code block lines, by line; a code
// block's line that ends in a backslash goes on in the next. A code
// block's lines are blanked out before the spans are found, so that line
// numbers hold.
func spans(page string) []span {
	lines := strings.Split(page, "\n")
	var out []span
	fenced, cont := false, false
	for i, l := range lines {
		if fenceRE.MatchString(l) {
			fenced, cont = !fenced, false
			lines[i] = ""
			continue
		}
		if !fenced {
			continue
		}
		lines[i] = ""
		if cont {
			out[len(out)-1].text += " " + strings.TrimSuffix(l, "\\")
		} else {
			out = append(out, span{text: strings.TrimSuffix(l, "\\"), line: i + 1, block: true})
		}
		cont = strings.HasSuffix(l, "\\")
	}
	units := make([]int, len(lines)) // a line's paragraph, or its own number in a table
	for i, l := range lines {
		switch l = strings.TrimSpace(l); {
		case i == 0:
		case l == "" || strings.HasPrefix(l, "|") || strings.HasPrefix(l, "#"):
			units[i] = i
		default:
			units[i] = units[i-1]
		}
	}
	text := strings.Join(lines, "\n")
	for _, m := range codeSpanRE.FindAllStringSubmatchIndex(text, -1) {
		s := strings.Join(strings.Fields(text[m[2]:m[3]]), " ")
		line := 1 + strings.Count(text[:m[0]], "\n")
		out = append(out, span{text: s, line: line, unit: units[line-1]})
	}
	return out
}

// commandSepRE separates the commands of a shell line.
var commandSepRE = regexp.MustCompile(`&&|\|\||[|;]|\$\(`)

// llmgwArgs are the words of the commands of a shell line that run llmgw
// (`llmgw bench ...`, `./llmgw serve ...`, `go run ./cmd/llmgw sim ...`,
// each after any variables it sets), each command's words joined by
// spaces.
func llmgwArgs(line string) []string {
	var out []string
	for _, cmd := range commandSepRE.Split(line, -1) {
		words := strings.Fields(cmd)
		for len(words) > 0 && strings.Contains(words[0], "=") {
			words = words[1:]
		}
		if len(words) > 2 && words[0] == "go" && words[1] == "run" {
			words = words[2:]
		}
		if len(words) > 0 && (words[0] == "llmgw" || strings.HasSuffix(words[0], "/llmgw")) {
			out = append(out, strings.Join(words[1:], " "))
		}
	}
	return out
}

var (
	// camelRE is a Go name, perhaps qualified, with a test's sub-test
	// or a call's parentheses after it. A name alone is held when it is
	// in camel case (humpRE: a lower-case letter and, after it, an
	// upper-case one), a qualified name when a part has an upper-case
	// letter.
	camelRE = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)(?:\(\)|/\S*)?$`)
	humpRE  = regexp.MustCompile(`[a-z][A-Za-z0-9_]*[A-Z]`)
	// extRE is a file's name: not a qualified Go name.
	extRE = regexp.MustCompile(`\.(?:go|sh|py|md|ya?ml|json|jsonl|toml|tpl|txt|csv|svg|png)$`)
	// pathRE is a path from the top of the tree, as a code span or a word
	// of a command gives it.
	pathRE = regexp.MustCompile(`^(?:\./)?((?:internal|cmd|deploy|scripts|docs)/[A-Za-z0-9_./*-]*)$`)
	// fileRE is a file's name or the tail of its path.
	fileRE = regexp.MustCompile(`^[A-Za-z0-9_*][A-Za-z0-9_./*-]*\.(?:go|sh|py)$`)
	// recordRE is a recording rule's name: level:metric:operations.
	recordRE = regexp.MustCompile(`\b[a-z_]+:(?:llmgw|gen_ai)_[a-z0-9_]+:[a-z0-9_]+\b`)
	// metricRE is a metric of llmgw's or its label, or a family of
	// metrics (`llmgw_limits_*`).
	metricRE = regexp.MustCompile(`\b(?:llmgw|gen_ai)_[a-z0-9_]+\*?`)
	// flagRE is a flag given with two dashes.
	flagRE = regexp.MustCompile(`(?:^|[\s(\[|])--([a-z][a-z0-9-]*)`)
)

// upper are the letters a qualified Go name has in one of its parts at
// least; `server.max_body_bytes` is a key of the configuration.
const upper = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"

// ident reports whether name is a name of llmgw's code, or of its chart
// and rules.
func (c *code) ident(name string) bool { return c.idents[name] || c.words[name] }

// name is what is wrong with a code span read as a Go name, or "".
func (c *code) name(s string) string {
	m := camelRE.FindStringSubmatch(s)
	if m == nil || extRE.MatchString(m[1]) {
		return ""
	}
	parts := strings.Split(m[1], ".")
	if len(parts) == 1 && !humpRE.MatchString(m[1]) || len(parts) > 1 && !strings.ContainsAny(m[1], upper) {
		return ""
	}
	if len(parts) == 1 {
		if !c.ident(parts[0]) {
			return "is no identifier of llmgw's code"
		}
		return ""
	}
	first, rest := parts[0], parts[1:]
	switch {
	case c.pkgs[first] != nil && !c.members[first][rest[0]]:
		if !c.pkgs[first][rest[0]] {
			return "names " + rest[0] + ", which no package " + first + " declares"
		}
		if len(rest) > 1 && !c.members[first+"."+rest[0]][rest[1]] {
			return "names " + rest[1] + ", which " + first + "." + rest[0] + " does not have"
		}
		return ""
	case c.members[first] != nil:
		if !c.members[first][rest[0]] {
			return "names " + rest[0] + ", which no type " + first + " has"
		}
		return ""
	}
	for _, p := range parts {
		if !c.ident(p) {
			return "names " + p + ", which is no identifier of llmgw's code"
		}
	}
	return ""
}

// path is what is wrong with a word read as a path, or "". A file's
// name alone is looked for in dirs, the directories its paragraph named
// before it, when it named any, and else anywhere in the tree.
func (c *code) path(s string, dirs []string) string {
	if m := pathRE.FindStringSubmatch(s); m != nil {
		p := strings.TrimSuffix(strings.TrimSuffix(m[1], "/..."), "/")
		if slices.ContainsFunc(c.files, func(f string) bool { ok, _ := filepath.Match(p, f); return ok }) {
			return ""
		}
		return "is no file or directory of the tree"
	}
	if !fileRE.MatchString(s) || strings.Contains(s, "..") {
		return ""
	}
	if !strings.Contains(s, "/") && len(dirs) > 0 {
		if slices.ContainsFunc(dirs, func(d string) bool {
			return slices.ContainsFunc(c.files, func(f string) bool { ok, _ := filepath.Match(d+"/"+s, f); return ok })
		}) {
			return ""
		}
		return "is in none of " + strings.Join(dirs, ", ")
	}
	if slices.ContainsFunc(c.files, func(f string) bool {
		for {
			if ok, _ := filepath.Match(s, f); ok {
				return true
			}
			_, tail, ok := strings.Cut(f, "/")
			if !ok {
				return false
			}
			f = tail
		}
	}) {
		return ""
	}
	return "is no file of the tree"
}

// dir is the directory a code span names from the top of the tree
// (`internal/router/pool`, `internal/router/...`), or the directory of
// the file it names (`internal/router/proxy/transport.go`), or "".
func (c *code) dir(s string) string {
	m := pathRE.FindStringSubmatch(s)
	if m == nil {
		return ""
	}
	d := strings.TrimSuffix(strings.TrimSuffix(m[1], "/..."), "/")
	isDir, ok := c.isDir[d]
	switch {
	case !ok:
		return ""
	case !isDir && fileRE.MatchString(d):
		return filepath.ToSlash(filepath.Dir(d))
	case !isDir:
		return ""
	}
	return d
}

// metric is what is wrong with a metric's name, or "".
func (c *code) metric(s string) string {
	family, isFamily := strings.CutSuffix(s, "*")
	if isFamily || strings.HasSuffix(s, "_") {
		for m := range c.metrics {
			if strings.HasPrefix(m, family) {
				return ""
			}
		}
		return "names a family of metrics of which reference/metrics.md lists none"
	}
	for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
		if c.metrics[strings.TrimSuffix(s, suffix)] {
			return ""
		}
	}
	return "is no metric or label reference/metrics.md lists"
}

// problems are what is wrong with the names a page gives, one a line:
// "line 79: `admitPendingPerEndpoint` is no identifier of llmgw's code".
func (c *code) problems(page string) []string {
	var out []string
	add := func(line int, name, what string) {
		if what != "" {
			out = append(out, "line "+strconv.Itoa(line)+": `"+name+"` "+what)
		}
	}
	flags := func(line int, args string) {
		for _, m := range flagRE.FindAllStringSubmatch(args, -1) {
			if !c.flags[m[1]] {
				add(line, "--"+m[1], "is no flag of an llmgw command")
			}
		}
	}
	dirs := make(map[int][]string) // key: a paragraph or row; value: the directories it named so far
	for _, s := range spans(page) {
		for _, r := range recordRE.FindAllString(s.text, -1) {
			if !c.records[r] {
				add(s.line, r, "is no recording rule of deploy/prometheus")
			}
		}
		for _, m := range metricRE.FindAllString(recordRE.ReplaceAllString(s.text, ""), -1) {
			add(s.line, m, c.metric(m))
		}
		for _, args := range llmgwArgs(s.text) {
			flags(s.line, args)
		}
		if s.block {
			for _, w := range strings.Fields(s.text) {
				w = strings.TrimRight(w, ".,;:)")
				if pathRE.MatchString(w) {
					add(s.line, w, c.path(w, nil))
				}
			}
			continue
		}
		if strings.HasPrefix(s.text, "--") {
			flags(s.line, s.text)
		}
		if strings.Contains(s.text, " ") {
			continue
		}
		add(s.line, s.text, c.name(s.text))
		add(s.line, s.text, c.path(s.text, dirs[s.unit]))
		if d := c.dir(s.text); d != "" {
			dirs[s.unit] = append(dirs[s.unit], d)
		}
	}
	return out
}

// TestNamesExist: every name a page gives, but a decision record's, is
// one the code has (the rules are at the top of this file).
func TestNamesExist(t *testing.T) {
	c := loadCode(t)
	for _, p := range pages(t) {
		if strings.HasPrefix(filepath.ToSlash(p), "decisions/") {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, problem := range c.problems(string(b)) {
			t.Errorf("%s: %s", filepath.ToSlash(filepath.Clean(filepath.Join("docs", p))), problem)
		}
	}
}

// TestNameRules: each rule finds a name that does not exist, and passes
// one that does.
func TestNameRules(t *testing.T) {
	c := &code{
		idents:  make(map[string]bool),
		words:   map[string]bool{"ClusterIP": true, "networkPolicy": true, "adminFrom": true},
		pkgs:    make(map[string]map[string]bool),
		members: make(map[string]map[string]bool),
		files:   []string{"cmd", "cmd/llmgw", "internal", "internal/router", "internal/router/pool", "internal/router/pool/policy_auto.go", "scripts", "scripts/overhead.sh"},
		metrics: map[string]bool{"llmgw_requests_total": true, "llmgw_ttft_seconds": true, "model": true},
		records: map[string]bool{"model:llmgw_ttft_seconds:p99_rate5m": true},
		flags:   map[string]bool{"help": true, "policy": true, "seed": true},
	}
	f, err := parser.ParseFile(token.NewFileSet(), "pool.go", `package pool
import "time"
const PeerMaxAge = 250 * time.Millisecond
type Pool struct{ maxAge time.Duration }
func (p *Pool) Pick() {}
func fit() { var perToken float64; _ = perToken }
`, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	c.addGo(f, false)
	for page, want := range map[string]string{
		"`PeerMaxAge`, `perToken`, `time.Millisecond`, `Pool.Pick`, `pool.Pool.maxAge`, `ClusterIP`, `networkPolicy.adminFrom`": "",
		"`peerMaxAge`":                   "line 1: `peerMaxAge` is no identifier of llmgw's code",
		"a\n`admitPendingPerEndpoint()`": "line 2: `admitPendingPerEndpoint()` is no identifier of llmgw's code",
		"`pool.Decode`":                  "line 1: `pool.Decode` names Decode, which no package pool declares",
		"`pool.Pool.Status`":             "line 1: `pool.Pool.Status` names Status, which pool.Pool does not have",
		"`Pool.Status`":                  "line 1: `Pool.Status` names Status, which no type Pool has",
		"`time.AppendTxt`":               "line 1: `time.AppendTxt` names AppendTxt, which is no identifier of llmgw's code",
		"`Chart.yaml`, `server.max_body_bytes`, `gen_ai.request.model`":                                              "",
		"`internal/router/pool`, `internal/router/...`, `policy_*.go`, `pool/policy_auto.go`, `scripts/overhead.sh`": "",
		"`internal/router/observe`": "line 1: `internal/router/observe` is no file or directory of the tree",
		"`policy_gie.go`":           "line 1: `policy_gie.go` is no file of the tree",
		"`llmgw_requests_total`, `llmgw_ttft_seconds_bucket{model}`, `llmgw_requests_*`, `model:llmgw_ttft_seconds:p99_rate5m`": "",
		"`rate(llmgw_request_total[5m])`":       "line 1: `llmgw_request_total` is no metric or label reference/metrics.md lists",
		"`llmgw_limits_*`":                      "line 1: `llmgw_limits_*` names a family of metrics of which reference/metrics.md lists none",
		"`model:llmgw_tpot_seconds:p99_rate5m`": "line 1: `model:llmgw_tpot_seconds:p99_rate5m` is no recording rule of deploy/prometheus",
		"`--policy auto`, `llmgw bench --seed 2`, `kubectl -n llmgw create secret --from-literal=a=b`, `vllm serve --enable-prompt-tokens-details`": "",
		"`--polcy`":                           "line 1: `--polcy` is no flag of an llmgw command",
		"`llmgw bench --seed 2 --polcy auto`": "line 1: `--polcy` is no flag of an llmgw command",
		"```sh\nFOO=1 go run ./cmd/llmgw bench --seed 1 \\\n  --polcy auto\nhelm install --set a=b\n```": "line 2: `--polcy` is no flag of an llmgw command",
		"```sh\ngo test -bench . ./internal/router/pool/ ./internal/router/observe/\n```":                "line 2: `./internal/router/observe/` is no file or directory of the tree",
	} {
		if got := strings.Join(c.problems(page), "\n"); got != want {
			t.Errorf("problems(%q):\n got %s\nwant %s", page, got, want)
		}
	}
}
