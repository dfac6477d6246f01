// Package scrape reads an inference server's load from its Prometheus
// /metrics and probes its health endpoint, for the router to pick by.
package scrape

// An endpoint's load, read from the text vLLM, SGLang and llama.cpp write
// on /metrics: requests queued and running, how full the KV cache is, and
// the KV-cache block size. Parse looks only at the few lines that carry these; every
// other line is passed over at the cost of finding its end. What it reads
// it reads as prometheus/common's expfmt text parser does, so that for any
// text expfmt accepts the two agree (FuzzParseMatchesExpfmt holds them to
// it). A scrape's text costs tens of microseconds and no allocation, where
// expfmt takes milliseconds and thousands of allocations: at ten scrapes a
// second for each of 64 endpoints, about 1% of a core against more than one
// of a two-core machine's two.

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Load is one scrape's reading of an endpoint. A reading that the endpoint
// does not export, or exports as NaN, ±Inf or a negative number, is -1:
// unknown, never idle.
type Load struct {
	// Waiting is how many requests are queued: vllm:num_requests_waiting,
	// else sglang:num_queue_reqs, else llamacpp:requests_deferred (tasks
	// waiting for a free slot), summed over its series (data-parallel
	// engines, several models).
	Waiting float64
	// Running is how many requests are in the running batch:
	// vllm:num_requests_running, else sglang:num_running_reqs, else
	// llamacpp:requests_processing (slots busy), summed; on a llama.cpp
	// server without /metrics, the slots /slots shows processing.
	Running float64
	// KVUsage is the share of the KV cache in use, 0 to 1:
	// vllm:kv_cache_usage_perc, else vllm:gpu_cache_usage_perc (vLLM before
	// 0.10), else sglang:token_usage, averaged over its series. A series
	// above 1 counts as 1. llama.cpp's server exports no KV-cache gauge:
	// unknown there.
	KVUsage float64
	// BlockSize is how many tokens one KV-cache block holds: the block_size
	// label of vllm:cache_config_info, else the value of sglang:page_size;
	// the first series that holds a whole number from 1 to maxBlockSize.
	// Zero when unknown.
	BlockSize int
	// Models is the models an Ollama server has loaded, each as
	// OllamaName writes it, from its /api/ps; nil where not read (every
	// other kind), empty when none is loaded.
	Models []string
	// Slots is how many slots a llama.cpp server's /slots listed; zero
	// where not read.
	Slots int
	// At is when the scrape completed; Parse leaves it zero.
	At time.Time
}

// unknownLoad is what an endpoint that exports nothing reads as.
func unknownLoad() Load {
	return Load{Waiting: -1, Running: -1, KVUsage: -1}
}

// maxBlockSize bounds a believable KV-cache block: vLLM's are 16 to 128
// tokens and hybrid models pad theirs to a few thousand; a larger number is
// not a block size, and the bound keeps arithmetic on it far from overflow.
const maxBlockSize = 1 << 20

// The metrics Parse reads, by index into parser.acc.
const (
	vllmWaiting        = iota // vllm:num_requests_waiting
	vllmRunning               // vllm:num_requests_running
	vllmKVUsage               // vllm:kv_cache_usage_perc, vLLM 0.9 on
	vllmGPUCache              // vllm:gpu_cache_usage_perc, the same before 0.10
	vllmCacheConfig           // vllm:cache_config_info, an info gauge whose labels are the cache config
	sglangQueue               // sglang:num_queue_reqs
	sglangRunning             // sglang:num_running_reqs
	sglangTokenUse            // sglang:token_usage
	sglangPageSize            // sglang:page_size, SGLang 0.5 on
	llamacppDeferred          // llamacpp:requests_deferred
	llamacppProcessing        // llamacpp:requests_processing
	numMetrics
	notRead = -1 // a metric Parse does not read
)

// maxNameLen is the longest name of a metric Parse reads: a name with a
// longer run of plain name characters is another metric.
const maxNameLen = len("llamacpp:requests_processing")

// metricIndex is which metric name is, or notRead.
func metricIndex(name []byte) int {
	switch string(name) {
	case "vllm:num_requests_waiting":
		return vllmWaiting
	case "vllm:num_requests_running":
		return vllmRunning
	case "vllm:kv_cache_usage_perc":
		return vllmKVUsage
	case "vllm:gpu_cache_usage_perc":
		return vllmGPUCache
	case "vllm:cache_config_info":
		return vllmCacheConfig
	case "sglang:num_queue_reqs":
		return sglangQueue
	case "sglang:num_running_reqs":
		return sglangRunning
	case "sglang:token_usage":
		return sglangTokenUse
	case "sglang:page_size":
		return sglangPageSize
	case "llamacpp:requests_deferred":
		return llamacppDeferred
	case "llamacpp:requests_processing":
		return llamacppProcessing
	}
	return notRead
}

// metricAcc is what the series of one metric add up to.
type metricAcc struct {
	sum float64
	n   int
	// bad reports whether a series was NaN, ±Inf or negative.
	bad bool
	// distribution reports whether a TYPE line made the metric a summary or
	// a histogram, which has no one value to read.
	distribution bool
	// blockSize is the first believable block size among the series, or 0.
	blockSize int
}

// parser is one Parse's state.
type parser struct {
	acc  [numMetrics]metricAcc
	line int    // 1-based number of the line being read, for errors
	buf  []byte // scratch for a name or label value written with quotes or escapes
}

// Parse reads an endpoint's Load from the Prometheus text exposition format
// (version 0.0.4) as vLLM, SGLang and llama.cpp write it; every server's
// names are read whatever the pool's kind. Lines of other metrics are not looked at. It
// returns an error, and an all-unknown Load, when a line of a metric it
// reads is malformed. Lines may end in CRLF, and the last line may lack its
// newline.
func Parse(text []byte) (Load, error) {
	var p parser
	if err := p.parse(text); err != nil {
		return unknownLoad(), err
	}
	return p.load(), nil
}

func (p *parser) parse(text []byte) error {
	for len(text) > 0 {
		p.line++
		var line []byte
		if nl := bytes.IndexByte(text, '\n'); nl >= 0 {
			line, text = text[:nl], text[nl+1:]
		} else {
			line, text = text, nil
		}
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		if err := p.parseLine(line); err != nil {
			return fmt.Errorf("scrape: line %d: %w", p.line, err)
		}
	}
	return nil
}

// parseLine reads one line (without its line end) if it is a sample or a
// TYPE line of a metric Parse reads, and passes over it otherwise.
func (p *parser) parseLine(line []byte) error {
	i := skipBlanks(line, 0)
	if i == len(line) {
		return nil
	}
	switch c := line[i]; {
	case c == '#':
		return p.parseComment(line, i+1)
	case c == '{':
		// The metric's name is among the labels, quoted.
		return p.parseSample(line, i, notRead, true)
	case c == '"':
		// A quoted name; rare enough to read the slow way.
	case c != 'v' && c != 's' && c != 'l':
		// Not the first byte of a name Parse reads.
		return nil
	default:
		j := i
		for j < len(line) && j-i <= maxNameLen && isNameByte(line[j], true) && line[j] != '"' {
			j++
		}
		if j-i > maxNameLen {
			return nil // quotes and escapes only lengthen a name
		}
		if j == len(line) || line[j] != '"' {
			m := metricIndex(line[i:j])
			if m == notRead {
				return nil
			}
			return p.parseSample(line, j, m, false)
		}
	}
	name, j, err := p.readName(line, i, true)
	if err != nil {
		return nil // not read: it cannot be told whose line it is
	}
	m := metricIndex(name)
	if m == notRead {
		return nil
	}
	return p.parseSample(line, j, m, false)
}

// parseComment reads a comment from line[i:], just past its '#'. Only TYPE
// lines of the metrics Parse reads matter: HELP and other comments carry no
// values.
func (p *parser) parseComment(line []byte, i int) error {
	i = skipBlanks(line, i)
	j := i
	for j < len(line) && !isBlank(line[j]) {
		j++
	}
	if string(line[i:j]) != "TYPE" || j == len(line) {
		return nil
	}
	name, j, err := p.readName(line, skipBlanks(line, j), true)
	if err != nil {
		return nil
	}
	m := metricIndex(name)
	if m == notRead || j == len(line) || !isBlank(line[j]) {
		return nil
	}
	j = skipBlanks(line, j)
	if j == len(line) {
		return nil
	}
	distribution, ok := typeKind(line[j:])
	if !ok {
		return fmt.Errorf("%s: unknown metric type %q", metricName(m), line[j:])
	}
	if distribution {
		p.acc[m].distribution = true
	}
	return nil
}

// parseSample reads the rest of a sample line of metric m from line[i:],
// just past its name, or, when braces is true, from the '{' that begins a
// line whose name is among the labels (then m is still notRead).
func (p *parser) parseSample(line []byte, i int, m int, braces bool) error {
	if m != notRead && p.acc[m].distribution {
		return nil
	}
	blockSize := -1 // the first block_size label's value as a block size, 0 if it is none
	if !braces {
		i = skipBlanks(line, i)
	}
	if i < len(line) && line[i] == '{' {
		named := !braces // whether the line's metric name has been read
		i++
		for {
			i = skipBlanks(line, i)
			if i == len(line) {
				return p.syntax(m, "labels not closed")
			}
			if line[i] == '}' {
				if !named {
					return nil // no metric name: expfmt refuses it, and it is nobody's
				}
				i++
				break
			}
			label, j, err := p.readName(line, i, false)
			if err != nil {
				return p.syntax(m, err.Error())
			}
			if len(label) == 0 {
				return p.syntax(m, "invalid label name")
			}
			i = skipBlanks(line, j)
			if i == len(line) || line[i] != '=' {
				// In braces, a name without a value is the metric's.
				if !braces || named || i == len(line) || (line[i] != ',' && line[i] != '}') {
					return p.syntax(m, "expected '=' after label name")
				}
				named = true
				if m = metricIndex(label); m == notRead || p.acc[m].distribution {
					return nil
				}
				if line[i] == ',' {
					i++
					continue
				}
				i++
				break
			}
			isBlockSize := string(label) == "block_size"
			i = skipBlanks(line, i+1)
			if i == len(line) || line[i] != '"' {
				return p.syntax(m, "expected '\"' at start of label value")
			}
			value, j, err := p.readLabelValue(line, i+1)
			if err != nil {
				return p.syntax(m, err.Error())
			}
			if isBlockSize && blockSize < 0 {
				blockSize = parseBlockSize(value)
			}
			i = skipBlanks(line, j)
			if i == len(line) {
				return p.syntax(m, "labels not closed")
			}
			if line[i] == ',' {
				i++
				continue
			}
			if line[i] != '}' {
				return p.syntax(m, "unexpected end of label value")
			}
			if !named {
				return nil // no metric name
			}
			i++
			break
		}
		i = skipBlanks(line, i)
	}
	v, err := p.parseValue(line, i, m)
	if err != nil {
		return err
	}
	p.add(m, v, blockSize)
	return nil
}

// parseValue reads the end of a sample line of metric m from line[i:]:
// the value, then perhaps a timestamp in milliseconds, which is checked
// and passed over.
func (p *parser) parseValue(line []byte, i int, m int) (float64, error) {
	j := i
	for j < len(line) && !isBlank(line[j]) {
		j++
	}
	v, err := parseFloat(line[i:j])
	if err != nil {
		return 0, p.syntax(m, fmt.Sprintf("value %q is not a number", line[i:j]))
	}
	if j < len(line) {
		i = skipBlanks(line, j)
		j = i
		for j < len(line) && !isBlank(line[j]) {
			j++
		}
		if _, err := strconv.ParseInt(string(line[i:j]), 10, 64); err != nil {
			return 0, p.syntax(m, fmt.Sprintf("timestamp %q is not an integer", line[i:j]))
		}
		if j < len(line) {
			return 0, p.syntax(m, "text after the timestamp")
		}
	}
	return v, nil
}

// add counts one series of metric m with value v and, for
// vllm:cache_config_info, block size blockSize (0 or less: none).
func (p *parser) add(m int, v float64, blockSize int) {
	a := &p.acc[m]
	switch m {
	case vllmCacheConfig:
		if a.blockSize == 0 && blockSize > 0 {
			a.blockSize = blockSize
		}
		return
	case sglangPageSize:
		if a.blockSize == 0 && v >= 1 && v <= maxBlockSize && v == math.Trunc(v) {
			a.blockSize = int(v)
		}
		return
	}
	if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		a.bad = true
		return
	}
	if v > 1 && (m == vllmKVUsage || m == vllmGPUCache || m == sglangTokenUse) {
		v = 1
	}
	a.sum += v
	a.n++
}

// load is what the lines read add up to.
func (p *parser) load() Load {
	l := Load{
		Waiting: first(p.sum(vllmWaiting), p.sum(sglangQueue), p.sum(llamacppDeferred)),
		Running: first(p.sum(vllmRunning), p.sum(sglangRunning), p.sum(llamacppProcessing)),
		KVUsage: first(p.mean(vllmKVUsage), p.mean(vllmGPUCache), p.mean(sglangTokenUse)),
	}
	if a := p.acc[vllmCacheConfig]; !a.distribution && a.blockSize > 0 {
		l.BlockSize = a.blockSize
	} else if a := p.acc[sglangPageSize]; !a.distribution {
		l.BlockSize = a.blockSize
	}
	return l
}

// sum is metric m's series added up, or -1 when it has none, one is bad or
// the sum is not finite.
func (p *parser) sum(m int) float64 {
	a := p.acc[m]
	if a.n == 0 || a.bad || a.distribution || math.IsInf(a.sum, 0) {
		return -1
	}
	return a.sum
}

// mean is metric m's series averaged, or -1 as for sum.
func (p *parser) mean(m int) float64 {
	s := p.sum(m)
	if s < 0 {
		return -1
	}
	return s / float64(p.acc[m].n)
}

// first is the first of vs that is known (not negative), or -1.
func first(vs ...float64) float64 {
	for _, v := range vs {
		if v >= 0 {
			return v
		}
	}
	return -1
}

// syntax is the error for a malformed line of metric m.
func (p *parser) syntax(m int, msg string) error {
	if m == notRead {
		return fmt.Errorf("%s", msg)
	}
	return fmt.Errorf("%s: %s", metricName(m), msg)
}

// metricName is metric m's name, for errors.
func metricName(m int) string {
	return [numMetrics]string{
		vllmWaiting:        "vllm:num_requests_waiting",
		vllmRunning:        "vllm:num_requests_running",
		vllmKVUsage:        "vllm:kv_cache_usage_perc",
		vllmGPUCache:       "vllm:gpu_cache_usage_perc",
		vllmCacheConfig:    "vllm:cache_config_info",
		sglangQueue:        "sglang:num_queue_reqs",
		sglangRunning:      "sglang:num_running_reqs",
		sglangTokenUse:     "sglang:token_usage",
		sglangPageSize:     "sglang:page_size",
		llamacppDeferred:   "llamacpp:requests_deferred",
		llamacppProcessing: "llamacpp:requests_processing",
	}[m]
}
