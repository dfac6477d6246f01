// What a replica of the llamacpp profile answers and exports as llama.cpp's
// server does: cached prompt tokens as the timings object's cache_n beside
// a usage without prompt_tokens_details, and metrics under llama.cpp's
// names, with no model label and no histograms.

package sim

import "github.com/prometheus/client_golang/prometheus"

// llamaUsage is llama.cpp's server's usage object: no
// prompt_tokens_details, its cached tokens in the timings beside it.
type llamaUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// timings is the part of llama.cpp's server's timings object that counts
// tokens: cache_n prompt tokens taken from the slot's cache, prompt_n
// computed, predicted_n generated.
type timings struct {
	CacheN     int `json:"cache_n"`
	PromptN    int `json:"prompt_n"`
	PredictedN int `json:"predicted_n"`
}

// usageOf is the usage the job's answer reports, with cached prompt
// tokens: OpenAI's, or llama.cpp's.
func (j *job) usageOf(cached int) any {
	if j.llama {
		return llamaUsage{j.prompt.tokens, j.gen.tokens, j.prompt.tokens + j.gen.tokens}
	}
	return j.usage(cached)
}

// timings is the timings object llama.cpp's server answers with; nil for
// other engines.
func (j *job) timings(cached int) *timings {
	if !j.llama {
		return nil
	}
	return &timings{CacheN: cached, PromptN: j.prompt.tokens - cached, PredictedN: j.gen.tokens}
}

// newLlamaMetrics is the replica's instruments under llama.cpp's names:
// llamacpp:prompt_tokens_total and llamacpp:tokens_predicted_total, and
// the gauges llamacpp:requests_processing (slots busy) and
// llamacpp:requests_deferred (requests waiting for one). llama.cpp
// exports no latency histogram and no prefix-cache counter: those
// instruments count unregistered.
func newLlamaMetrics(reg prometheus.Registerer, e *engine) *metrics {
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
		reg.MustRegister(c)
		return c
	}
	gauge := func(name, help string, f func() float64) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
	}
	none := prometheus.ObserverFunc(func(float64) {})
	m := &metrics{
		ttft: none, itl: none, e2e: none, queueTime: none,
		prefixHits:       prometheus.NewCounter(prometheus.CounterOpts{Name: "unexported_prefix_hits"}),
		prefixQueries:    prometheus.NewCounter(prometheus.CounterOpts{Name: "unexported_prefix_queries"}),
		promptTokens:     counter("llamacpp:prompt_tokens_total", "Number of prompt tokens processed."),
		generationTokens: counter("llamacpp:tokens_predicted_total", "Number of generation tokens processed."),
	}
	gauge("llamacpp:requests_processing", "Number of requests processing.", func() float64 {
		r, _, _ := e.stats()
		return float64(r)
	})
	gauge("llamacpp:requests_deferred", "Number of requests deferred.", func() float64 {
		_, w, _ := e.stats()
		return float64(w)
	})
	return m
}
