package bench

// Faults on spawned replicas, given with --sim-fault and applied at their
// times from each run's start: a kill crashes a replica for good, a stall
// hangs it for a while (the simulator's Hang fault).

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Fault kinds.
const (
	FaultKill  = "kill"
	FaultStall = "stall"
)

// SimFault is one scheduled fault on a spawned replica.
type SimFault struct {
	Replica int           // 0-based index among the spawned replicas
	Kind    string        // FaultKill or FaultStall
	At      time.Duration // from the run's start
	For     time.Duration // how long a stall lasts; zero for a kill
}

// String is the fault as --sim-fault takes it: R:kill@T or R:stall@T+D.
func (f SimFault) String() string {
	s := fmt.Sprintf("%d:%s@%v", f.Replica, f.Kind, f.At)
	if f.Kind == FaultStall {
		s += "+" + f.For.String()
	}
	return s
}

// MarshalJSON writes the fault with its times in seconds and its flag
// form.
func (f SimFault) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Spec    string  `json:"spec"`
		Replica int     `json:"replica"`
		Kind    string  `json:"kind"`
		AtS     float64 `json:"at_s"`
		ForS    float64 `json:"for_s,omitempty"`
	}{f.String(), f.Replica, f.Kind, f.At.Seconds(), f.For.Seconds()})
}

// parseSimFault reads R:kill@T or R:stall@T+D, T and D Go durations.
func parseSimFault(s string) (SimFault, error) {
	bad := func(why string, args ...any) (SimFault, error) {
		return SimFault{}, fmt.Errorf("%q: %s; want R:kill@T or R:stall@T+D, such as 1:stall@5s+2s", s, fmt.Sprintf(why, args...))
	}
	r, rest, ok := strings.Cut(s, ":")
	if !ok {
		return bad("no replica index before ':'")
	}
	idx, err := strconv.Atoi(r)
	if err != nil || idx < 0 {
		return bad("replica %q is not a 0-based index", r)
	}
	kind, when, ok := strings.Cut(rest, "@")
	if !ok {
		return bad("no '@' before the time")
	}
	f := SimFault{Replica: idx, Kind: kind}
	at := when
	switch kind {
	case FaultKill:
		if strings.Contains(when, "+") {
			return bad("a kill has no duration")
		}
	case FaultStall:
		var d string
		at, d, ok = strings.Cut(when, "+")
		if !ok {
			return bad("a stall needs its duration, T+D")
		}
		if f.For, err = time.ParseDuration(d); err != nil || f.For <= 0 {
			return bad("stall duration %q is not a positive Go duration", d)
		}
	default:
		return bad("unknown fault %q", kind)
	}
	if f.At, err = time.ParseDuration(at); err != nil || f.At < 0 {
		return bad("time %q is not a non-negative Go duration", at)
	}
	return f, nil
}

// checkFaults checks faults against a pool of n replicas: each names one
// of them, a replica is killed at most once and has nothing after its
// kill, and one replica's stalls do not overlap.
func checkFaults(faults []SimFault, n int) error {
	byReplica := map[int][]SimFault{}
	for _, f := range faults {
		if f.Replica >= n {
			return fmt.Errorf("--sim-fault %s: replica %d does not exist; --spawn-sim %d makes replicas 0 to %d", f, f.Replica, n, n-1)
		}
		byReplica[f.Replica] = append(byReplica[f.Replica], f)
	}
	for _, fs := range byReplica {
		slices.SortStableFunc(fs, func(a, b SimFault) int { return cmp.Compare(a.At, b.At) })
		for i := 1; i < len(fs); i++ {
			prev, f := fs[i-1], fs[i]
			switch {
			case prev.Kind == FaultKill:
				return fmt.Errorf("--sim-fault %s: replica %d is already dead after %s", f, f.Replica, prev)
			case f.At < prev.At+prev.For:
				return fmt.Errorf("--sim-fault %s: overlaps %s on the same replica", f, prev)
			}
		}
	}
	return nil
}

// scheduleFaults calls apply for each fault at its time from now, in time
// order, from one goroutine. stop cancels the faults not yet applied and
// waits for one being applied.
func scheduleFaults(faults []SimFault, apply func(SimFault)) (stop func()) {
	if len(faults) == 0 {
		return func() {}
	}
	sorted := slices.Clone(faults)
	slices.SortStableFunc(sorted, func(a, b SimFault) int { return cmp.Compare(a.At, b.At) })
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		start := time.Now()
		timer := time.NewTimer(0)
		defer timer.Stop()
		<-timer.C
		for _, f := range sorted {
			if wait := f.At - time.Since(start); wait > 0 {
				timer.Reset(wait)
				select {
				case <-timer.C:
				case <-ctx.Done():
					return
				}
			}
			apply(f)
		}
	})
	return func() {
		cancel()
		wg.Wait()
	}
}

// logFault says on w that a fault is being applied, and when.
func logFault(w io.Writer, f SimFault) {
	switch f.Kind {
	case FaultKill:
		fmt.Fprintf(w, "fault at %v: replica %d killed\n", f.At, f.Replica)
	case FaultStall:
		fmt.Fprintf(w, "fault at %v: replica %d stalls for %v\n", f.At, f.Replica, f.For)
	}
}
