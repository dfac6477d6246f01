// Validation of the catalog a file describes: its pools, their endpoints
// and hedges, and its models, with their SLOs, prices, billed fields and
// admission.

package config

import (
	"fmt"
	"maps"
	"math"
	"net/url"
	"slices"
	"strings"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
)

// isAPIVersion reports whether v looks like a provider's API version: a
// date, perhaps with a suffix such as -preview, and nothing that would
// need escaping in a query or a header.
func isAPIVersion(v string) bool {
	if len(v) < 10 || len(v) > 40 {
		return false
	}
	for _, c := range v {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// isRegion reports whether r looks like an AWS region: us-east-1,
// eu-central-2, us-gov-west-1...: lower-case letters, digits and dashes,
// nothing a host name would need escaped.
func isRegion(r string) bool {
	if len(r) < 4 || len(r) > 32 || r[0] == '-' || r[len(r)-1] == '-' {
		return false
	}
	for _, c := range r {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// checkCloud checks a pool's cloud settings: a bedrock pool's region
// (required) and role (an IAM role's ARN), a vertex pool's project and
// location (required) and credentials file, a gemini pool's key; no
// other kind has them. Bedrock and vertex pools sign with their cloud's
// credentials, never api_key_env.
func checkCloud(ps *problems, at string, p *catalog.Pool) {
	only := func(field, value, kind string) {
		if value != "" && p.Kind != kind {
			ps.add(at+"."+field, "is only for pools of kind %s, not %q", kind, p.Kind)
		}
	}
	only("region", p.Region, catalog.KindBedrock)
	only("role", p.Role, catalog.KindBedrock)
	only("project", p.Project, catalog.KindVertex)
	only("location", p.Location, catalog.KindVertex)
	only("credentials_file", p.CredentialsFile, catalog.KindVertex)
	only("publisher", p.Publisher, catalog.KindVertex)
	switch p.Kind {
	case catalog.KindVertex:
		if p.Publisher != "" && p.Publisher != catalog.PublisherGoogle && p.Publisher != catalog.PublisherAnthropic {
			ps.add(at+".publisher", "must be google or anthropic, got %q", p.Publisher)
		}
		if p.Project == "" || !isRegion(p.Project) {
			ps.add(at+".project", "must be a Google Cloud project id for a pool of kind vertex, got %q", p.Project)
		}
		if p.Location != "global" && !isRegion(p.Location) {
			ps.add(at+".location", "must be a Google Cloud location such as us-central1 or global for a pool of kind vertex, got %q", p.Location)
		}
		if p.APIKeyEnv != "" {
			ps.add(at+".api_key_env", "is not for pools of kind vertex, which take a bearer token from Application Default Credentials or credentials_file")
		}
		if p.APIKeyFile != "" {
			ps.add(at+".api_key_file", "is not for pools of kind vertex, which take a bearer token from Application Default Credentials or credentials_file")
		}
		return
	case catalog.KindGemini:
		if p.APIKeyEnv == "" && p.APIKeyFile == "" {
			ps.add(at+".api_key_env", "must name the environment variable holding the Gemini API key for a pool of kind gemini, or api_key_file the file holding it")
		}
		return
	case catalog.KindBedrock:
	default:
		return
	}
	if !isRegion(p.Region) {
		ps.add(at+".region", "must be an AWS region such as us-east-1 for a pool of kind bedrock, got %q", p.Region)
	}
	if p.Role != "" && !strings.HasPrefix(p.Role, "arn:") {
		ps.add(at+".role", "must be an IAM role's ARN (arn:aws:iam::123456789012:role/name), got %q", p.Role)
	}
	if p.APIKeyEnv != "" {
		ps.add(at+".api_key_env", "is not for pools of kind bedrock, which sign with AWS credentials from the default chain")
	}
	if p.APIKeyFile != "" {
		ps.add(at+".api_key_file", "is not for pools of kind bedrock, which sign with AWS credentials from the default chain")
	}
}

func validatePools(ps *problems, pools []catalog.Pool, discovered string) {
	seen := make(map[string]int, len(pools)) // key: pool name; value: index in pools
	for i := range pools {
		p := &pools[i]
		at := fmt.Sprintf("pools[%d]", i)
		if p.Name == "" {
			ps.add(at+".name", "must not be empty")
		} else if j, dup := seen[p.Name]; dup {
			ps.add(at+".name", "%q is already the name of pools[%d]", p.Name, j)
		} else {
			seen[p.Name] = i
		}
		if p.Kind != "" && !slices.Contains(catalog.Kinds, p.Kind) {
			ps.add(at+".kind", "must be one of %s, got %q", strings.Join(catalog.Kinds, ", "), p.Kind)
		}
		switch {
		case p.Kind == catalog.KindAzure && p.APIVersion == "":
			ps.add(at+".api_version", "must be set for a pool of kind azure, such as \"2024-10-21\"")
		case p.APIVersion != "" && p.Kind != catalog.KindAzure && p.Kind != catalog.KindAnthropic:
			ps.add(at+".api_version", "is only for pools of kind azure or anthropic, not %q", p.Kind)
		case p.APIVersion != "" && !isAPIVersion(p.APIVersion):
			ps.add(at+".api_version", "must be a version such as 2024-10-21, got %q", p.APIVersion)
		}
		checkCloud(ps, at, p)
		if p.APIKeyEnv != "" && !isEnvName(p.APIKeyEnv) {
			// Not echoed: a key pasted here by mistake must not reach a log.
			ps.add(at+".api_key_env", "must be the name of an environment variable (letters, digits, _), not the key itself")
		}
		if p.APIKeyEnv != "" && p.APIKeyFile != "" {
			ps.add(at+".api_key_file", "set api_key_env or api_key_file, not both")
		}
		if p.Policy != "" && !slices.Contains(catalog.Policies, p.Policy) {
			ps.add(at+".policy", "must be one of %s, got %q", strings.Join(catalog.Policies, ", "), p.Policy)
		}
		checkEPP(ps, at, *p)
		checkProbePath(ps, at+".metrics.path", p.Metrics.Path)
		notNegative(ps, at+".metrics.interval", p.Metrics.Interval)
		notNegative(ps, at+".metrics.max_age", p.Metrics.MaxAge)
		if p.Metrics.MaxAge > 0 && p.Metrics.MaxAge < p.Metrics.Interval {
			ps.add(at+".metrics.max_age", "must be at least metrics.interval (%s), got %s", p.Metrics.Interval, p.Metrics.MaxAge)
		}
		checkProbePath(ps, at+".health.path", p.Health.Path)
		notNegative(ps, at+".health.interval", p.Health.Interval)
		notNegative(ps, at+".health.timeout", p.Health.Timeout)
		if p.Health.Timeout > 0 && p.Health.Interval > 0 && p.Health.Timeout > p.Health.Interval {
			ps.add(at+".health.timeout", "must not be above health.interval (%s), got %s", p.Health.Interval, p.Health.Timeout)
		}
		if !(p.RetryBudget >= 0 && p.RetryBudget <= 1) {
			ps.add(at+".retry_budget", "must be a share from 0 to 1, got %v", p.RetryBudget)
		}
		switch {
		case p.Slots < 0 || p.Slots > maxSlots:
			ps.add(at+".slots", "must be from 1 to %d, got %d", maxSlots, p.Slots)
		case p.Slots > 0 && !catalog.SlotCache(p.Kind):
			ps.add(at+".slots", "is only for pools of kind llamacpp or ollama, not %q", p.Kind)
		}
		checkHedge(ps, at+".hedge", p.Hedge)
		if len(p.Endpoints) == 0 && (discovered == "" || p.Name != discovered) {
			ps.add(at+".endpoints", "must list at least one endpoint")
		}
		if len(p.Endpoints) > MaxEndpoints {
			ps.add(at+".endpoints", "must list at most %d endpoints, got %d", MaxEndpoints, len(p.Endpoints))
		}
		names := make(map[string]int, len(p.Endpoints)) // key: endpoint name; value: index
		for k, e := range p.Endpoints {
			if e.Name == "" {
				continue
			}
			eat := fmt.Sprintf("%s.endpoints[%d].name", at, k)
			if !isLabel(e.Name) {
				ps.add(eat, "must be 1 to 64 letters, digits and . _ : -, got %q", e.Name)
			} else if j, dup := names[e.Name]; dup {
				ps.add(eat, "%q is already the name of endpoints[%d] of this pool", e.Name, j)
			} else {
				names[e.Name] = k
			}
		}
		urls := make(map[string]int, len(p.Endpoints)) // key: endpoint URL; value: index
		for k, e := range p.Endpoints {
			eat := fmt.Sprintf("%s.endpoints[%d]", at, k)
			if checkEndpointURL(ps, eat+".url", e.URL) {
				if j, dup := urls[e.URL]; dup {
					ps.add(eat+".url", "%q is already endpoints[%d] of this pool", e.URL, j)
				} else {
					urls[e.URL] = k
				}
			}
			if e.Weight < 0 {
				ps.add(eat+".weight", "must not be negative, got %d", e.Weight)
			}
		}
	}
}

// Bounds on a pool's hedge. Waiting less than the prediction itself
// (after at most 1) would hedge a request that is on time. A request
// MaxHedgeAfter times later than predicted is stuck, not slow: the
// first-token timeout's business. MaxHedgeMinWait is the default
// first-token timeout, past which no hedge would be sent.
const (
	MaxHedgeAfter   = 20
	MaxHedgeMinWait = DefaultFirstTokenTimeout
)

// checkHedge checks a pool's hedge: off (after zero, and no min_wait), or
// after above 1 and within bounds.
func checkHedge(ps *problems, path string, h catalog.Hedge) {
	switch {
	case h.After == 0 && h.MinWait != 0:
		ps.add(path+".min_wait", "is set but hedge.after is not, so hedging is off; set after (such as 3) or drop min_wait")
	case h.After == 0:
	case !(h.After > 1 && h.After <= MaxHedgeAfter):
		ps.add(path+".after", "must be above 1 and at most %d (times the predicted time to first token), got %v", MaxHedgeAfter, h.After)
	}
	if h.MinWait < 0 || h.MinWait > MaxHedgeMinWait {
		ps.add(path+".min_wait", "must be from 0 to %s, got %s", MaxHedgeMinWait, h.MinWait)
	}
}

// maxSlots is the most slots a pool may say its servers run: llama.cpp
// runs one per parallel sequence, a handful to a few hundred, and its
// /slots is read up to as many.
const maxSlots = 4096

// MaxEndpoints is the most endpoints a pool may have: routing keeps the
// endpoints that hold a prompt block as bits of one 64-bit word.
const MaxEndpoints = 64

// checkProbePath checks a path probed on an endpoint's host: empty, or
// absolute without a query.
func checkProbePath(ps *problems, path, v string) {
	if v != "" && (!strings.HasPrefix(v, "/") || strings.ContainsAny(v, "?# ")) {
		ps.add(path, "must be a path such as /metrics, without a query, got %q", v)
	}
}

// isLabel reports whether s may be a metric label value chosen by an
// operator: short, and of characters that need no quoting anywhere.
func isLabel(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return false
		}
	}
	return true
}

// checkEndpointURL checks an endpoint's base URL and reports whether it
// is good.
func checkEndpointURL(ps *problems, path, raw string) bool {
	if raw == "" {
		ps.add(path, "must not be empty")
		return false
	}
	u, err := url.Parse(raw)
	if err == nil && u.User != nil {
		// Not echoed: it holds a password. Keys belong in api_key_env.
		ps.add(path, "must not hold a user or password; put the key in the pool's api_key_env")
		return false
	}
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		ps.add(path, "must be an http or https URL, got %q", raw)
		return false
	}
	if u.RawQuery != "" || u.Fragment != "" {
		ps.add(path, "must be a base URL without a query or fragment, got %q", raw)
		return false
	}
	return true
}

// isEnvName reports whether s is a portable environment variable name.
func isEnvName(s string) bool {
	for i, r := range s {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return s != ""
}

func validateModels(ps *problems, models []catalog.Model, pools []catalog.Pool) {
	if len(models) == 0 {
		ps.add("models", "must list at least one model")
	}
	poolNames := make(map[string]bool, len(pools))
	for _, p := range pools {
		poolNames[p.Name] = true
	}
	owner := make(map[string]int, 2*len(models)) // key: model name or alias; value: index in models
	claim := func(at, name string, i int) {
		if name == "" {
			ps.add(at, "must not be empty")
		} else if j, dup := owner[name]; dup {
			ps.add(at, "%q is already the name or alias of models[%d]", name, j)
		} else {
			owner[name] = i
		}
	}
	for i := range models {
		m := &models[i]
		at := fmt.Sprintf("models[%d]", i)
		claim(at+".name", m.Name, i)
		for k, a := range m.Aliases {
			claim(fmt.Sprintf("%s.aliases[%d]", at, k), a, i)
		}
		switch {
		case m.Pool == "":
			ps.add(at+".pool", "must not be empty")
		case !poolNames[m.Pool]:
			ps.add(at+".pool", "pool %q is not defined", m.Pool)
		}
		if m.SLO.TTFTp99 < 0 {
			ps.add(at+".slo.ttft_p99", "must be positive, got %s", m.SLO.TTFTp99)
		}
		if m.SLO.TPOTp99 < 0 {
			ps.add(at+".slo.tpot_p99", "must be positive, got %s", m.SLO.TPOTp99)
		}
		money(ps, at+".price.input_per_million", m.Price.InputPerMillion)
		money(ps, at+".price.output_per_million", m.Price.OutputPerMillion)
		validateBilledFields(ps, at, m)
		if m.FirstTokenTimeout < 0 {
			ps.add(at+".first_token_timeout", "must be positive, got %s", m.FirstTokenTimeout)
		}
		validateAdmission(ps, at+".admission", m)
		if m.HostedTools != "" && m.HostedTools != catalog.HostedToolsDrop && m.HostedTools != catalog.HostedToolsRefuse {
			ps.add(at+".hosted_tools", "must be %s or %s, got %q", catalog.HostedToolsDrop, catalog.HostedToolsRefuse, m.HostedTools)
		}
	}
	// Fallbacks may name models defined later in the file, so they are
	// checked once every name is known.
	for i := range models {
		m := &models[i]
		listed := make(map[int]int, len(m.Fallbacks)) // key: model index; value: fallback index
		for k, f := range m.Fallbacks {
			at := fmt.Sprintf("models[%d].fallbacks[%d]", i, k)
			j, ok := owner[f]
			switch {
			case !ok:
				ps.add(at, "%q is not a model", f)
			case j == i:
				ps.add(at, "%q is this model itself", f)
			default:
				if prev, dup := listed[j]; dup {
					ps.add(at, "%q is the same model as fallbacks[%d]", f, prev)
				} else {
					listed[j] = k
				}
			}
		}
		for _, class := range slices.Sorted(maps.Keys(m.FallbacksByClass)) {
			at := fmt.Sprintf("models[%d].fallbacks_by_class.%s", i, class)
			if !slices.Contains(catalog.ErrorClasses, class) {
				ps.add(at, "must be keyed by one of context_window_exceeded, content_filter, rate_limited, unavailable")
				continue
			}
			for k, f := range m.FallbacksByClass[class] {
				if j, ok := owner[f]; !ok {
					ps.add(fmt.Sprintf("%s[%d]", at, k), "%q is not a model", f)
				} else if j == i {
					ps.add(fmt.Sprintf("%s[%d]", at, k), "%q is this model itself", f)
				}
			}
		}
	}
}

// validateBilledFields checks a model's billed_fields, and the service
// tiers its price lists: a field allowed must be one the ledger prices,
// and service_tier is allowed only with the tiers it prices.
func validateBilledFields(ps *problems, at string, m *catalog.Model) {
	b := m.BilledFields
	if b.Others != "" && b.Others != catalog.BilledFieldsDrop && b.Others != catalog.BilledFieldsRefuse {
		ps.add(at+".billed_fields.others", "must be %s or %s, got %q", catalog.BilledFieldsDrop, catalog.BilledFieldsRefuse, b.Others)
	}
	for k, f := range b.Allow {
		if !slices.Contains(catalog.AllowableFields, f) {
			ps.add(fmt.Sprintf("%s.billed_fields.allow[%d]", at, k), "must be one of %s, whose cost the ledger prices, got %q",
				strings.Join(catalog.AllowableFields, ", "), f)
		}
	}
	if slices.Contains(b.Allow, catalog.FieldServiceTier) && len(m.Price.ServiceTiers) == 0 {
		ps.add(at+".billed_fields.allow", "service_tier needs price.service_tiers, the tiers it lets through and their prices")
	}
	for _, tier := range slices.Sorted(maps.Keys(m.Price.ServiceTiers)) {
		p := m.Price.ServiceTiers[tier]
		if tier == "" {
			ps.add(at+".price.service_tiers", "a tier's name must not be empty")
		}
		money(ps, at+".price.service_tiers."+tier+".input_per_million", p.InputPerMillion)
		money(ps, at+".price.service_tiers."+tier+".output_per_million", p.OutputPerMillion)
	}
}

// validateAdmission checks a model's admission settings. Every class must
// end up with a TTFT SLO when admission is on, since a request's deadline
// is its arrival plus its class's.
func validateAdmission(ps *problems, at string, m *catalog.Model) {
	a := m.Admission
	if a.Queue < 0 {
		ps.add(at+".queue", "must not be negative, got %d", a.Queue)
	}
	for _, c := range slices.Sorted(maps.Keys(a.Classes)) {
		s := a.Classes[c]
		cat := at + ".classes." + c
		if !tenant.ValidPriority(c) {
			ps.add(cat, "%q is not a priority class: critical, standard or sheddable", c)
			continue
		}
		if s.TTFTp99 < 0 {
			ps.add(cat+".ttft_p99", "must be positive, got %s", s.TTFTp99)
		}
		if s.TPOTp99 < 0 {
			ps.add(cat+".tpot_p99", "must be positive, got %s", s.TPOTp99)
		}
	}
	for _, t := range slices.Sorted(maps.Keys(a.TenantWeights)) {
		if _, err := tenant.ParsePath(t); err != nil {
			ps.add(at+".tenant_weights", "%v", err)
			continue
		}
		if w := a.TenantWeights[t]; !(w > 0) || math.IsInf(w, 0) {
			ps.add(at+".tenant_weights."+t, "must be positive, got %v", w)
		}
	}
	if !a.Enabled {
		return
	}
	for _, c := range []string{tenant.PriorityCritical, tenant.PriorityStandard, tenant.PrioritySheddable} {
		if m.ClassSLO(c).TTFTp99 <= 0 && a.Classes[c].TTFTp99 == 0 {
			ps.add(at+".classes."+c+".ttft_p99", "must be set when admission is enabled and the model has no slo.ttft_p99")
		}
	}
}

// checkEPP checks a pool's epp: set, and only set, with policy epp.
func checkEPP(ps *problems, at string, p catalog.Pool) {
	if p.Policy != catalog.PolicyEPP {
		if p.EPP != (catalog.EPP{}) {
			ps.add(at+".epp", "is only for a pool of policy epp, not %q", p.Policy)
		}
		return
	}
	checkAddr(ps, at+".epp.address", p.EPP.Address)
	if p.EPP.FailureMode != catalog.FailOpen && p.EPP.FailureMode != catalog.FailClose {
		ps.add(at+".epp.failure_mode", "must be %s or %s, got %q", catalog.FailOpen, catalog.FailClose, p.EPP.FailureMode)
	}
	positive(ps, at+".epp.timeout", p.EPP.Timeout)
}
