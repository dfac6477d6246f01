package config

import (
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestReloadTableClassifiesEveryField: every field of Config, a section's
// keys one by one and a top-level list as a whole, has a row in
// reloadTable, and every row names a field, once.
func TestReloadTableClassifiesEveryField(t *testing.T) {
	rows := make(map[string]bool)
	for _, f := range reloadTable {
		if rows[f.path] {
			t.Errorf("%s: two rows", f.path)
		}
		rows[f.path] = true
		if !fieldAt(reflect.ValueOf(Default()), f.path).IsValid() {
			t.Errorf("%s: a row for no field of Config", f.path)
		}
	}
	for i := range configType.NumField() {
		f := configType.Field(i)
		name, _ := yamlKey(f)
		if rows[name] {
			continue
		}
		if f.Type.Kind() != reflect.Struct {
			t.Errorf("%s: no row in reloadTable says whether a reload applies it", name)
			continue
		}
		for j := range f.Type.NumField() {
			if key, _ := yamlKey(f.Type.Field(j)); !rows[name+"."+key] {
				t.Errorf("%s.%s: no row in reloadTable says whether a reload applies it", name, key)
			}
		}
	}
}

// TestNeedRestart: a change to any one field a reload does not apply is
// named, and it alone; a change to one a reload applies names nothing.
func TestNeedRestart(t *testing.T) {
	inService, err := Load("testdata/full.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range reloadTable {
		t.Run(f.path, func(t *testing.T) {
			next, err := Load("testdata/full.good.yaml")
			if err != nil {
				t.Fatal(err)
			}
			if got := NeedRestart(inService, next); len(got) != 0 {
				t.Fatalf("the same file needs a restart for %q", got)
			}
			change(t, fieldAt(reflect.ValueOf(next).Elem(), f.path))
			var want []string
			if !f.reloads {
				want = []string{f.path}
			}
			if diff := cmp.Diff(want, NeedRestart(inService, next)); diff != "" {
				t.Errorf("NeedRestart after %s changed (-want +got):\n%s", f.path, diff)
			}
		})
	}
}

// change sets v to another value of its type.
func change(t *testing.T, v reflect.Value) {
	t.Helper()
	switch v.Kind() {
	case reflect.String:
		v.SetString(v.String() + "x")
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Slice:
		if v.Len() > 0 {
			v.Set(v.Slice(0, v.Len()-1))
		} else {
			v.Set(reflect.Append(v, reflect.Zero(v.Type().Elem())))
		}
	case reflect.Struct:
		change(t, v.Field(0))
	default:
		t.Fatalf("no way to change a %s", v.Type())
	}
}
