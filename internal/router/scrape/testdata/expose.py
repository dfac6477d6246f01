#!/usr/bin/env python3
"""Writes the exposition texts in this folder with prometheus_client itself.

Each text declares the metrics the way its server's source does (names,
help, label names, buckets, registration order) and lets prometheus_client
write them, so the bytes are what a scrape of that server reads: HELP and
TYPE lines, sorted labels, _total and _created for counters, _bucket, _count
and _sum for histograms. SGLang runs its collectors in multiprocess mode, as
the server does. The readings (requests, KV cache) are fixed; histogram
observations come from a seeded generator.

    python3 testdata/expose.py   # from internal/router/scrape

Needs prometheus_client (Debian: python3-prometheus-client). The files are
committed; the scrape tests never run this.
"""
import os
import random
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def _mostrecent():
    """Gauge's "mostrecent" mode, which vLLM and SGLang use, came in
    prometheus_client 0.17; "max" writes the same lines (no pid label)."""
    from prometheus_client import Gauge
    return "mostrecent" if "mostrecent" in Gauge._MULTIPROC_MODES else "max"


MOSTRECENT = _mostrecent()


def build_1_2_5(max_value):
    out, e = [], 0
    while True:
        for m in (1, 2, 5):
            v = m * 10**e
            if v > max_value:
                return out
            out.append(v)
        e += 1


TTFT = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
        1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]
TPOT = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0,
        2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0]
LATENCY = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0,
           40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0]
ITER = [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]


def vllm(version, engines, model, max_model_len, state, cache_info):
    """A vLLM V1 API server's registry. version is "0.8" or "0.10"/"0.11"."""
    import prometheus_client as pc
    from prometheus_client import Counter, Gauge, Histogram

    rng = random.Random(hash((version, len(engines))) & 0xffff)
    ln = ["model_name", "engine"]
    new = version != "0.8"

    def per_engine(m):
        return {e: m.labels(model, str(e)) for e in engines}

    running = per_engine(Gauge("vllm:num_requests_running", "Number of requests in model execution batches.", ln, multiprocess_mode=MOSTRECENT))
    waiting = per_engine(Gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", ln, multiprocess_mode=MOSTRECENT))
    by_reason = None
    if version == "0.11":
        by_reason = Gauge("vllm:num_requests_waiting_by_reason", "Number of requests waiting to be processed, by reason.", ln + ["reason"], multiprocess_mode=MOSTRECENT)
    gpu_cache = None
    if version in ("0.8", "0.10"):
        gpu_cache = per_engine(Gauge("vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage." + ("DEPRECATED: Use vllm:kv_cache_usage_perc instead." if new else ""), ln, multiprocess_mode=MOSTRECENT))
    if version in ("0.8", "0.10"):
        gq = per_engine(Counter("vllm:gpu_prefix_cache_queries", "GPU prefix cache queries, in terms of number of queried tokens." + (" DEPRECATED: Use vllm:prefix_cache_queries instead." if new else ""), ln))
        gh = per_engine(Counter("vllm:gpu_prefix_cache_hits", "GPU prefix cache hits, in terms of number of cached tokens." + (" DEPRECATED: Use vllm:prefix_cache_hits instead." if new else ""), ln))
    kv = pq = ph = None
    if new:
        kv = per_engine(Gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", ln))
        pq = per_engine(Counter("vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.", ln))
        ph = per_engine(Counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.", ln))
    preempt = per_engine(Counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.", ln))
    prompt = per_engine(Counter("vllm:prompt_tokens", "Number of prefill tokens processed.", ln))
    gen = per_engine(Counter("vllm:generation_tokens", "Number of generation tokens processed.", ln))
    success = Counter("vllm:request_success", "Count of successfully processed requests.", ln + ["finished_reason"])
    hists = {}

    def hist(name, doc, buckets):
        hists[name] = per_engine(Histogram(name, doc, ln, buckets=buckets))

    hist("vllm:request_prompt_tokens", "Number of prefill tokens processed.", build_1_2_5(max_model_len))
    hist("vllm:request_generation_tokens", "Number of generation tokens processed.", build_1_2_5(max_model_len))
    hist("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", ITER)
    hist("vllm:request_max_num_generation_tokens", "Histogram of maximum number of requested generation tokens.", build_1_2_5(max_model_len))
    hist("vllm:request_params_n", "Histogram of the n request parameter.", [1, 2, 5, 10, 20])
    hist("vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", build_1_2_5(max_model_len))
    hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT)
    hist("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.", TPOT)
    if version == "0.11":
        hist("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", TPOT)
    hist("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", LATENCY)
    hist("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", LATENCY)
    hist("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.", LATENCY)
    hist("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", LATENCY)
    hist("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", LATENCY)

    for e in engines:
        s = state[e]
        running[e].set(s["running"])
        waiting[e].set(s["waiting"])
        if by_reason is not None:
            by_reason.labels(model, str(e), "capacity").set(s["waiting"])
            by_reason.labels(model, str(e), "deferred").set(0)
        if gpu_cache is not None:
            gpu_cache[e].set(s["kv"])
        if kv is not None:
            kv[e].set(s["kv"])
        n = s["requests"]
        toks_in = sum(rng.randint(200, 6000) for _ in range(n))
        toks_out = sum(rng.randint(20, 1200) for _ in range(n))
        queries = toks_in + rng.randint(0, 50000)
        hits = int(queries * 0.37)
        if gpu_cache is not None:
            gq[e].inc(queries)
            gh[e].inc(hits)
        if pq is not None:
            pq[e].inc(queries)
            ph[e].inc(hits)
        preempt[e].inc(rng.randint(0, 40))
        prompt[e].inc(toks_in)
        gen[e].inc(toks_out)
        success.labels(model, str(e), "stop").inc(int(n * 0.9))
        success.labels(model, str(e), "length").inc(n - int(n * 0.9))
        success.labels(model, str(e), "abort").inc(rng.randint(0, 12))
        for _ in range(n):
            hists["vllm:request_prompt_tokens"][e].observe(rng.randint(200, 6000))
            hists["vllm:request_generation_tokens"][e].observe(rng.randint(20, 1200))
            hists["vllm:request_max_num_generation_tokens"][e].observe(rng.choice([256, 1024, 2048, 4096]))
            hists["vllm:request_params_n"][e].observe(1)
            hists["vllm:request_params_max_tokens"][e].observe(rng.choice([256, 1024, 2048, 4096]))
            hists["vllm:time_to_first_token_seconds"][e].observe(rng.lognormvariate(-1.6, 0.9))
            hists["vllm:e2e_request_latency_seconds"][e].observe(rng.lognormvariate(2.0, 0.7))
            hists["vllm:request_queue_time_seconds"][e].observe(rng.expovariate(4.0))
            hists["vllm:request_inference_time_seconds"][e].observe(rng.lognormvariate(1.9, 0.7))
            hists["vllm:request_prefill_time_seconds"][e].observe(rng.lognormvariate(-1.8, 0.8))
            hists["vllm:request_decode_time_seconds"][e].observe(rng.lognormvariate(1.8, 0.7))
        for _ in range(n * 4):
            hists["vllm:iteration_tokens_total"][e].observe(rng.choice([1, 7, 30, 120, 512, 2048, 8192]))
            hists["vllm:time_per_output_token_seconds"][e].observe(rng.lognormvariate(-3.7, 0.3))
            if "vllm:inter_token_latency_seconds" in hists:
                hists["vllm:inter_token_latency_seconds"][e].observe(rng.lognormvariate(-3.7, 0.3))

    # log_engine_initialized: an info gauge, one series per engine from 0.9 on.
    names = sorted(cache_info) + (["engine"] if new else [])
    info = Gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig", names, multiprocess_mode=MOSTRECENT)
    for e in engines:
        labels = dict(cache_info)
        if new:
            labels["engine"] = str(e)
        info.labels(**labels).set(1)

    # prometheus-fastapi-instrumentator, set up by build_app after the engine.
    handlers = [("/v1/chat/completions", "POST"), ("/v1/completions", "POST"), ("/health", "GET"), ("/v1/models", "GET"), ("/metrics", "GET")]
    reqs = Counter("http_requests", "Total number of requests by method, status and handler.", ["method", "status", "handler"])
    size_in = pc.Summary("http_request_size_bytes", "Content length of incoming requests by handler. Only value of header is respected. Otherwise ignored. No percentile calculated. ", ["handler"])
    size_out = pc.Summary("http_response_size_bytes", "Content length of outgoing responses by handler. Only value of header is respected. Otherwise ignored. No percentile calculated. ", ["handler"])
    highr = Histogram("http_request_duration_highr_seconds", "Latency with many buckets but no API specific labels. Made for more accurate percentile calculations. ",
                      buckets=[0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 7.5, 10.0, 30.0, 60.0])
    dur = Histogram("http_request_duration_seconds", "Latency with only few buckets by handler. Made to be only used if aggregation by handler is important. ", ["handler", "method"], buckets=[0.1, 0.5, 1.0])
    for h, m in handlers:
        n = rng.randint(5, 400)
        reqs.labels(m, "2xx", h).inc(n)
        for _ in range(n):
            size_in.labels(h).observe(rng.randint(0, 9000) if m == "POST" else 0)
            size_out.labels(h).observe(rng.randint(50, 40000))
            t = rng.lognormvariate(0.5, 1.0) if m == "POST" else rng.expovariate(500.0)
            highr.observe(t)
            dur.labels(h, m).observe(t)
    reqs.labels("POST", "4xx", "/v1/chat/completions").inc(3)
    return pc.generate_latest(pc.REGISTRY)


def sglang_child(model, state):
    """Runs in a fresh process with PROMETHEUS_MULTIPROC_DIR set: the
    scheduler's and tokenizer manager's collectors, then the collection."""
    import prometheus_client as pc
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, multiprocess

    rng = random.Random(7)
    labels = {"model_name": model, "engine_type": "unified", "tp_rank": "0", "pp_rank": "0", "moe_ep_rank": "0"}
    ln = list(labels)

    def g(name, doc, mode=None):
        m = Gauge(name, doc, ln, multiprocess_mode=mode or MOSTRECENT)
        return m.labels(**labels)

    sched = {
        "num_running_reqs": g("sglang:num_running_reqs", "The number of running requests."),
        "num_used_tokens": g("sglang:num_used_tokens", "The number of used tokens."),
        "token_usage": g("sglang:token_usage", "The token usage."),
        "swa_token_usage": g("sglang:swa_token_usage", "The token usage for SWA layers."),
        "gen_throughput": g("sglang:gen_throughput", "The generation throughput (token/s)."),
        "num_queue_reqs": g("sglang:num_queue_reqs", "The number of requests in the waiting queue."),
        "num_grammar_queue_reqs": g("sglang:num_grammar_queue_reqs", "The number of requests in the grammar waiting queue."),
        "num_running_reqs_offline_batch": g("sglang:num_running_reqs_offline_batch", "The number of running low-priority offline batch requests(label is 'batch')."),
        "cache_hit_rate": g("sglang:cache_hit_rate", "The prefix cache hit rate."),
        "max_total_num_tokens": g("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool."),
        "page_size": g("sglang:page_size", "The page size of the KV cache."),
        "context_len": g("sglang:context_len", "The context length of the model."),
        "spec_accept_length": g("sglang:spec_accept_length", "The average acceptance length of speculative decoding."),
        "num_retracted_reqs": g("sglang:num_retracted_reqs", "The number of retracted requests.", "all"),
        "num_paused_reqs": g("sglang:num_paused_reqs", "The number of paused requests by async weight sync.", "all"),
        "num_prefill_prealloc_queue_reqs": g("sglang:num_prefill_prealloc_queue_reqs", "The number of requests in the prefill prealloc queue."),
        "num_prefill_inflight_queue_reqs": g("sglang:num_prefill_inflight_queue_reqs", "The number of requests in the prefill inflight queue."),
        "num_decode_prealloc_queue_reqs": g("sglang:num_decode_prealloc_queue_reqs", "The number of requests in the decode prealloc queue."),
        "num_decode_transfer_queue_reqs": g("sglang:num_decode_transfer_queue_reqs", "The number of requests in the decode transfer queue."),
        "utilization": g("sglang:utilization", "The utilization."),
        "engine_startup_time": g("sglang:engine_startup_time", "The time taken for the engine to start up."),
        "engine_load_weights_time": g("sglang:engine_load_weights_time", "The time taken for the engine to load weights."),
    }
    for k, v in state.items():
        sched[k].set(v)
    Counter("sglang:num_retracted_requests", "Total number of retracted requests.", ln).labels(**labels).inc(17)
    Counter("sglang:num_bootstrap_failed_reqs", "The number of bootstrap failed requests.", ln).labels(**labels)
    Counter("sglang:num_transfer_failed_reqs", "The number of transfer failed requests.", ln).labels(**labels)
    qt = Histogram("sglang:queue_time_seconds", "Histogram of queueing time in seconds.", ln,
                   buckets=[0.0, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000]).labels(**labels)
    cg = Counter("sglang:cuda_graph_passes", "Total number of forward passes categorized by CUDA graph.", ln + ["mode"])

    # TokenizerMetricsCollector: request-level metrics, no rank labels.
    tl = {"model_name": model}
    prompt = Counter("sglang:prompt_tokens", "Number of prefill tokens processed.", list(tl)).labels(**tl)
    gen = Counter("sglang:generation_tokens", "Number of generation tokens processed.", list(tl)).labels(**tl)
    cached = Counter("sglang:cached_tokens", "Number of cached prompt tokens.", list(tl)).labels(**tl)
    nreq = Counter("sglang:num_requests", "Number of requests processed.", list(tl)).labels(**tl)
    nso = Counter("sglang:num_so_requests", "Number of structured output requests processed.", list(tl)).labels(**tl)
    nab = Counter("sglang:num_aborted_requests", "Number of requests aborted.", list(tl)).labels(**tl)
    ttft = Histogram("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", list(tl),
                     buckets=[0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400]).labels(**tl)
    itl = Histogram("sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", list(tl),
                    buckets=[0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000]).labels(**tl)
    e2e = Histogram("sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", list(tl),
                    buckets=[0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400]).labels(**tl)
    n = 2113
    for _ in range(n):
        pin, pout = rng.randint(100, 8000), rng.randint(10, 1500)
        prompt.inc(pin)
        gen.inc(pout)
        cached.inc(int(pin * rng.random() * 0.6))
        nreq.inc()
        ttft.observe(rng.lognormvariate(-0.8, 0.8))
        e2e.observe(rng.lognormvariate(2.2, 0.6))
        qt.observe(rng.expovariate(2.0))
        for _ in range(8):
            itl.observe(rng.lognormvariate(-4.2, 0.4))
    nso.inc(57)
    nab.inc(9)
    cg.labels(**labels, mode="decode").inc(182311)
    cg.labels(**labels, mode="extend").inc(0)

    reg = CollectorRegistry()
    multiprocess.MultiProcessCollector(reg)
    sys.stdout.buffer.write(pc.generate_latest(reg))


def sglang(model, state):
    d = tempfile.mkdtemp()
    try:
        env = dict(os.environ, PROMETHEUS_MULTIPROC_DIR=d)
        code = "import sys; sys.path.insert(0, %r); import expose; expose.sglang_child(%r, %r)" % (HERE, model, state)
        return subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True).stdout
    finally:
        shutil.rmtree(d)


def fresh_vllm(*args):
    """Each vLLM text from a fresh interpreter, so registries do not mix."""
    code = "import sys; sys.path.insert(0, %r); import expose; sys.stdout.buffer.write(expose.vllm(*%r))" % (HERE, args)
    return subprocess.run([sys.executable, "-c", code], check=True, capture_output=True).stdout


def main():
    cache_08 = {"block_size": "16", "cache_dtype": "auto", "calculate_kv_scales": "False", "cpu_offload_gb": "0",
                "enable_prefix_caching": "True", "gpu_memory_utilization": "0.9", "is_attention_free": "False",
                "num_cpu_blocks": "None", "num_gpu_blocks": "None", "num_gpu_blocks_override": "None",
                "sliding_window": "None", "swap_space_bytes": "4294967296"}
    cache_new = {"block_size": "16", "cache_dtype": "auto", "calculate_kv_scales": "False", "cpu_kvcache_space_bytes": "None",
                 "cpu_offload_gb": "0", "enable_prefix_caching": "True", "gpu_memory_utilization": "0.9",
                 "is_attention_free": "False", "kv_sharing_fast_prefill": "False", "mamba_cache_dtype": "auto",
                 "mamba_page_size_padded": "None", "mamba_ssm_cache_dtype": "auto", "num_cpu_blocks": "None",
                 "num_gpu_blocks": "29127", "num_gpu_blocks_override": "None", "prefix_caching_hash_algo": "sha256",
                 "sliding_window": "None", "swap_space": "4", "swap_space_bytes": "4294967296"}
    files = {
        "vllm-0.11.txt": fresh_vllm("0.11", [0], "meta-llama/Llama-3.1-8B-Instruct", 131072,
                                    {0: {"running": 12, "waiting": 3, "kv": 0.4375, "requests": 180}}, cache_new),
        "vllm-0.8.txt": fresh_vllm("0.8", [0], "Qwen/Qwen2.5-7B-Instruct", 32768,
                                   {0: {"running": 4, "waiting": 0, "kv": 0.0837, "requests": 95}}, cache_08),
        "vllm-0.10-dp2.txt": fresh_vllm("0.10", [0, 1], "Qwen/Qwen3-30B-A3B", 40960,
                                        {0: {"running": 31, "waiting": 7, "kv": 0.8125, "requests": 140},
                                         1: {"running": 29, "waiting": 2, "kv": 0.75, "requests": 133}}, cache_new),
        "sglang-0.5.txt": sglang("deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", {
            "num_running_reqs": 37, "num_used_tokens": 98012, "token_usage": 0.61, "gen_throughput": 1184.3351196278515,
            "num_queue_reqs": 5, "cache_hit_rate": 0.4213, "max_total_num_tokens": 160672, "page_size": 64,
            "context_len": 131072, "engine_startup_time": 97.21304, "engine_load_weights_time": 41.883012}),
    }
    for name, text in files.items():
        with open(os.path.join(HERE, name), "wb") as f:
            f.write(text)


if __name__ == "__main__":
    main()
