package console

// The live pages, Overview and Endpoints: the gateway's own state as its
// Gateway.Status gives it, refreshed by the page's script every few
// seconds.

import (
	"net/http"
	"slices"
	"time"
)

// Status is the gateway's live state at one moment, as plain values.
type Status struct {
	Models []ModelStatus
	Pools  []PoolStatus
}

// ModelStatus is one model of the catalog in service.
type ModelStatus struct {
	Name, Pool string
	// RequestsPerSecond and ErrorRate are over the last few seconds; the
	// error rate is the share answered with 400 or above.
	RequestsPerSecond, ErrorRate float64
	// TTFTp99 and TPOTp99 are the recent p99s, zero while too few are
	// known; SLOTTFT and SLOTPOT are the model's SLO, zero for none.
	TTFTp99, TPOTp99 time.Duration
	SLOTTFT, SLOTPOT time.Duration
	Samples          int
	Admission        bool
	Queued           int                // requests waiting at the pool's gate
	Goodput          map[string]float64 // by priority class
}

// PoolStatus is one pool and its endpoints.
type PoolStatus struct {
	Name, Kind, Policy string
	Endpoints          []EndpointStatus
	// Loaded is, for each model of the pool, the endpoints whose servers
	// said they have it loaded; empty on pools whose servers do not say.
	Loaded []ModelLoaded
}

// ModelLoaded is one model and the endpoints that have it loaded.
type ModelLoaded struct {
	Model string
	On    []string
}

// EndpointStatus is one endpoint as routing sees it.
type EndpointStatus struct {
	Name       string
	Down       bool          // its health probe fails
	EjectedFor time.Duration // left of its ejection; zero when not ejected
	Ejections  int           // ejections in a row
	Inflight   int64         // this gateway's requests in flight there
	Pending    int64         // of those, without a first token yet
	Peers      int64         // the other gateways' requests in flight there
	// Waiting and KVUsage are from its last scrape, negative when unknown.
	Waiting, KVUsage float64
	// Models is the models its server said it has loaded, while fresh,
	// and ListsModels whether it said: false on servers that do not say
	// (all but Ollama's) and while its scrape is stale.
	Models      []string
	ListsModels bool
	// ColdStart is the cold start routing predicts there for a model not
	// loaded, learned from its cold first tokens; ColdStartLearned is
	// false while it is the prior.
	ColdStart        time.Duration
	ColdStartLearned bool
	PrefixHits       float64 // share of predicted prefix hits confirmed
	// PredictedTTFT and MeasuredTTFT are the recent means of first-token
	// times predicted when sent and taken; zero before the first.
	PredictedTTFT, MeasuredTTFT time.Duration
	// What routing has learned of it: a first token's cost for each
	// thousand prompt tokens of its own and owed ahead of it, and for
	// each request queued there; a decode step's time, and what each
	// stream in it and each thousand prompt tokens computed in it add.
	PerKiloToken, PerKiloAhead, PerQueued time.Duration
	Step, PerStream, StepPerKiloToken     time.Duration
	BatchLimit                            float64 // zero for none
}

// Up reports whether routing sends to the endpoint.
func (e EndpointStatus) Up() bool { return !e.Down && e.EjectedFor <= 0 }

// goodputRow is one class's goodput, for the template.
type goodputRow struct {
	Class string
	Ratio float64
}

// Classes is m's goodput by class, in the classes' order of priority.
func (m ModelStatus) Classes() []goodputRow {
	var out []goodputRow
	for _, c := range []string{"critical", "standard", "sheddable"} {
		if v, ok := m.Goodput[c]; ok {
			out = append(out, goodputRow{c, v})
		}
	}
	for c, v := range m.Goodput {
		if !slices.Contains([]string{"critical", "standard", "sheddable"}, c) {
			out = append(out, goodputRow{c, v})
		}
	}
	return out
}

// Over reports whether a p99 is past its SLO; never without either.
func Over(p99, slo time.Duration) bool { return p99 > 0 && slo > 0 && p99 > slo }

func (c *Console) overview(w http.ResponseWriter, r *http.Request, ss *session) {
	c.render(w, r, http.StatusOK, "overview", ss, c.gw.Status(c.now()))
}

func (c *Console) endpoints(w http.ResponseWriter, r *http.Request, ss *session) {
	c.render(w, r, http.StatusOK, "endpoints", ss, c.gw.Status(c.now()))
}
