package config

// docs/reference/config.md against the configuration's Go types: every
// key has a row, every row is a key, every default written as a value is
// the one applied, and the page's example is the full example file.

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

const configDoc = "../../docs/reference/config.md"

// keyPaths are the paths of every key a file may set that holds a value
// rather than more keys: "server.listen", "pools[].endpoints[].url",
// "models[].admission.classes.*.ttft_p99" (a map's key is "*").
func keyPaths(t reflect.Type, path string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t.Kind() == reflect.Struct && path != "" && t.PkgPath() == "time":
		return []string{path}
	case t.Kind() == reflect.Struct:
		var paths []string
		for name, ft := range yamlFields(t) {
			paths = append(paths, keyPaths(ft, join(path, name))...)
		}
		return paths
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct:
		return keyPaths(t.Elem(), path+"[]")
	case t.Kind() == reflect.Map && t.Elem().Kind() == reflect.Struct:
		return keyPaths(t.Elem(), path+".*")
	}
	return []string{path}
}

// rowRE is a row of the page's key tables: the key, its default.
var rowRE = regexp.MustCompile("(?m)^\\| `([a-z0-9_.\\[\\]*]+)` \\| ([^|]*) \\|")

func TestConfigReference(t *testing.T) {
	b, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)

	t.Run("example", func(t *testing.T) {
		_, block, ok := strings.Cut(doc, "\n```yaml\n")
		block, _, ok2 := strings.Cut(block, "\n```\n")
		if !ok || !ok2 {
			t.Fatal("config.md has no yaml block")
		}
		want, err := os.ReadFile("testdata/full.good.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(want), block+"\n"); diff != "" {
			t.Errorf("config.md's first yaml block differs from testdata/full.good.yaml (-full.good.yaml +config.md):\n%s", diff)
		}
	})

	paths := keyPaths(configType, "")
	slices.Sort(paths)
	rows := make(map[string]string) // key: a row's key; value: its default
	for _, m := range rowRE.FindAllStringSubmatch(doc, -1) {
		rows[m[1]] = strings.TrimSpace(m[2])
	}

	t.Run("every key", func(t *testing.T) {
		for _, p := range paths {
			if _, ok := rows[p]; !ok {
				t.Errorf("config.md has no row for %s", p)
			}
		}
		for r := range rows {
			if !slices.Contains(paths, r) {
				t.Errorf("config.md has a row for %s, which is no key", r)
			}
		}
	})

	t.Run("defaults", func(t *testing.T) {
		cfg := reflect.ValueOf(Default())
		pool := catalog.Pool{Endpoints: []catalog.Endpoint{{}}}
		PoolDefaults(&pool)
		for p, def := range rows {
			v, ok := strings.CutPrefix(def, "`")
			if v, ok = strings.CutSuffix(v, "`"); !ok || strings.Contains(v, "`") {
				continue // a default in words
			}
			var got reflect.Value
			switch {
			case strings.HasPrefix(p, "pools[]."):
				got = valueAt(reflect.ValueOf(pool), strings.TrimPrefix(p, "pools[]."))
			case !strings.Contains(p, "[]"):
				got = valueAt(cfg, p)
			default:
				t.Errorf("%s: a default written as a value, with none applied to check it against", p)
				continue
			}
			if !got.IsValid() {
				t.Errorf("%s: no such key in the defaults", p)
				continue
			}
			want := reflect.New(got.Type())
			if err := yaml.Unmarshal([]byte(v), want.Interface()); err != nil {
				t.Errorf("%s: default %s: %v", p, v, err)
				continue
			}
			if !reflect.DeepEqual(want.Elem().Interface(), got.Interface()) {
				t.Errorf("%s: config.md says the default is %s; the code applies %v", p, v, got.Interface())
			}
		}
	})

	t.Run("the example sets or shows every key", func(t *testing.T) {
		full, err := os.ReadFile("testdata/full.good.yaml")
		if err != nil {
			t.Fatal(err)
		}
		var root yaml.Node
		if err := yaml.Unmarshal(full, &root); err != nil {
			t.Fatal(err)
		}
		index := regexp.MustCompile(`\[\d+\]`)
		var set []string
		for p := range walkFields(&root).lines {
			set = append(set, index.ReplaceAllString(p, "[]"))
		}
		for _, p := range paths {
			re := regexp.MustCompile("^" + strings.ReplaceAll(regexp.QuoteMeta(p), `\*`, `[^.]+`) + `(\.|$)`)
			leaf := p[strings.LastIndex(p, ".")+1:]
			if !slices.ContainsFunc(set, re.MatchString) && !strings.Contains(string(full), "# "+leaf+": ") {
				t.Errorf("testdata/full.good.yaml neither sets nor shows %s", p)
			}
		}
	})
}

// valueAt is the value at the dotted key path p within v, a struct, the
// first item of each list on the way ("endpoints[].weight"); the zero
// Value when there is none.
func valueAt(v reflect.Value, p string) reflect.Value {
	for name := range strings.SplitSeq(p, ".") {
		name, item := strings.CutSuffix(name, "[]")
		v = fieldByYAML(v, name)
		if item && v.IsValid() {
			if v.Len() == 0 {
				return reflect.Value{}
			}
			v = v.Index(0)
		}
		if !v.IsValid() {
			return v
		}
	}
	return v
}

// fieldByYAML is the field of struct v that the YAML key name decodes
// into, looking through inlined structs as yamlFields does.
func fieldByYAML(v reflect.Value, name string) reflect.Value {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		tag, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if strings.Contains(","+opts+",", ",inline,") {
			if fv := fieldByYAML(v.Field(i), name); fv.IsValid() {
				return fv
			}
			continue
		}
		if tag == "" {
			tag = strings.ToLower(f.Name)
		}
		if tag == name && f.IsExported() {
			return v.Field(i)
		}
	}
	return reflect.Value{}
}
