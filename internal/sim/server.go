// The replica's HTTP face: routes, the model list, health, metrics, and
// the faults admin endpoint, with faults applied before a request is
// served.

package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// maxBodyBytes bounds a request body: a prompt as long as MaxModelLen is
// about 128 KiB of text, and a batch of embedding inputs a few MiB.
const maxBodyBytes = 16 << 20

// Server is one simulated replica as an http.Handler. Its step loop runs
// from New until Close.
type Server struct {
	cfg       Config // with defaults
	modelJSON []byte // cfg.Model as a JSON string
	eng       *engine
	reg       *prometheus.Registry
	mux       *http.ServeMux
	created   int64 // Unix time of New, shown as the model's creation time
	ids       atomic.Uint64

	faults atomic.Pointer[Faults]
	// hung, while the Hang fault is on, is closed when it ends; nil
	// otherwise.
	hung atomic.Pointer[chan struct{}]

	faultMu     sync.Mutex // protects refuseTimer, hangTimer and onRefuse, and orders SetFaults calls
	refuseTimer *time.Timer
	hangTimer   *time.Timer
	onRefuse    func(refuse bool) // set by a Replica to close or reopen its listener

	rngMu sync.Mutex // protects rng
	rng   *rand.Rand // draws which requests fail

	stopLoop context.CancelFunc
	loopDone chan struct{}
}

var _ http.Handler = (*Server)(nil)

// New starts a replica's step loop and returns its handler. Zero fields of
// cfg take their defaults.
func New(cfg Config) *Server {
	cfg = cfg.withDefaults()
	modelJSON, _ := json.Marshal(cfg.Model)
	s := &Server{
		modelJSON: modelJSON,
		cfg:       cfg,
		reg:       prometheus.NewRegistry(),
		mux:       http.NewServeMux(),
		created:   time.Now().Unix(),
		rng:       rand.New(rand.NewPCG(uint64(cfg.Seed), 0x51)),
		loopDone:  make(chan struct{}),
	}
	s.eng = newEngine(cfg, s.reg)
	s.SetFaults(cfg.Faults)

	s.mux.HandleFunc("/v1/chat/completions", s.post(s.chatCompletions))
	s.mux.HandleFunc("/v1/completions", s.post(s.completions))
	s.mux.HandleFunc("/v1/embeddings", s.post(s.embeddings))
	s.mux.HandleFunc("/v1/models", s.models)
	s.mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {})
	s.mux.Handle("/metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	s.mux.HandleFunc("/sim/faults", s.faultsAdmin)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		openai.WriteError(w, openai.NotFound(r.URL.Path))
	})

	ctx, cancel := context.WithCancel(context.Background())
	s.stopLoop = cancel
	go func() {
		defer close(s.loopDone)
		s.eng.run(ctx)
	}()
	return s
}

// Close stops the step loop; requests still queued or running are cut.
func (s *Server) Close() {
	s.stopLoop()
	<-s.loopDone
	s.faultMu.Lock()
	stopTimer(&s.refuseTimer)
	stopTimer(&s.hangTimer)
	if ch := s.hung.Swap(nil); ch != nil {
		close(*ch) // requests held by a hang now meet the stopped engine
	}
	s.faultMu.Unlock()
}

// Model is the name the replica serves.
func (s *Server) Model() string { return s.cfg.Model }

// Config is the configuration the replica runs, defaults filled in.
func (s *Server) Config() Config { return s.cfg }

// Faults are the faults now injected.
func (s *Server) Faults() Faults { return *s.faults.Load() }

// SetFaults replaces the injected faults. Out-of-range values are clamped:
// rates into 0–1, negatives to zero, an unknown status to 0. RefuseFor and
// HangFor count from this call.
func (s *Server) SetFaults(f Faults) {
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	f.ErrorRate = min(max(f.ErrorRate, 0), 1)
	f.DieAfterTokens = max(f.DieAfterTokens, 0)
	f.StallFirstToken = max(f.StallFirstToken, 0)
	f.RefuseFor = max(f.RefuseFor, 0)
	f.HangFor = max(f.HangFor, 0)
	f.Slow = max(f.Slow, 0)
	if f.ErrorStatus != 429 && f.ErrorStatus != 500 && f.ErrorStatus != 503 {
		f.ErrorStatus = 0
	}
	s.applyFaultsLocked(f)
	stopTimer(&s.refuseTimer)
	stopTimer(&s.hangTimer)
	if f.Refuse && f.RefuseFor > 0 {
		s.endAfter(&s.refuseTimer, f.RefuseFor, func(f *Faults) { f.Refuse, f.RefuseFor = false, 0 })
	}
	if f.Hang && f.HangFor > 0 {
		s.endAfter(&s.hangTimer, f.HangFor, func(f *Faults) { f.Hang, f.HangFor = false, 0 })
	}
}

// endAfter sets *slot to a timer that, after d, clears one fault with
// end, leaving the others and their timers as they are. A timer no longer
// in its slot when it fires does nothing. s.faultMu must be held.
func (s *Server) endAfter(slot **time.Timer, d time.Duration, end func(*Faults)) {
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		s.faultMu.Lock()
		defer s.faultMu.Unlock()
		if *slot != t {
			return // the faults changed since
		}
		*slot = nil
		cur := *s.faults.Load()
		end(&cur)
		s.applyFaultsLocked(cur)
	})
	*slot = t
}

func stopTimer(slot **time.Timer) {
	if *slot != nil {
		(*slot).Stop()
		*slot = nil
	}
}

// applyFaultsLocked puts f in force: the step time, the listener and the
// hang. s.faultMu must be held.
func (s *Server) applyFaultsLocked(f Faults) {
	old := s.faults.Swap(&f)
	s.eng.setSlow(f.Slow)
	if s.onRefuse != nil && (old == nil || old.Refuse != f.Refuse) {
		s.onRefuse(f.Refuse)
	}
	if wasHung := old != nil && old.Hang; wasHung != f.Hang {
		s.setHung(f.Hang)
	}
}

// setHung starts or ends a hang: the engine stops or resumes stepping,
// and requests arriving wait at the door until it ends.
func (s *Server) setHung(hung bool) {
	now := time.Now()
	if hung {
		ch := make(chan struct{})
		s.hung.Store(&ch)
		s.eng.pause(now)
		return
	}
	s.eng.resume(now)
	if ch := s.hung.Swap(nil); ch != nil {
		close(*ch)
	}
}

// setOnRefuse installs the hook a Replica uses to close and reopen its
// listener, and applies the current setting.
func (s *Server) setOnRefuse(fn func(bool)) {
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	s.onRefuse = fn
	fn(s.faults.Load().Refuse)
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/sim/faults" {
		if s.faults.Load().Refuse {
			panic(http.ErrAbortHandler) // cuts the connection, logging nothing
		}
		if hung := s.hung.Load(); hung != nil {
			select {
			case <-*hung:
			case <-r.Context().Done():
				return
			}
		}
	}
	s.mux.ServeHTTP(w, r)
}

// post wraps an inference endpoint: POST only, a bounded body, then the
// error-rate and stall faults.
func (s *Server) post(h func(w http.ResponseWriter, r *http.Request, body []byte, f Faults)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			openai.WriteError(w, openai.MethodNotAllowed(r.Method))
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
		if err != nil {
			var (
				tooBig *http.MaxBytesError
				netErr net.Error
			)
			switch {
			case errors.As(err, &tooBig):
				openai.WriteError(w, openai.TooLarge(maxBodyBytes))
			case errors.As(err, &netErr) && netErr.Timeout():
				openai.WriteError(w, openai.BodyTimedOut())
			}
			return // otherwise the client went away
		}
		f := s.Faults()
		if e := s.injectedError(f); e != nil {
			openai.WriteError(w, e)
			return
		}
		if f.StallFirstToken > 0 {
			t := time.NewTimer(f.StallFirstToken)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return
			}
		}
		h(w, r, body, f)
	}
}

// injectedError is the error the ErrorRate fault answers with, or nil.
func (s *Server) injectedError(f Faults) *openai.Error {
	if f.ErrorRate <= 0 {
		return nil
	}
	s.rngMu.Lock()
	fail := s.rng.Float64() < f.ErrorRate
	status := f.ErrorStatus
	if status == 0 {
		status = [...]int{429, 500, 503}[s.rng.IntN(3)]
	}
	s.rngMu.Unlock()
	if !fail {
		return nil
	}
	switch status {
	case http.StatusTooManyRequests:
		return openai.RateLimited("rate_limit_exceeded", "Injected fault: too many requests.", 1)
	case http.StatusServiceUnavailable:
		return &openai.Error{Status: status, Type: "server_error", Code: "service_unavailable", Message: "Injected fault: the server is unavailable."}
	default:
		return &openai.Error{Status: status, Type: "server_error", Message: "Injected fault: the server had an error."}
	}
}

// models lists the one model the replica serves, as vLLM does.
func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		openai.WriteError(w, openai.MethodNotAllowed(r.Method))
		return
	}
	type model struct {
		ID          string `json:"id"`
		Object      string `json:"object"`
		Created     int64  `json:"created"`
		OwnedBy     string `json:"owned_by"`
		Root        string `json:"root"`
		MaxModelLen int    `json:"max_model_len"`
	}
	writeJSON(w, struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{"list", []model{{s.cfg.Model, "model", s.created, "vllm", s.cfg.Model, s.cfg.MaxModelLen}}})
}

// faultsAdmin shows the faults on GET and replaces them on POST with the
// JSON body, as MarshalJSON writes it; absent fields mean no such fault.
func (s *Server) faultsAdmin(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
	case http.MethodPost:
		var f Faults
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
		if err := dec.Decode(&f); err != nil {
			openai.WriteError(w, openai.BadRequest("", "Invalid faults JSON: %v", err))
			return
		}
		if err := f.Validate(); err != nil {
			openai.WriteError(w, openai.BadRequest("", "Invalid faults: %v", err))
			return
		}
		s.SetFaults(f)
	default:
		openai.WriteError(w, openai.MethodNotAllowed(r.Method))
		return
	}
	writeJSON(w, s.Faults())
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		openai.WriteError(w, &openai.Error{Status: 500, Type: "server_error", Message: "The server failed to encode its answer.", Err: err})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

// nextID is a fresh response id with the given prefix.
func (s *Server) nextID(prefix string) string {
	return fmt.Sprintf("%s%016x", prefix, mix(s.ids.Add(1)^uint64(s.created)))
}
