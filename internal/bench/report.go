package bench

// What a run leaves behind: a table on stdout, the --json file scripts
// read, and a short list of the errors seen.

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Output is the --json file. Its top-level figures are every request of
// every run; with a sweep, Runs holds one report per rate.
type Output struct {
	Workload  string `json:"workload"`
	Seed      uint64 `json:"seed"`
	Target    string `json:"target"` // the URL, or spawn-sim:N; never a key
	Direct    bool   `json:"direct,omitempty"`
	Model     string `json:"model"`
	Policy    string `json:"policy,omitempty"` // the gateways' routing policy; empty with --direct or --target
	Admission string `json:"admission,omitempty"`
	// Pool is the shape of the spawned pool; nil with --target.
	Pool *Pool `json:"pool,omitempty"`
	// Faults are the faults scheduled on spawned replicas, from each run's
	// start.
	Faults    []SimFault `json:"faults,omitempty"`
	Quick     bool       `json:"quick"`
	DurationS float64    `json:"duration_s"` // arrivals of each run; 0 for a whole trace
	Trace     string     `json:"trace,omitempty"`
	TimeScale float64    `json:"time_scale,omitempty"`
	LenScale  float64    `json:"length_scale,omitempty"`
	// TraceFromS is where on the trace's clock replay started, in seconds.
	TraceFromS float64 `json:"trace_from_s,omitempty"`
	// TraceToS is where on the trace's clock replay stopped, in seconds;
	// 0 for the trace's end.
	TraceToS float64 `json:"trace_to_s,omitempty"`
	// Rate is the offered rate of a single run; 0 with a sweep or a trace.
	Rate float64 `json:"rate,omitempty"`
	Report
	// PrefixHitCeiling is, for a trace, the share of its prompt tokens an
	// unbounded cache shared by every replica would hit (see
	// prefixCeiling), beside the measured prefix_hit_rate; nil for the
	// other workloads.
	PrefixHitCeiling *float64 `json:"prefix_hit_ceiling,omitempty"`
	// Capacity is a sweep's capacity at SLO; nil for a single run.
	*Capacity
	// Hedges is what the gateways counted of their hedges, over every
	// run; nil without --hedge.
	Hedges *Hedges `json:"hedges,omitempty"`
	// Placements is what the gateways counted of the prefix index
	// placements they shared (llmgw_prefix_placements_total), over every
	// run; nil without --redis.
	Placements *Shared `json:"placements,omitempty"`
	// LoadMessages is what they counted of the messages of their loads
	// (llmgw_peer_load_messages_total); nil unless they shared them.
	LoadMessages *Shared `json:"load_messages,omitempty"`
	Runs         []Run   `json:"runs,omitempty"`
}

// Shared is what the gateways counted of what they shared with each other
// over Redis: sent, dropped unsent, received and applied, received and
// ignored.
type Shared struct {
	Sent     float64 `json:"sent"`
	Dropped  float64 `json:"dropped"`
	Received float64 `json:"received"`
	Ignored  float64 `json:"ignored"`
}

func (p *Shared) add(o Shared) {
	p.Sent += o.Sent
	p.Dropped += o.Dropped
	p.Received += o.Received
	p.Ignored += o.Ignored
}

// Hedges is what hedging cost and won: requests sent to a second
// endpoint, those the second answered first, and the upstream seconds
// spent on the calls that lost, cancelled when the other answered.
type Hedges struct {
	Sent    float64 `json:"sent"`
	Won     float64 `json:"won"`
	WastedS float64 `json:"wasted_s"`
}

func (h *Hedges) add(o Hedges) {
	h.Sent += o.Sent
	h.Won += o.Won
	h.WastedS += o.WastedS
}

// Pool is the shape of a spawned pool.
type Pool struct {
	Replicas int       `json:"replicas"`
	Speeds   []float64 `json:"speeds"`             // each replica's, in order
	Instant  bool      `json:"instant,omitempty"`  // --sim-instant: speeds do not matter
	Virtual  bool      `json:"virtual,omitempty"`  // --virtual: on a virtual clock, without HTTP
	Profile  string    `json:"profile,omitempty"`  // --sim-profile; empty with --sim-instant
	Gateways int       `json:"gateways,omitempty"` // 0 with --direct
	// NumBlocks is each replica's KV-cache capacity (--sim-num-blocks);
	// 0 for the simulator's default.
	NumBlocks int `json:"num_blocks,omitempty"`
	// SharedIndex reports whether the gateways shared their prefix
	// indexes over Redis (--redis); SharedLoad, whether they shared what
	// each has in flight at each replica (--redis, unless --share-load
	// is off).
	SharedIndex bool `json:"shared_index,omitempty"`
	SharedLoad  bool `json:"shared_load,omitempty"`
}

// Run is one rate of a sweep, or one time scale of a trace's sweep.
type Run struct {
	// Rate is the offered rate in requests a second: the swept rate, or a
	// trace's requests over the time to its last arrival at TimeScale.
	Rate      float64 `json:"rate"`
	TimeScale float64 `json:"time_scale,omitempty"` // a trace's sweep only
	Report
	PrefixHitCeiling *float64 `json:"prefix_hit_ceiling,omitempty"`
}

// WriteJSON writes out to path, indented.
func WriteJSON(path string, out *Output) error {
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return fmt.Errorf("json: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("json: %w", err)
	}
	return nil
}

// ms formats seconds as milliseconds for the table.
func ms(s float64) string { return fmt.Sprintf("%.1f", s*1000) }

const tableHeader = "requests\tok\trejected\terrors\tdropped\tgoodput\tttft p50\tttft p99\ttpot p99\titl p99\te2e p99\tout tok/s\tprefix hit\t"

func tableRow(s Stats) string {
	return fmt.Sprintf("%d\t%d\t%d\t%d\t%d\t%.3f\t%s\t%s\t%s\t%s\t%s\t%.0f\t%.3f\t",
		s.Requests, s.OK, s.Rejected, s.Errors, s.Dropped, s.Goodput,
		ms(s.TTFTp50), ms(s.TTFTp99), ms(s.TPOTp99), ms(s.ITLp99), ms(s.E2Ep99),
		s.OutputTokensPerS, s.PrefixHitRate)
}

// WriteTable writes the run's figures as a table: one row per rate for a
// sweep, else the run overall, then by class and by tenant. Latencies are
// in milliseconds.
func WriteTable(w io.Writer, out *Output) error {
	fmt.Fprintln(w, setupLine(out))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	if len(out.Runs) > 0 {
		if out.Trace != "" {
			fmt.Fprintln(tw, "time scale\toffered\tachieved\t"+tableHeader+"hit ceiling\t")
			for _, r := range out.Runs {
				fmt.Fprintf(tw, "%g\t%.1f\t%.1f\t%s%s\t\n", r.TimeScale, r.Rate, r.AchievedRate, tableRow(r.Stats), share(r.PrefixHitCeiling))
			}
		} else {
			fmt.Fprintln(tw, "rate\tachieved\t"+tableHeader)
			for _, r := range out.Runs {
				fmt.Fprintf(tw, "%g\t%.1f\t%s\n", r.Rate, r.AchievedRate, tableRow(r.Stats))
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if out.Capacity != nil {
			_, err := fmt.Fprintln(w, out.Capacity.String())
			return err
		}
		return nil
	}
	fmt.Fprintln(tw, "\t\t"+tableHeader)
	fmt.Fprintf(tw, "all\t\t%s\n", tableRow(out.Stats))
	for _, k := range slices.Sorted(maps.Keys(out.ByClass)) {
		fmt.Fprintf(tw, "class\t%s\t%s\n", k, tableRow(out.ByClass[k]))
	}
	for _, k := range slices.Sorted(maps.Keys(out.ByTenant)) {
		fmt.Fprintf(tw, "tenant\t%s\t%s\n", k, tableRow(out.ByTenant[k]))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if out.Jain > 0 {
		fmt.Fprintf(w, "Jain's fairness index over the tenants' served tokens: %.3f", out.Jain)
		if out.JainMaxMin > 0 {
			fmt.Fprintf(w, " (max-min fair share of the same tokens: %.3f)", out.JainMaxMin)
		}
		fmt.Fprintln(w)
	}
	if h := out.Hedges; h != nil {
		fmt.Fprintf(w, "hedged %.0f requests (%.1f%% of those sent), %.0f answered first by the hedge; %.1f upstream seconds spent on the losers\n",
			h.Sent, 100*h.Sent/float64(max(out.Requests-out.Dropped, 1)), h.Won, h.WastedS)
	}
	if p := out.Placements; p != nil {
		fmt.Fprintf(w, "prefix index placements shared: %.0f sent, %.0f dropped unsent, %.0f received, %.0f ignored\n",
			p.Sent, p.Dropped, p.Received, p.Ignored)
	}
	if p := out.LoadMessages; p != nil {
		fmt.Fprintf(w, "load messages shared: %.0f sent, %.0f dropped unsent, %.0f received, %.0f ignored\n",
			p.Sent, p.Dropped, p.Received, p.Ignored)
	}
	if out.Rejected > 0 {
		fmt.Fprintf(w, "429s came in p50 %sms, p99 %sms\n", ms(out.Rejectedp50), ms(out.Rejectedp99))
	}
	if out.Late > 0 {
		fmt.Fprintf(w, "%d served with their first token past their TTFT SLO\n", out.Late)
	}
	if out.PrefixHitCeiling != nil {
		fmt.Fprintf(w, "prefix hit rate %.3f of the trace's ceiling %.3f\n", out.PrefixHitRate, *out.PrefixHitCeiling)
	}
	_, err := fmt.Fprintf(w, "achieved %.1f req/s over %.1fs; driver lag p99 %sms; latencies in ms\n",
		out.AchievedRate, out.WallSeconds, ms(out.LagP99))
	return err
}

// share formats an optional share for the table; "-" when absent.
func share(f *float64) string {
	if f == nil {
		return "-"
	}
	return fmt.Sprintf("%.3f", *f)
}

// setupLine says what a run was sent to: the target, or the spawned
// pool's shape, the gateways' policy and the faults.
func setupLine(out *Output) string {
	var b strings.Builder
	b.WriteString(out.Workload)
	if out.Trace != "" {
		fmt.Fprintf(&b, " %s (lengths ÷%g", filepath.Base(out.Trace), out.LenScale)
		if out.TraceFromS != 0 {
			fmt.Fprintf(&b, ", from %gs", out.TraceFromS)
		}
		if out.TraceToS != 0 {
			fmt.Fprintf(&b, ", to %gs", out.TraceToS)
		}
		if out.TimeScale != 0 {
			fmt.Fprintf(&b, ", time scale %g", out.TimeScale)
		}
		b.WriteString(")")
	}
	fmt.Fprintf(&b, ", seed %d: ", out.Seed)
	p := out.Pool
	if p == nil {
		b.WriteString(out.Target)
		return b.String()
	}
	fmt.Fprintf(&b, "%d simulated replicas", p.Replicas)
	if p.Instant {
		b.WriteString(" (instant)")
	} else {
		speeds := make([]string, len(p.Speeds))
		for i, v := range p.Speeds {
			speeds[i] = strconv.FormatFloat(v, 'g', -1, 64)
		}
		fmt.Fprintf(&b, " (profile %s, speeds %s", p.Profile, strings.Join(speeds, ","))
		if p.NumBlocks > 0 {
			fmt.Fprintf(&b, ", %d KV blocks", p.NumBlocks)
		}
		b.WriteString(")")
	}
	if out.Direct {
		b.WriteString(", direct to replica 0")
	} else {
		fmt.Fprintf(&b, " behind %d gateway", p.Gateways)
		if p.Gateways != 1 {
			b.WriteString("s")
		}
		switch {
		case p.SharedIndex && p.SharedLoad:
			b.WriteString(" sharing a prefix index and their loads")
		case p.SharedIndex:
			b.WriteString(" sharing a prefix index")
		}
		fmt.Fprintf(&b, ", policy %s, admission %s", out.Policy, out.Admission)
	}
	if p.Virtual {
		b.WriteString(", on a virtual clock")
	}
	if len(out.Faults) > 0 {
		faults := make([]string, len(out.Faults))
		for i, f := range out.Faults {
			faults[i] = f.String()
		}
		fmt.Fprintf(&b, "; faults %s", strings.Join(faults, " "))
	}
	return b.String()
}

// maxErrorKinds is how many distinct error messages a run lists.
const maxErrorKinds = 5

// writeErrors lists the most frequent error messages of results, with
// their counts.
func writeErrors(w io.Writer, results []Result) {
	count := map[string]int{}
	for i := range results {
		if results[i].Err != "" {
			count[results[i].Err]++
		}
	}
	if len(count) == 0 {
		return
	}
	kinds := slices.SortedFunc(maps.Keys(count), func(a, b string) int {
		if count[a] != count[b] {
			return count[b] - count[a]
		}
		if a < b {
			return -1
		}
		return 1
	})
	for i, k := range kinds {
		if i == maxErrorKinds {
			fmt.Fprintf(w, "  ... and %d more kinds\n", len(kinds)-i)
			break
		}
		fmt.Fprintf(w, "  %6d × %s\n", count[k], k)
	}
}
