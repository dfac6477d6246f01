// A replica's metrics, under vLLM's names and with its model_name label, so
// that whatever scrapes vLLM reads the simulator the same way; a replica
// of the llamacpp profile exports llama.cpp's (llama.go).

package sim

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics is one replica's instruments. The gauges read the engine when
// scraped.
type metrics struct {
	ttft, itl, e2e, queueTime      prometheus.Observer
	prefixHits, prefixQueries      prometheus.Counter
	promptTokens, generationTokens prometheus.Counter
}

// Histogram buckets, as vLLM defines them.
var (
	ttftBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
		0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	itlBuckets = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
		1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}
	requestBuckets = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0,
		30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
)

func newMetrics(reg prometheus.Registerer, cfg Config, e *engine) *metrics {
	if cfg.Cache == CacheSlots {
		return newLlamaMetrics(reg, e)
	}
	model := prometheus.Labels{"model_name": cfg.Model}
	hist := func(name, help string, buckets []float64) prometheus.Histogram {
		h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets, ConstLabels: model})
		reg.MustRegister(h)
		return h
	}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: model})
		reg.MustRegister(c)
		return c
	}
	gauge := func(name, help string, f func() float64) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: model}, f))
	}
	m := &metrics{
		ttft:             hist("vllm:time_to_first_token_seconds", "Time from a request's arrival to its first output token, in seconds.", ttftBuckets),
		itl:              hist("vllm:inter_token_latency_seconds", "Time between two consecutive output tokens of a request, in seconds.", itlBuckets),
		e2e:              hist("vllm:e2e_request_latency_seconds", "Time from a request's arrival to its last output token, in seconds.", requestBuckets),
		queueTime:        hist("vllm:request_queue_time_seconds", "Time a request spent waiting for admission, in seconds.", requestBuckets),
		prefixHits:       counter("vllm:prefix_cache_hits_total", "Prompt tokens served from the prefix cache."),
		prefixQueries:    counter("vllm:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache."),
		promptTokens:     counter("vllm:prompt_tokens_total", "Prompt tokens of admitted requests."),
		generationTokens: counter("vllm:generation_tokens_total", "Output tokens produced."),
	}
	gauge("vllm:num_requests_running", "Requests in the running batch.", func() float64 {
		r, _, _ := e.stats()
		return float64(r)
	})
	gauge("vllm:num_requests_waiting", "Requests waiting for admission.", func() float64 {
		_, w, _ := e.stats()
		return float64(w)
	})
	gauge("vllm:kv_cache_usage_perc", "Share of KV-cache blocks held by running requests, from 0 to 1.", func() float64 {
		_, _, u := e.stats()
		return u
	})
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "vllm:cache_config_info",
		Help: "The KV cache's configuration, in labels; the value is always 1.",
		ConstLabels: prometheus.Labels{
			"model_name":     cfg.Model,
			"block_size":     strconv.Itoa(cfg.BlockSize),
			"num_gpu_blocks": strconv.Itoa(cfg.NumBlocks),
		},
	})
	info.Set(1)
	reg.MustRegister(info)
	return m
}
