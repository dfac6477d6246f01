// Loading: read a file, decode it strictly over Default, fill in per-field
// defaults, and validate. Decoding and validation problems come back as one
// Problems, each with the file line it is on when that is known.

package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

// Load reads and parses the file at path. Its error holds a Problems when
// the file was read but is not a valid configuration.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load config: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("load config %s: %w", path, err)
	}
	return c, nil
}

// Parse decodes one YAML document over Default, strictly: an unknown
// field, a value of the wrong type, or a second document is a problem.
// It then applies per-field defaults and validates. Its error is a
// Problems. Empty input is Default alone, which lists no models and so
// fails validation.
func Parse(data []byte) (*Config, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, yamlProblems(err, nil)
	}
	walk := walkFields(&root)

	c := Default()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		ps := yamlProblems(err, walk.lines)
		if len(walk.unknown) > 0 && !walk.cut {
			// The walk named every unknown field by path; drop yaml's
			// own wording of the same.
			ps = append(walk.unknown, dropUnknownFields(ps)...)
		}
		sortByLine(ps)
		return nil, ps
	}
	if len(walk.unknown) > 0 {
		return nil, walk.unknown
	}
	var next yaml.Node
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, yamlProblems(err, nil)
		}
		return nil, Problems{{Msg: "a config file holds one YAML document; remove the second", Line: next.Line}}
	}

	c.applyDefaults()
	if err := c.Validate(); err != nil {
		ps, _ := AsProblems(err)
		for i := range ps {
			ps[i].Line = lineOf(walk.lines, ps[i].Path)
		}
		sortByLine(ps)
		return nil, ps
	}
	return &c, nil
}

// applyDefaults fills in the per-field defaults that Default cannot hold
// because they live in list items: a pool's kind, policy, scraping, health
// checks and retry budget, and an endpoint's name and weight.
func (c *Config) applyDefaults() {
	for i := range c.Pools {
		PoolDefaults(&c.Pools[i])
	}
}

// Pool defaults. A self-hosted server (vllm, sglang) is scraped and probed;
// a pool of kind openai, often a hosted provider, is neither unless its
// paths are set.
const (
	// DefaultScrapeInterval keeps load signals within a tenth of a second
	// of the truth: a replica's queue changes on the scale of one
	// prefill, tens to hundreds of milliseconds. A scrape of vLLM's
	// /metrics is about 20 KB; 10 a second is nothing to either side.
	DefaultScrapeInterval = 100 * time.Millisecond
	// DefaultScrapeMaxAge is ten missed scrapes, and at least a second: a
	// scrape older is unknown.
	DefaultScrapeMaxAge = time.Second
	// DefaultHealthInterval and DefaultHealthTimeout take an endpoint
	// that stops answering out within 1.5 s: the probe after it stalls
	// starts within 1 s and fails 0.5 s later. /health on vLLM and SGLang
	// answers in under a millisecond when the server is well.
	DefaultHealthInterval = time.Second
	DefaultHealthTimeout  = 500 * time.Millisecond
	// DefaultRetryBudget lets retries be a fifth of a pool's recent
	// requests, as Envoy's retry budget does by default.
	DefaultRetryBudget = 0.2
	// DefaultHedgeMinWait keeps a hedge from following a request that is
	// only a little late: a short prompt's first token takes 20 to 50 ms
	// on an idle GPU, and a few times that in an ordinary queue, while
	// every hedge costs a second prefill.
	DefaultHedgeMinWait = 200 * time.Millisecond
	// DefaultEPPTimeout bounds the wait for an Endpoint Picker's answer:
	// a pick takes a millisecond or two, but an EPP with flow control
	// holds a queued request's answer, and 5 s is past a TTFT SLO of
	// most interactive models, when failing over is worth more.
	DefaultEPPTimeout = 5 * time.Second
)

// defaultMetricsPath is where a self-hosted kind's servers export their
// load: Prometheus text on vLLM, SGLang and llama.cpp (with --metrics),
// the models loaded on Ollama. Other kinds scrape nothing unless told.
var defaultMetricsPath = map[string]string{
	catalog.KindVLLM:     "/metrics",
	catalog.KindSGLang:   "/metrics",
	catalog.KindLlamaCpp: "/metrics",
	catalog.KindOllama:   "/api/ps",
}

// defaultHealthPath is a self-hosted kind's health check: /health on
// vLLM, SGLang and llama.cpp (503 while the model loads), /api/version on
// Ollama, which answers while its server is up.
var defaultHealthPath = map[string]string{
	catalog.KindVLLM:     "/health",
	catalog.KindSGLang:   "/health",
	catalog.KindLlamaCpp: "/health",
	catalog.KindOllama:   "/api/version",
}

// cloudEndpoint is the default endpoint of a cloud pool without
// endpoints: bedrock's and vertex's in their region or location, the
// Gemini API's; empty for other kinds, and when the region or location
// is not one.
func cloudEndpoint(p *catalog.Pool) string {
	switch {
	case p.Kind == catalog.KindBedrock && isRegion(p.Region):
		return "https://bedrock-runtime." + p.Region + ".amazonaws.com"
	case p.Kind == catalog.KindGemini:
		return "https://generativelanguage.googleapis.com/v1"
	case p.Kind == catalog.KindVertex && p.Location == "global":
		return "https://aiplatform.googleapis.com/v1"
	case p.Kind == catalog.KindVertex && isRegion(p.Location):
		return "https://" + p.Location + "-aiplatform.googleapis.com/v1"
	}
	return ""
}

// PoolDefaults fills in p's zero fields with their defaults.
func PoolDefaults(p *catalog.Pool) {
	if p.Kind == "" {
		p.Kind = catalog.KindOpenAI
	}
	if p.Policy == "" {
		p.Policy = catalog.PolicyAuto
	}
	if p.Metrics.Path == "" {
		p.Metrics.Path = defaultMetricsPath[p.Kind]
	}
	if p.Metrics.Interval == 0 {
		p.Metrics.Interval = DefaultScrapeInterval
	}
	if p.Metrics.MaxAge == 0 {
		p.Metrics.MaxAge = max(DefaultScrapeMaxAge, 10*p.Metrics.Interval)
	}
	if p.Health.Path == "" {
		p.Health.Path = defaultHealthPath[p.Kind]
	}
	if p.Health.Interval == 0 {
		p.Health.Interval = DefaultHealthInterval
	}
	if p.Health.Timeout == 0 {
		p.Health.Timeout = min(DefaultHealthTimeout, p.Health.Interval)
	}
	if p.RetryBudget == 0 {
		p.RetryBudget = DefaultRetryBudget
	}
	if len(p.Endpoints) == 0 {
		if u := cloudEndpoint(p); u != "" {
			p.Endpoints = []catalog.Endpoint{{URL: u}}
		}
	}
	if p.Policy == catalog.PolicyEPP && p.EPP.FailureMode == "" {
		p.EPP.FailureMode = catalog.FailClose
	}
	if p.Policy == catalog.PolicyEPP && p.EPP.Timeout == 0 {
		p.EPP.Timeout = DefaultEPPTimeout
	}
	if p.Hedge.After > 0 && p.Hedge.MinWait == 0 {
		p.Hedge.MinWait = DefaultHedgeMinWait
	}
	names := make(map[string]bool, len(p.Endpoints)) // key: an endpoint name already taken
	for _, e := range p.Endpoints {
		names[e.Name] = true
	}
	for k := range p.Endpoints {
		e := &p.Endpoints[k]
		if e.Weight == 0 {
			e.Weight = 1
		}
		if u, err := url.Parse(e.URL); err == nil && e.Name == "" && u.Host != "" {
			// Two endpoints on one host, under different paths, are told
			// apart by their place in the list.
			e.Name = u.Host
			if names[e.Name] {
				e.Name = fmt.Sprintf("%s-%d", u.Host, k)
			}
			names[e.Name] = true
		}
	}
}

// yamlProblems turns a yaml error into Problems: a type error gives one
// problem per value at fault, named by its path when lines (key: field
// path; value: its line) has one on that line; anything else, such as bad
// syntax, gives one problem.
func yamlProblems(err error, lines map[string]int) Problems {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		line, msg := splitLine(strings.TrimPrefix(err.Error(), "yaml: "))
		return Problems{{Msg: msg, Line: line}}
	}
	// The deepest path on each line is the value a type error there is
	// about: "- url: x" holds both pools[0].endpoints[0] and its url.
	pathAt := make(map[int]string, len(lines)) // key: line; value: field path
	for p, n := range lines {
		if len(p) > len(pathAt[n]) || len(p) == len(pathAt[n]) && p > pathAt[n] {
			pathAt[n] = p
		}
	}
	ps := make(Problems, 0, len(te.Errors))
	for _, e := range te.Errors {
		line, msg := splitLine(e)
		ps = append(ps, Problem{Path: pathAt[line], Msg: explainTypeError(msg), Line: line})
	}
	return ps
}

// unmarshalRE and duplicateRE match yaml's wording of a value of the wrong
// type and of a key given twice.
var (
	unmarshalRE = regexp.MustCompile("^cannot unmarshal !!(\\w+)(?: `(.*)`)? into (\\S+)$")
	duplicateRE = regexp.MustCompile(`^mapping key ".*" already defined at line (\d+)$`)
)

// explainTypeError rewords yaml's "cannot unmarshal !!str `x` into int64"
// as what the value must be and what it was.
func explainTypeError(msg string) string {
	if m := duplicateRE.FindStringSubmatch(msg); m != nil {
		return "is given twice; first at line " + m[1]
	}
	m := unmarshalRE.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	tag, value, into := m[1], m[2], m[3]
	var want string
	switch {
	case into == "time.Duration":
		want = `a duration such as "500ms", "30s" or "2m"`
	case strings.HasPrefix(into, "[]"):
		want = "a list"
	case strings.HasPrefix(into, "int"), strings.HasPrefix(into, "uint"):
		want = "a whole number"
	case strings.HasPrefix(into, "float"):
		want = "a number"
	case into == "string":
		want = "a string"
	case into == "bool":
		want = "true or false"
	default:
		want = "a mapping of fields"
	}
	got := map[string]string{"seq": "a list", "map": "a mapping", "str": "a string", "int": "a number", "float": "a number", "bool": "a boolean", "null": "nothing"}[tag]
	if got == "" {
		got = "!!" + tag
	}
	if value != "" {
		return fmt.Sprintf("must be %s, got %s", want, strconv.Quote(value))
	}
	return fmt.Sprintf("must be %s, got %s", want, got)
}

// splitLine splits yaml's "line N: msg" into N and msg; N is 0 when the
// message names no line.
func splitLine(msg string) (int, string) {
	rest, ok := strings.CutPrefix(msg, "line ")
	if !ok {
		return 0, msg
	}
	num, text, ok := strings.Cut(rest, ": ")
	n, err := strconv.Atoi(num)
	if !ok || err != nil {
		return 0, msg
	}
	return n, text
}

// dropUnknownFields removes yaml's "field x not found in type T" problems.
func dropUnknownFields(ps Problems) Problems {
	out := ps[:0]
	for _, p := range ps {
		if !strings.Contains(p.Msg, " not found in type ") {
			out = append(out, p)
		}
	}
	return out
}

// lineOf is the line of the field at path, or of its nearest ancestor the
// file spells out, or 0.
func lineOf(lines map[string]int, path string) int {
	for path != "" {
		if n, ok := lines[path]; ok {
			return n
		}
		cut := strings.LastIndexAny(path, ".[")
		if cut < 0 {
			return 0
		}
		path = path[:cut]
	}
	return 0
}

func sortByLine(ps Problems) {
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].Line < ps[j].Line })
}
