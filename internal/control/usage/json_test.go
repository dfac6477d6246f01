package usage

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"
)

// sameAsEncodingJSON fails t unless r.AppendJSON writes what
// encoding/json's Marshal writes, or fails where it fails.
func sameAsEncodingJSON(t *testing.T, r Record) {
	t.Helper()
	want, wantErr := json.Marshal(r)
	got, err := r.AppendJSON([]byte("prefix"))
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("AppendJSON(%+v): error %v, encoding/json's %v", r, err, wantErr)
	}
	if err != nil {
		return
	}
	if !bytes.HasPrefix(got, []byte("prefix")) || !bytes.Equal(got[len("prefix"):], want) {
		t.Fatalf("AppendJSON(%+v):\n got %s\nwant prefix%s", r, got, want)
	}
}

func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	at := time.Date(2026, 12, 5, 23, 42, 40, 123456789, time.UTC)
	for name, r := range map[string]Record{
		"empty": {},
		"a request": {ID: "r1", Time: at, KeyID: "k1", Tenant: "acme/search", Model: "llama", Pool: "gpu", Endpoint: "http://10.0.0.1:8000/v1",
			PromptTokens: 31, CompletionTokens: 200, CachedTokens: 16, Estimated: true, CostUSD: 0.000123, Status: 200,
			TTFT: 150 * time.Millisecond, Duration: 2 * time.Second, Streamed: true},
		"escapes":              {ID: "a\"b\\c\n\r\t\b\f\x00\x1f<>&\u2028\u2029é", Model: "\xff\xfe bad utf-8 \xed\xa0\x80", Time: at},
		"a local offset":       {ID: "r", Time: at.In(time.FixedZone("", -(9*3600 + 30*60)))},
		"an offset of seconds": {ID: "r", Time: at.In(time.FixedZone("", 3600+7))},
		"year 10000":           {ID: "r", Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
		"year -1":              {ID: "r", Time: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)},
		"an offset of a day":   {ID: "r", Time: at.In(time.FixedZone("", 24*3600))},
		"tiny cost":            {CostUSD: 1e-7},
		"negative tiny":        {CostUSD: -3.5e-9},
		"huge cost":            {CostUSD: 1e21},
		"huger cost":           {CostUSD: 1.5e300},
		"cost at the edge":     {CostUSD: 1e-6},
		"negative zero":        {CostUSD: math.Copysign(0, -1)},
		"NaN cost":             {CostUSD: math.NaN()},
		"infinite cost":        {CostUSD: math.Inf(-1)},
		"negative counts":      {PromptTokens: -1, CompletionTokens: math.MinInt64, Status: -499, TTFT: -1, Duration: math.MaxInt64},
	} {
		t.Run(name, func(t *testing.T) { sameAsEncodingJSON(t, r) })
	}
}

// FuzzAppendJSONMatchesEncodingJSON holds AppendJSON to encoding/json
// over every field: any strings, times, offsets, counts and costs.
func FuzzAppendJSONMatchesEncodingJSON(f *testing.F) {
	f.Add("r1", int64(1733442160123456789), 0, "k1", "acme/search", "llama", "gpu", "http://10.0.0.1/v1",
		int64(31), int64(200), int64(16), false, 0.000123, 200, int64(150e6), int64(2e9), true)
	f.Add("<&>\u2028\xff", int64(-6213559680e9), -34200, "", "", "", "", "", int64(-1), int64(0), int64(0), true, 1e-7, 499, int64(0), int64(0), false)
	f.Fuzz(func(t *testing.T, id string, unixNanos int64, offset int, key, tenant, model, pool, endpoint string,
		prompt, completion, cached int64, estimated bool, cost float64, status int, ttft, duration int64, streamed bool) {
		r := Record{ID: id, Time: time.Unix(0, unixNanos).In(time.FixedZone("", offset%(48*3600))), KeyID: key, Tenant: tenant,
			Model: model, Pool: pool, Endpoint: endpoint, PromptTokens: prompt, CompletionTokens: completion, CachedTokens: cached,
			Estimated: estimated, CostUSD: cost, Status: status, TTFT: time.Duration(ttft), Duration: time.Duration(duration), Streamed: streamed}
		sameAsEncodingJSON(t, r)
		// Years past 9999 are out of time.Unix's reach in nanoseconds:
		// shift the same record by millennia too.
		r.Time = r.Time.AddDate(int(unixNanos%12000), 0, 0)
		sameAsEncodingJSON(t, r)
	})
}

func BenchmarkAppendJSON(b *testing.B) {
	r := Record{ID: "chatcmpl-0123456789abcdef", Time: time.Now(), KeyID: "k_0123456789", Tenant: "acme/search/alice", Model: "llama",
		Pool: "gpu", Endpoint: "http://10.0.0.1:8000/v1", PromptTokens: 31, CompletionTokens: 200, CachedTokens: 16,
		CostUSD: 0.000123, Status: 200, TTFT: 150 * time.Millisecond, Duration: 2 * time.Second, Streamed: true}
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf, _ = r.AppendJSON(buf[:0])
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		for b.Loop() {
			buf.Reset()
			enc.Encode(r)
		}
	})
}
