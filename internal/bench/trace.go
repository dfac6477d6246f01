package bench

// Replaying production traces: Mooncake JSONL (arrival time, lengths and the
// 512-token prefix blocks each prompt is made of) and the Azure LLM
// inference CSV (arrival time and lengths only). Blocks become text by id,
// so requests that share a block id share a real prefix. Time and length
// scaling let a trace from a large cluster run on a small machine.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// MooncakeBlockTokens is the length of one Mooncake prefix block (hash id).
const MooncakeBlockTokens = 512

// TraceRecord is one request of a trace, before scaling.
type TraceRecord struct {
	At     time.Duration // from the trace's first request
	Input  int           // prompt tokens
	Output int           // answer tokens
	// Blocks are the prompt's prefix blocks of MooncakeBlockTokens each,
	// outermost first; nil when the trace has none (Azure).
	Blocks []uint64
}

// Trace formats.
const (
	formatMooncake = "mooncake"
	formatAzure    = "azure"
)

// ReadTrace reads a trace file, choosing the format by extension (.jsonl,
// .json: Mooncake; .csv: Azure) or else by its first non-blank byte.
func ReadTrace(path string) ([]TraceRecord, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<16)
	format := ""
	switch strings.ToLower(filepath.Ext(path)) {
	case ".jsonl", ".json":
		format = formatMooncake
	case ".csv":
		format = formatAzure
	default:
		head, _ := br.Peek(512)
		if c := bytes.TrimLeft(head, " \t\r\n"); len(c) > 0 && c[0] == '{' {
			format = formatMooncake
		} else {
			format = formatAzure
		}
	}
	var recs []TraceRecord
	if format == formatMooncake {
		recs, err = parseMooncake(br)
	} else {
		recs, err = parseAzure(br)
	}
	if err != nil {
		return nil, fmt.Errorf("trace %s: %w", filepath.Base(path), err)
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("trace %s: no requests", filepath.Base(path))
	}
	return recs, nil
}

// parseMooncake reads Mooncake JSONL: one object a line with timestamp
// (milliseconds), input_length, output_length and hash_ids.
func parseMooncake(r io.Reader) ([]TraceRecord, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<16), 16<<20)
	var recs []TraceRecord
	var first float64
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var rec struct {
			Timestamp *float64 `json:"timestamp"`
			Input     *int     `json:"input_length"`
			Output    *int     `json:"output_length"`
			HashIDs   []uint64 `json:"hash_ids"`
		}
		if err := json.Unmarshal(b, &rec); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		switch {
		case rec.Timestamp == nil:
			return nil, fmt.Errorf("line %d: timestamp is missing", line)
		case rec.Input == nil || *rec.Input < 0:
			return nil, fmt.Errorf("line %d: input_length is missing or negative", line)
		case rec.Output == nil || *rec.Output < 0:
			return nil, fmt.Errorf("line %d: output_length is missing or negative", line)
		}
		if len(recs) == 0 {
			first = *rec.Timestamp
		}
		at := time.Duration((*rec.Timestamp - first) * float64(time.Millisecond))
		if err := inOrder(recs, at); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		recs = append(recs, TraceRecord{
			At:     at,
			Input:  *rec.Input,
			Output: *rec.Output,
			Blocks: rec.HashIDs,
		})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return recs, nil
}

// azureTimeLayout is the Azure trace's TIMESTAMP: up to seven fractional
// digits, no zone.
const azureTimeLayout = "2006-01-02 15:04:05.9999999"

// parseAzure reads the Azure LLM inference CSV: a header naming TIMESTAMP,
// ContextTokens and GeneratedTokens (in any order), then one row a request.
// Times are taken relative to the first row.
func parseAzure(r io.Reader) ([]TraceRecord, error) {
	sc := bufio.NewScanner(r)
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("empty file")
	}
	col := map[string]int{}
	for i, h := range strings.Split(strings.TrimSpace(sc.Text()), ",") {
		col[strings.TrimSpace(h)] = i
	}
	ti, ok1 := col["TIMESTAMP"]
	ci, ok2 := col["ContextTokens"]
	gi, ok3 := col["GeneratedTokens"]
	if !ok1 || !ok2 || !ok3 {
		return nil, fmt.Errorf("header must name TIMESTAMP, ContextTokens and GeneratedTokens, got %q", sc.Text())
	}
	var recs []TraceRecord
	var first time.Time
	for line := 2; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		f := strings.Split(text, ",")
		if len(f) <= max(ti, ci, gi) {
			return nil, fmt.Errorf("line %d: %d fields, want at least %d", line, len(f), max(ti, ci, gi)+1)
		}
		ts, err := time.Parse(azureTimeLayout, strings.TrimSpace(f[ti]))
		if err != nil {
			return nil, fmt.Errorf("line %d: TIMESTAMP: %w", line, err)
		}
		in, err := strconv.Atoi(strings.TrimSpace(f[ci]))
		if err != nil || in < 0 {
			return nil, fmt.Errorf("line %d: ContextTokens %q is not a non-negative integer", line, f[ci])
		}
		out, err := strconv.Atoi(strings.TrimSpace(f[gi]))
		if err != nil || out < 0 {
			return nil, fmt.Errorf("line %d: GeneratedTokens %q is not a non-negative integer", line, f[gi])
		}
		if len(recs) == 0 {
			first = ts
		}
		at := ts.Sub(first)
		if err := inOrder(recs, at); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		recs = append(recs, TraceRecord{At: at, Input: in, Output: out})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return recs, nil
}

// inOrder refuses a request that arrives before the last one read:
// replay sends requests in the trace's order and cuts it at a point of
// its clock.
func inOrder(recs []TraceRecord, at time.Duration) error {
	if n := len(recs); n > 0 && at < recs[n-1].At {
		return fmt.Errorf("timestamp is %v before the request above it; a trace must be in arrival order", recs[n-1].At-at)
	}
	return nil
}

// uniqueStream is the PCG stream of the text that belongs to one trace
// request alone: the tail a trace's blocks do not cover, and all of an
// Azure prompt.
const uniqueStream = 0x756e69717565 // "unique"

// replay turns a trace into requests: from the trace's point From to its
// point To (zero: its end), arrivals divided by TimeScale and cut at
// Duration (zero: no cut), token counts divided by LengthScale.
// A prompt is its blocks' texts in order, each block MooncakeBlockTokens
// divided by LengthScale long, the last cut to the prompt's length; text
// beyond the blocks is the request's own.
func replay(s Spec, texts *Texts) ([]Request, error) {
	recs, err := ReadTrace(s.TracePath)
	if err != nil {
		return nil, err
	}
	ts, ls := s.TimeScale, s.LengthScale
	if ts == 0 {
		ts = 1
	}
	if ls == 0 {
		ls = 1
	}
	if !(ts > 0) || !(ls > 0) || math.IsInf(ts, 0) || math.IsInf(ls, 0) {
		return nil, fmt.Errorf("time and length scales must be positive, got %v and %v", ts, ls)
	}
	blockTokens := max(1, int(math.Round(MooncakeBlockTokens/ls)))
	var reqs []Request
	seen := map[uint64]int{} // key: block id; the most of its tokens sent so far
	for i, r := range recs {
		if r.At < s.From {
			continue
		}
		if s.To > 0 && r.At >= s.To {
			break
		}
		at := time.Duration(float64(r.At-s.From) / ts)
		if s.Duration > 0 && at >= s.Duration {
			break
		}
		input := scaleTokens(r.Input, ls)
		var parts []string
		left := input
		prefixSeen, shared := 0, true
		for _, id := range r.Blocks {
			if left <= 0 {
				break
			}
			n := min(blockTokens, left)
			parts = append(parts, texts.Block(id, n))
			left -= n
			if shared {
				hit := min(n, seen[id])
				prefixSeen += hit
				shared = hit == n
			}
			seen[id] = max(seen[id], n)
		}
		if left > 0 {
			parts = append(parts, texts.Random(rand.New(rand.NewPCG(uint64(i), uniqueStream)), left))
		}
		reqs = append(reqs, Request{
			At: at, Tenant: defaultTenant, Class: defaultClass,
			Prompt:       []Message{{Role: "user", Content: parts}},
			PromptTokens: input, MaxTokens: max(1, scaleTokens(r.Output, ls)), IgnoreEOS: true, SLO: s.SLO,
			PrefixSeen: prefixSeen,
		})
	}
	return reqs, nil
}

// scaleTokens divides a token count, keeping at least one token of a
// non-empty count.
func scaleTokens(n int, scale float64) int {
	if n <= 0 {
		return 0
	}
	return max(1, int(math.Round(float64(n)/scale)))
}

// prefixCeiling is a trace's own prefix hit ceiling: the share of its
// prompt tokens, as replayed (after length scaling and the cuts of
// --trace-from, --trace-to and --duration, in arrival order), that an
// unbounded prefix cache shared by every replica would serve. A request's
// prompt is its blocks in order, each 512/length-scale tokens and the last
// cut to the prompt's length, then text of its own. Walking its blocks from the first, a block's tokens
// count as hits up to the most of that block an earlier request sent; the
// walk stops at the first block not wholly seen, since a cache matches
// prefixes only. Tokens past the blocks never hit. A trace without block
// ids (Azure) has a ceiling of 0. The ceiling ignores that a server
// computes at least one prompt token and caches in blocks of its own size,
// so a perfect router measures slightly below it.
type prefixCeiling struct {
	seen, prompt int64 // tokens
}

// ceilingOf is the prefix hit ceiling of replayed requests.
func ceilingOf(reqs []Request) prefixCeiling {
	var c prefixCeiling
	for i := range reqs {
		c.seen += int64(reqs[i].PrefixSeen)
		c.prompt += int64(reqs[i].PromptTokens)
	}
	return c
}

// add pools another run's tokens into c.
func (c *prefixCeiling) add(o prefixCeiling) {
	c.seen += o.seen
	c.prompt += o.prompt
}

// share is the ceiling, 0 to 1, or nil without prompt tokens.
func (c prefixCeiling) share() *float64 {
	if c.prompt == 0 {
		return nil
	}
	f := float64(c.seen) / float64(c.prompt)
	return &f
}
