// Package catalog is the control plane's list of what llmgw serves: models
// with their aliases, SLOs, prices and fallbacks, and the pools of endpoints
// that serve them. A Catalog is immutable once built; a reload builds a new
// one and swaps it in whole.
package catalog

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// Model is one servable model as the catalog names it.
type Model struct {
	Name    string   `yaml:"name"`
	Aliases []string `yaml:"aliases,omitempty"`
	// Pool names the pool that serves the model.
	Pool string `yaml:"pool"`
	// Upstream is the model name the pool's servers know it by; empty means
	// the same as Name.
	Upstream string `yaml:"upstream_model,omitempty"`
	SLO      SLO    `yaml:"slo,omitempty"`
	Price    Price  `yaml:"price,omitempty"`
	// Fallbacks are models, by name or alias, tried in order when every
	// endpoint of this model's pool failed before the first byte.
	Fallbacks []string `yaml:"fallbacks,omitempty"`
	// FallbacksByClass are models, by name or alias, tried first when a
	// call to this model failed with an error of the class it is keyed
	// by (ErrorClasses), before any of Fallbacks: a model with a longer
	// context for context_window_exceeded, another provider for
	// rate_limited or unavailable.
	FallbacksByClass map[ErrorClass][]string `yaml:"fallbacks_by_class,omitempty"`
	// FirstTokenTimeout bounds the wait for the first byte of an answer;
	// zero means the server's default.
	FirstTokenTimeout time.Duration `yaml:"first_token_timeout,omitempty"`
	// Admission is how requests wait for room in the model's pool when it
	// is busy; off unless enabled.
	Admission Admission `yaml:"admission,omitempty"`
	// HostedTools is what a Responses or Messages request naming tools
	// that run on the provider's side (web search, code interpreter...)
	// gets: drop (the default: the model is offered the client's tools
	// alone, and X-Llmgw-Dropped-Tools names the rest) or refuse (a 400
	// naming the first).
	HostedTools string `yaml:"hosted_tools,omitempty"`
	// BilledFields is what becomes of the fields a request names that
	// change what the model's provider bills or runs beyond its tokens:
	// service_tier, store, web_search_options and the others
	// docs/SECURITY.md lists.
	BilledFields BilledFields `yaml:"billed_fields,omitempty"`
}

// The values of a model's hosted_tools.
const (
	HostedToolsDrop   = "drop"
	HostedToolsRefuse = "refuse"
)

// BilledFields is what a model's requests may send of the fields that
// change what its provider bills or runs: those Allow names are sent as
// asked, and priced, and the rest are dropped from the body or refused,
// as Others says.
type BilledFields struct {
	// Allow names the fields sent as asked, each one of AllowableFields;
	// service_tier only at the tiers the model's price lists.
	Allow []string `yaml:"allow,omitempty"`
	// Others is what a request naming any other gets: drop (the default:
	// the field is taken out of what the provider is sent) or refuse (a
	// 400 naming it).
	Others string `yaml:"others,omitempty"`
}

// The values of a model's billed_fields.others.
const (
	BilledFieldsDrop   = "drop"
	BilledFieldsRefuse = "refuse"
)

// FieldServiceTier is the field that asks a provider for a service tier,
// which a model's price may list (Price.ServiceTiers).
const FieldServiceTier = "service_tier"

// AllowableFields are the billed fields a model may allow, those whose
// cost the ledger prices: service_tier at the tier's own price; store and
// prompt_cache_retention, for which providers charge nothing; prediction,
// whose rejected tokens providers bill and report as completion tokens.
// The others (web searches, audio, a fast mode, another region's
// inference, a container, another model, compaction) cost what no usage
// record holds.
var AllowableFields = []string{FieldServiceTier, "store", "prompt_cache_retention", "prediction"}

// Allows reports whether a request for m may send field, one of those
// that change what a provider bills, as asked: billed_fields.allow names
// it, and for service_tier, the model's price lists tier, the tier asked.
func (m *Model) Allows(field, tier string) bool {
	if !slices.Contains(m.BilledFields.Allow, field) {
		return false
	}
	if field == FieldServiceTier {
		_, priced := m.Price.ServiceTiers[tier]
		return priced
	}
	return true
}

// Admission is a model's SLO-aware admission: a bounded queue in front of
// its pool, served by priority class, earliest deadline and tenant share.
type Admission struct {
	Enabled bool `yaml:"enabled,omitempty"`
	// Queue bounds the model's waiting requests; zero means
	// DefaultAdmissionQueue.
	Queue int `yaml:"queue,omitempty"`
	// Classes are the SLOs of each priority class (critical, standard,
	// sheddable); a class or a figure not set takes the model's SLO.
	Classes map[string]SLO `yaml:"classes,omitempty"`
	// TenantWeights are the shares of tenants, by tenant path, within a
	// class; a tenant takes the weight of its nearest listed ancestor,
	// or 1.
	TenantWeights map[string]float64 `yaml:"tenant_weights,omitempty"`
}

// DefaultAdmissionQueue is a model's queue bound when admission.queue is
// not set. A vLLM endpoint prefills about 10,000 tokens a second: ten
// 1,000-token prompts. With a 2 s TTFT SLO and a pool of three, about 60
// queued requests can still meet it; more would only wait to be refused.
const DefaultAdmissionQueue = 64

// ClassSLO is the SLO of a priority class: the class's own figures, each
// falling back to the model's.
func (m *Model) ClassSLO(class string) SLO {
	s := m.Admission.Classes[class]
	if s.TTFTp99 <= 0 {
		s.TTFTp99 = m.SLO.TTFTp99
	}
	if s.TPOTp99 <= 0 {
		s.TPOTp99 = m.SLO.TPOTp99
	}
	return s
}

// QueueBound is the model's admission queue bound.
func (m *Model) QueueBound() int {
	if m.Admission.Queue > 0 {
		return m.Admission.Queue
	}
	return DefaultAdmissionQueue
}

// UpstreamName is the name the model's pool knows it by.
func (m *Model) UpstreamName() string {
	if m.Upstream != "" {
		return m.Upstream
	}
	return m.Name
}

// SLO is a model's latency objective. Zero means none of that kind.
type SLO struct {
	TTFTp99 time.Duration `yaml:"ttft_p99,omitempty"`
	TPOTp99 time.Duration `yaml:"tpot_p99,omitempty"`
}

// Price is what a model costs, in US dollars per million tokens.
type Price struct {
	InputPerMillion  float64 `yaml:"input_per_million,omitempty"`
	OutputPerMillion float64 `yaml:"output_per_million,omitempty"`
	// ServiceTiers are what its tokens cost at the service tiers a
	// request may ask of its provider, by the tier as service_tier names
	// it (priority, flex...).
	ServiceTiers map[string]TierPrice `yaml:"service_tiers,omitempty"`
}

// TierPrice is what a model's tokens cost at one service tier, in US
// dollars per million tokens; a figure not set (zero) is the model's.
type TierPrice struct {
	InputPerMillion  float64 `yaml:"input_per_million,omitempty"`
	OutputPerMillion float64 `yaml:"output_per_million,omitempty"`
}

// At is the price of tokens served at service tier tier: the tier's own
// figures when p lists it, else p's. An empty tier is none.
func (p Price) At(tier string) Price {
	t, ok := p.ServiceTiers[tier]
	if !ok || tier == "" {
		return p
	}
	at := Price{InputPerMillion: p.InputPerMillion, OutputPerMillion: p.OutputPerMillion}
	if t.InputPerMillion != 0 {
		at.InputPerMillion = t.InputPerMillion
	}
	if t.OutputPerMillion != 0 {
		at.OutputPerMillion = t.OutputPerMillion
	}
	return at
}

// Cost is the price of a request's tokens in US dollars.
func (p Price) Cost(promptTokens, completionTokens int64) float64 {
	return (float64(promptTokens)*p.InputPerMillion + float64(completionTokens)*p.OutputPerMillion) / 1e6
}

// Pool kinds. openai, vllm, sglang, llamacpp and ollama speak the OpenAI
// API and differ in the load signals their servers export; anthropic and
// azure are hosted providers whose own APIs requests are translated to.
const (
	KindOpenAI = "openai"
	KindVLLM   = "vllm"
	KindSGLang = "sglang"
	// KindLlamaCpp is llama.cpp's llama-server: its load is read from
	// /metrics (served with --metrics), else from /slots.
	KindLlamaCpp = "llamacpp"
	// KindOllama is Ollama, called at its OpenAI-compatible {url}/v1/...;
	// which models it has loaded is read from /api/ps.
	KindOllama = "ollama"
	// KindAnthropic is Anthropic's Messages API: requests are sent as
	// messages to {url}/messages, with the key as x-api-key.
	KindAnthropic = "anthropic"
	// KindAzure is Azure OpenAI: a model's upstream_model names its
	// deployment, called at {url}/openai/deployments/{deployment}/...
	// with api_version, and the key as api-key.
	KindAzure = "azure"
	// KindBedrock is AWS Bedrock's Converse API: requests are sent to
	// {url}/model/{upstream_model}/converse (or converse-stream), signed
	// with SigV4 by credentials from AWS's default chain in region, or
	// from role assumed with them; url defaults to the region's
	// https://bedrock-runtime.{region}.amazonaws.com.
	KindBedrock = "bedrock"
	// KindGemini is the Gemini API: requests are sent to
	// {url}/models/{upstream_model}:generateContent (streamGenerateContent
	// for a stream), with the key as x-goog-api-key; url defaults to
	// https://generativelanguage.googleapis.com/v1.
	KindGemini = "gemini"
	// KindVertex is Vertex AI's Gemini models: requests are sent to
	// {url}/projects/{project}/locations/{location}/publishers/google/models/{upstream_model}:generateContent
	// with a bearer token from Google's Application Default Credentials
	// (or credentials_file); url defaults to the location's
	// https://{location}-aiplatform.googleapis.com/v1. With publisher
	// anthropic, Anthropic's models: Messages API bodies sent to
	// .../publishers/anthropic/models/{upstream_model}:rawPredict
	// (streamRawPredict for a stream).
	KindVertex = "vertex"
)

// The publishers of a vertex pool's models: Google's (Gemini, called with
// generateContent) and Anthropic's (Claude, called with rawPredict).
const (
	PublisherGoogle    = "google"
	PublisherAnthropic = "anthropic"
)

// SlotCache reports whether a pool of kind caches prompts per slot
// (llama.cpp's server, which Ollama runs) rather than in a block-level
// prefix cache.
func SlotCache(kind string) bool { return kind == KindLlamaCpp || kind == KindOllama }

// Kinds is every pool kind, the default first.
var Kinds = []string{KindOpenAI, KindVLLM, KindSGLang, KindLlamaCpp, KindOllama, KindAnthropic, KindAzure, KindBedrock, KindGemini, KindVertex}

// ErrorClass is a kind of failure a model's fallbacks may be chosen by.
type ErrorClass string

// Error classes. A context window or content filter error is the
// provider's refusal of the request (a 400), which goes to the class's
// fallback instead of the client; rate_limited is a 429, unavailable a
// connection, timeout or 5xx failure of every endpoint tried.
const (
	ClassContextWindow ErrorClass = "context_window_exceeded"
	ClassContentFilter ErrorClass = "content_filter"
	ClassRateLimited   ErrorClass = "rate_limited"
	ClassUnavailable   ErrorClass = "unavailable"
)

// ErrorClasses is every ErrorClass.
var ErrorClasses = []ErrorClass{ClassContextWindow, ClassContentFilter, ClassRateLimited, ClassUnavailable}

// ClassFallback is the first model of requested's fallbacks for class
// that tried does not report as tried; nil when there is none.
func (c *Catalog) ClassFallback(requested *Model, class ErrorClass, tried func(*Model) bool) *Model {
	for _, name := range requested.FallbacksByClass[class] {
		if m, ok := c.Resolve(name); ok && !tried(m) {
			return m
		}
	}
	return nil
}

// Routing policies: how a pool picks the endpoint for a request.
const (
	// PolicyAuto predicts each endpoint's time to first token and keeps a
	// prompt's prefix where it is cached while that meets the SLO.
	PolicyAuto = "auto"
	// PolicyRoundRobin takes endpoints in turn, by weight.
	PolicyRoundRobin = "round_robin"
	// PolicyLeastRequest takes the endpoint with the fewest requests in
	// flight.
	PolicyLeastRequest = "least_request"
	// PolicyPrefix takes the endpoint that served the longest prefix of
	// the prompt, load aside.
	PolicyPrefix = "prefix"
	// PolicyGIE is the Gateway API Inference Extension's default scoring:
	// queue 2, KV-cache 2, prefix 3.
	PolicyGIE = "gie"
	// PolicySGLang is SGLang's cache-aware load balancer.
	PolicySGLang = "sglang"
	// PolicyEPP asks an Endpoint Picker (Pool.EPP) over ext_proc for each
	// request's endpoints; when it does not answer, fail_open picks by
	// auto.
	PolicyEPP = "epp"
)

// Policies is every routing policy, the default first.
var Policies = []string{PolicyAuto, PolicyRoundRobin, PolicyLeastRequest, PolicyPrefix, PolicyGIE, PolicySGLang, PolicyEPP}

// Pool is a set of interchangeable endpoints serving the same models.
type Pool struct {
	Name string `yaml:"name"`
	Kind string `yaml:"kind,omitempty"`
	// APIKeyEnv names the environment variable that holds the key sent to
	// the pool's endpoints; APIKeyFile, instead, a file holding it (white
	// space around it ignored). The key itself is never in the file.
	APIKeyEnv  string     `yaml:"api_key_env,omitempty"`
	APIKeyFile string     `yaml:"api_key_file,omitempty"`
	Endpoints  []Endpoint `yaml:"endpoints"`
	// Policy picks the endpoint for each request; one of Policies.
	Policy string `yaml:"policy,omitempty"`
	// Metrics is how the endpoints' load is scraped; Health how they are
	// checked. Each is off when its path is empty.
	Metrics Scrape      `yaml:"metrics,omitempty"`
	Health  HealthCheck `yaml:"health,omitempty"`
	// RetryBudget is the share of the pool's recent requests that may be
	// retries, so that a failing pool is not sent its own load again.
	RetryBudget float64 `yaml:"retry_budget,omitempty"`
	// Hedge sends a request still without its first token to a second
	// endpoint; off unless set.
	Hedge Hedge `yaml:"hedge,omitempty"`
	// APIVersion is the provider API's version: Azure's api-version query
	// parameter (required there), or the anthropic-version header sent to
	// an anthropic pool; when empty there, an Anthropic client's own
	// version is sent, and 2023-06-01 for other clients. Other kinds have
	// none.
	APIVersion string `yaml:"api_version,omitempty"`
	// Region is a bedrock pool's AWS region, which calls are signed for
	// and whose endpoint is the default; Role, when set, is the ARN of
	// an IAM role assumed with the default chain's credentials. Other
	// kinds have neither.
	Region string `yaml:"region,omitempty"`
	Role   string `yaml:"role,omitempty"`
	// Project and Location are a vertex pool's Google Cloud project and
	// location; CredentialsFile, when set, is the path of the credentials
	// (a service account's key, or an external account's configuration)
	// used instead of Application Default Credentials. Other kinds have
	// none.
	Project         string `yaml:"project,omitempty"`
	Location        string `yaml:"location,omitempty"`
	CredentialsFile string `yaml:"credentials_file,omitempty"`
	// Publisher is whose models a vertex pool serves: google (the
	// default, when empty) or anthropic. Other kinds have none.
	Publisher string `yaml:"publisher,omitempty"`
	// EPP is the Endpoint Picker a pool of policy epp asks.
	EPP EPP `yaml:"epp,omitempty"`
	// Slots is how many slots each endpoint of a llamacpp or ollama pool
	// runs (llama-server's --parallel, OLLAMA_NUM_PARALLEL), each caching
	// the last prompt it processed; a scrape of llama-server's /slots
	// overrides it. Zero means the kind's default; other kinds have none.
	Slots int `yaml:"slots,omitempty"`

	// APIKey is APIKeyEnv's value or APIKeyFile's content, read when the
	// catalog is built (at start and on each reload). It is never logged,
	// labelled or written back.
	APIKey string `yaml:"-"`
}

// EPP is an Endpoint Picker (the Gateway API Inference Extension's
// protocol over ext_proc) that a pool asks for each request's endpoints.
type EPP struct {
	// Address is its gRPC listener, host:port.
	Address string `yaml:"address,omitempty"`
	// TLS speaks to it over TLS without checking its certificate, which
	// an EPP makes and signs itself; off, in plain text.
	TLS bool `yaml:"tls,omitempty"`
	// FailureMode is what a request gets when the EPP is down or late:
	// FailOpen picks by auto, FailClose answers 503.
	FailureMode string `yaml:"failure_mode,omitempty"`
	// Timeout bounds the wait for its answer, a queued request's too.
	Timeout time.Duration `yaml:"timeout,omitempty"`
}

// The values of epp.failure_mode.
const (
	FailOpen  = "fail_open"
	FailClose = "fail_close"
)

// Scrape is how a pool's endpoints' /metrics are read for load signals.
type Scrape struct {
	// Path is on the endpoint's host, such as /metrics; empty scrapes
	// nothing.
	Path     string        `yaml:"path,omitempty"`
	Interval time.Duration `yaml:"interval,omitempty"`
	// MaxAge is how old a scrape may be and still be believed; an older
	// one is unknown, never idle.
	MaxAge time.Duration `yaml:"max_age,omitempty"`
}

// HealthCheck is how a pool's endpoints are probed: an endpoint whose
// probe fails or takes longer than Timeout is taken out of the pool until
// one succeeds.
type HealthCheck struct {
	// Path is on the endpoint's host, such as /health; empty probes
	// nothing.
	Path     string        `yaml:"path,omitempty"`
	Interval time.Duration `yaml:"interval,omitempty"`
	Timeout  time.Duration `yaml:"timeout,omitempty"`
}

// Hedge is when a request that has no first token yet is also sent to a
// second endpoint of its pool, the first of the two to answer serving it:
// after After times the first endpoint's predicted time to first token,
// and never sooner than MinWait. A zero After turns hedging off.
type Hedge struct {
	After   float64       `yaml:"after,omitempty"`
	MinWait time.Duration `yaml:"min_wait,omitempty"`
}

// Endpoint is one server of a pool.
type Endpoint struct {
	// Name labels the endpoint in metrics and logs; it defaults to the
	// URL's host:port.
	Name string `yaml:"name,omitempty"`
	// URL is the server's OpenAI API base, such as http://10.0.0.7:8000/v1.
	URL string `yaml:"url"`
	// Weight is the endpoint's share of the pool's traffic relative to the
	// others; zero means 1.
	Weight int `yaml:"weight,omitempty"`
}

// Catalog is an immutable, indexed set of models and pools.
type Catalog struct {
	models []Model
	pools  []Pool
	byName map[string]int // key: model name or alias; value: index in models
	pool   map[string]int // key: pool name; value: index in pools
}

// New indexes models and pools, which must already be valid (see
// config.Validate); it fails on names that collide or dangle and on a
// key file that cannot be read or is empty. Each pool's APIKey is read
// from its APIKeyEnv or APIKeyFile.
func New(pools []Pool, models []Model) (*Catalog, error) {
	c := &Catalog{
		models: append([]Model(nil), models...),
		pools:  append([]Pool(nil), pools...),
		byName: make(map[string]int, 2*len(models)),
		pool:   make(map[string]int, len(pools)),
	}
	for i := range c.pools {
		p := &c.pools[i]
		if _, dup := c.pool[p.Name]; dup {
			return nil, fmt.Errorf("pool %q is defined twice", p.Name)
		}
		c.pool[p.Name] = i
		if p.APIKeyEnv != "" {
			p.APIKey = os.Getenv(p.APIKeyEnv)
		}
		if p.APIKeyFile != "" {
			key, err := readKeyFile(p.APIKeyFile)
			if err != nil {
				return nil, fmt.Errorf("pool %q: api_key_file: %w", p.Name, err)
			}
			p.APIKey = key
		}
	}
	for i := range c.models {
		m := &c.models[i]
		if _, ok := c.pool[m.Pool]; !ok {
			return nil, fmt.Errorf("model %q: pool %q is not defined", m.Name, m.Pool)
		}
		for _, n := range append([]string{m.Name}, m.Aliases...) {
			if j, dup := c.byName[n]; dup {
				return nil, fmt.Errorf("model name %q is used by both %q and %q", n, c.models[j].Name, m.Name)
			}
			c.byName[n] = i
		}
	}
	for _, m := range c.models {
		for _, f := range m.Fallbacks {
			if _, ok := c.byName[f]; !ok {
				return nil, fmt.Errorf("model %q: fallback %q is not a model", m.Name, f)
			}
		}
		for class, fs := range m.FallbacksByClass {
			for _, f := range fs {
				if _, ok := c.byName[f]; !ok {
					return nil, fmt.Errorf("model %q: %s fallback %q is not a model", m.Name, class, f)
				}
			}
		}
	}
	return c, nil
}

// Resolve finds a model by name or alias.
func (c *Catalog) Resolve(name string) (*Model, bool) {
	i, ok := c.byName[name]
	if !ok {
		return nil, false
	}
	return &c.models[i], true
}

// NextFallback is the fallback to try after cur, in the order requested
// lists them (cur == requested: the first); nil when none is left.
// Fallbacks the catalog does not hold are passed over.
func (c *Catalog) NextFallback(requested, cur *Model) *Model {
	next := cur == requested
	for _, name := range requested.Fallbacks {
		m, ok := c.Resolve(name)
		if !ok {
			continue
		}
		if next {
			return m
		}
		next = m == cur
	}
	return nil
}

// Pool finds a pool by name.
func (c *Catalog) Pool(name string) (*Pool, bool) {
	i, ok := c.pool[name]
	if !ok {
		return nil, false
	}
	return &c.pools[i], true
}

// Models is every model, in catalog order. The caller must not modify it.
func (c *Catalog) Models() []Model { return c.models }

// Pools is every pool, in catalog order. The caller must not modify it.
func (c *Catalog) Pools() []Pool { return c.pools }

// maxKeyFile bounds a key file's read: keys are a few hundred bytes, and a
// path pointing at a large file by mistake must not be read whole.
const maxKeyFile = 64 << 10

// readKeyFile is the key held in the file at path, white space around it
// removed. Errors never hold the file's content.
func readKeyFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	switch {
	case err != nil:
		return "", fmt.Errorf("read %s: %w", path, err)
	case len(b) > maxKeyFile:
		return "", fmt.Errorf("%s is larger than %d bytes, too large for a key", path, maxKeyFile)
	}
	key := strings.TrimSpace(string(b))
	if key == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return key, nil
}
