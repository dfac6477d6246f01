package bench

// What a run leaves behind: a table on stdout, the --json file scripts
// read, and a short list of the errors seen.

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"text/tabwriter"
)

// Output is the --json file. Its top-level figures are every request of
// every run; with a sweep, Runs holds one report per rate.
type Output struct {
	Workload  string  `json:"workload"`
	Seed      uint64  `json:"seed"`
	Target    string  `json:"target"` // the URL, or spawn-sim:N; never a key
	Direct    bool    `json:"direct,omitempty"`
	Model     string  `json:"model"`
	Policy    string  `json:"policy,omitempty"`
	Admission string  `json:"admission,omitempty"`
	Quick     bool    `json:"quick"`
	DurationS float64 `json:"duration_s"` // arrivals of each run; 0 for a whole trace
	Trace     string  `json:"trace,omitempty"`
	TimeScale float64 `json:"time_scale,omitempty"`
	LenScale  float64 `json:"length_scale,omitempty"`
	// Rate is the offered rate of a single run; 0 with a sweep or a trace.
	Rate float64 `json:"rate,omitempty"`
	Report
	Runs []Run `json:"runs,omitempty"`
}

// Run is one rate of a sweep.
type Run struct {
	Rate float64 `json:"rate"` // offered, requests a second
	Report
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
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	if len(out.Runs) > 0 {
		fmt.Fprintln(tw, "rate\tachieved\t"+tableHeader)
		for _, r := range out.Runs {
			fmt.Fprintf(tw, "%g\t%.1f\t%s\n", r.Rate, r.AchievedRate, tableRow(r.Stats))
		}
		return tw.Flush()
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
	_, err := fmt.Fprintf(w, "achieved %.1f req/s over %.1fs; driver lag p99 %sms; latencies in ms\n",
		out.AchievedRate, out.WallSeconds, ms(out.LagP99))
	return err
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
