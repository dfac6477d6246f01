// What a reload applies. Every field of a file is in one table, which
// says whether a reload puts it in service or it takes effect only when
// llmgw starts; a test fails on a field of Config the table leaves out.

package config

import (
	"reflect"
	"strings"
)

// fieldReload is one row of the table: a field, by its path as a file
// writes it (a section's key, "server.listen", or a whole top-level
// list, "pools"), and whether a reload applies it.
type fieldReload struct {
	path    string
	reloads bool
}

// reloadTable classifies every field. A reload applies the catalog (pools
// and models), the file's tenant limits, the admin token and the MCP
// servers; the
// listeners, timeouts, the store and its spool, limits, routing options,
// profiles and telemetry are set up once, when llmgw starts.
var reloadTable = []fieldReload{
	{"server.listen", false},
	{"server.admin_listen", false},
	{"server.max_body_bytes", false},
	{"server.body_timeout", false},
	{"server.http", false},
	{"server.connect_timeout", false},
	{"server.first_token_timeout", false},
	{"server.idle_timeout", false},
	{"server.request_timeout", false},
	{"server.keepalive", false},
	{"server.retries", false},
	{"server.drain_delay", false},
	{"server.shutdown_grace", false},

	{"router.auth", false},
	{"router.tenant_label", false},
	{"router.tenant_label_limit", false},
	{"router.default_max_tokens", false},
	{"router.share_prefix_index", false},
	{"router.share_load", false},
	{"router.share_channel", false},
	{"router.cache_isolation", false},
	{"router.cache_secret", false},

	{"store.url", false},
	{"store.spool_dir", false},

	{"limits.redis", false},
	{"limits.redis_ca_file", false},
	{"limits.redis_cert_file", false},
	{"limits.redis_key_file", false},
	{"limits.on_redis_error", false},

	{"admin.token", true},
	{"admin.pprof", false},
	{"admin.audit_retention", false},
	{"admin.disable_token", false},
	{"admin.oidc", false},

	{"epp.listen", false},
	{"epp.tls", false},
	{"epp.discovery_file", false},
	{"epp.discovery_pool", true},

	{"tenants", true},
	{"pools", true},
	{"models", true},

	{"alerts.webhook_url", false},
	{"alerts.secret_env", false},

	{"telemetry.traces", false},
	{"telemetry.endpoint", false},
	{"telemetry.record_content", false},
	{"telemetry.client_trace", false},
	{"telemetry.access_log", false},

	{"mcp.allow_stdio", false},
	{"mcp.servers", true},
}

// Reloaded is the fields a reload applies, as a file writes them.
func Reloaded() []string {
	var paths []string
	for _, f := range reloadTable {
		if f.reloads {
			paths = append(paths, f.path)
		}
	}
	return paths
}

// NeedRestart is the fields that differ between the configuration in
// service and next, a file loaded again, and that a reload does not
// apply: each is named as a file writes it, in the table's order. Empty
// means a reload puts every change in service.
func NeedRestart(inService, next *Config) []string {
	var changed []string
	for _, f := range reloadTable {
		if f.reloads {
			continue
		}
		a, b := fieldAt(reflect.ValueOf(inService).Elem(), f.path), fieldAt(reflect.ValueOf(next).Elem(), f.path)
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			changed = append(changed, f.path)
		}
	}
	return changed
}

// fieldAt is the field of struct v at path, by YAML keys joined with
// dots; the zero Value when there is none.
func fieldAt(v reflect.Value, path string) reflect.Value {
	for _, key := range strings.Split(path, ".") {
		if v.Kind() != reflect.Struct {
			return reflect.Value{}
		}
		next := reflect.Value{}
		for i := range v.NumField() {
			if name, _ := yamlKey(v.Type().Field(i)); name == key {
				next = v.Field(i)
				break
			}
		}
		if !next.IsValid() {
			return next
		}
		v = next
	}
	return v
}
