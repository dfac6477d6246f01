package app

import (
	"reflect"
	"testing"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router"
)

// TestRouterOptionsFromConfig holds the router's options to the
// configuration they come from: each option takes the value of the
// configuration field of its name, every field given a value of its own
// so that none is dropped or swapped.
func TestRouterOptionsFromConfig(t *testing.T) {
	var s config.Server
	var r config.Router
	distinct(t, &s)
	distinct(t, &r)
	sameFields(t, serverOptions(s), s)
	sameFields(t, routerOptions(r), r)

	if config.CacheIsolationNone != router.CacheIsolationNone {
		t.Errorf("cache_isolation %q reaches the router, whose word for none is %q", config.CacheIsolationNone, router.CacheIsolationNone)
	}
}

// distinct sets each field of the struct p points to a value no other
// field has.
func distinct(t *testing.T, p any) {
	v := reflect.ValueOf(p).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(v.Type().Field(i).Name)
		case reflect.Int, reflect.Int64:
			f.SetInt(int64(i + 1))
		case reflect.Bool:
			f.SetBool(true)
		default:
			t.Fatalf("%s.%s: a %s, which the test cannot set", v.Type(), v.Type().Field(i).Name, f.Kind())
		}
	}
}

// sameFields checks that every field of opts equals the field of the same
// name in from.
func sameFields(t *testing.T, opts, from any) {
	t.Helper()
	o, f := reflect.ValueOf(opts), reflect.ValueOf(from)
	for i := range o.NumField() {
		name := o.Type().Field(i).Name
		src := f.FieldByName(name)
		if !src.IsValid() {
			t.Errorf("%s.%s: %s has no field of that name", o.Type(), name, f.Type())
			continue
		}
		if got, want := o.Field(i).Interface(), src.Interface(); got != want {
			t.Errorf("%s.%s = %v, want %v, the configuration's", o.Type(), name, got, want)
		}
	}
}
