package admission

// Priority classes: how much a request is protected when its model's pool
// is busy. The class comes from the key; a request may lower its own with
// the x-llmgw-priority header, never raise it. Without keys the header
// sets it.

import (
	"net/http"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// PriorityHeader lowers a request's class below its key's.
const PriorityHeader = "X-Llmgw-Priority"

// Class is a priority class as a band: critical is 0 and served first.
type Class int

const (
	Critical Class = iota
	Standard
	Sheddable
	numClasses
)

// classNames is every class's name by band: its label and config key.
var classNames = [numClasses]string{tenant.PriorityCritical, tenant.PriorityStandard, tenant.PrioritySheddable}

func (c Class) String() string { return classNames[c] }

// parseClass is the band a class name names; an empty name is standard.
func parseClass(name string) (Class, bool) {
	if name == "" {
		return Standard, true
	}
	for c, n := range classNames {
		if n == name {
			return Class(c), true
		}
	}
	return 0, false
}

// TenantHeader names the tenant of a request without keys, for sharing
// the admission queue between tenants. With keys, the key's tenant counts
// and the header is ignored.
const TenantHeader = "X-Llmgw-Tenant"

// RequestTenant is the tenant path admission shares the queue by: the
// key's, or without keys the header's when it is a valid path; empty
// otherwise. A header value lives only while its requests wait, so
// clients cannot grow anything with it.
func RequestTenant(hr *http.Request, key *tenant.Key) string {
	if key != nil {
		return key.Tenant
	}
	h := hr.Header.Get(TenantHeader)
	if h == "" {
		return "" // the usual case, without the parser's error
	}
	p, err := tenant.ParsePath(h)
	if err != nil {
		return ""
	}
	return p
}

// RequestClass is the request's class: its key's (standard when the key
// has none, or without keys), or the header's when that is lower. A
// header naming no class is a bad request; one asking for more than the
// key's class is held at the key's.
func RequestClass(hr *http.Request, key *tenant.Key) (Class, error) {
	c := Standard
	if key != nil {
		if kc, ok := parseClass(key.Priority); ok {
			c = kc
		}
	}
	v := hr.Header.Get(PriorityHeader)
	if v == "" {
		return c, nil
	}
	hc, ok := parseClass(v)
	if !ok {
		return 0, openai.BadRequest("", "The x-llmgw-priority header must be critical, standard or sheddable.")
	}
	if key == nil || hc > c {
		return hc, nil
	}
	return c, nil
}

// ClassNamed is the class of the given name, as a key's priority or the
// x-llmgw-priority header names it; an empty name is standard, and false
// is a name of no class.
func ClassNamed(name string) (Class, bool) { return parseClass(name) }
