package bench

import (
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseSimFault(t *testing.T) {
	good := []struct {
		in   string
		want SimFault
	}{
		{"0:kill@5s", SimFault{Replica: 0, Kind: FaultKill, At: 5 * time.Second}},
		{"3:kill@0s", SimFault{Replica: 3, Kind: FaultKill}},
		{"1:stall@2.5s+1m0s", SimFault{Replica: 1, Kind: FaultStall, At: 2500 * time.Millisecond, For: time.Minute}},
		{"12:stall@0s+500ms", SimFault{Replica: 12, Kind: FaultStall, For: 500 * time.Millisecond}},
	}
	for _, tt := range good {
		got, err := parseSimFault(tt.in)
		if err != nil {
			t.Errorf("parseSimFault(%q): %v", tt.in, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("parseSimFault(%q) (-want +got):\n%s", tt.in, diff)
		}
		if got.String() != tt.in {
			t.Errorf("String() = %q, want %q", got.String(), tt.in)
		}
	}
	bad := map[string]string{
		"":               "no replica index",
		"kill@5s":        "no replica index",
		"x:kill@5s":      `replica "x" is not a 0-based index`,
		"-1:kill@5s":     `replica "-1"`,
		"0:kill":         "no '@'",
		"0:kill@":        `time "" is not`,
		"0:kill@5":       `time "5" is not`,
		"0:kill@-1s":     `time "-1s" is not`,
		"0:kill@1s+2s":   "a kill has no duration",
		"0:stall@1s":     "a stall needs its duration",
		"0:stall@1s+0s":  `stall duration "0s" is not a positive`,
		"0:stall@1s+-2s": `stall duration "-2s"`,
		"0:stall@x+2s":   `time "x"`,
		"0:pause@1s":     `unknown fault "pause"`,
	}
	for in, want := range bad {
		_, err := parseSimFault(in)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "want R:kill@T or R:stall@T+D") {
			t.Errorf("parseSimFault(%q): error %v, want one containing %q and the form", in, err, want)
		}
	}
}

func TestCheckFaults(t *testing.T) {
	f := func(s string) SimFault {
		sf, err := parseSimFault(s)
		if err != nil {
			t.Fatal(err)
		}
		return sf
	}
	ok := [][]SimFault{
		nil,
		{f("0:kill@1s"), f("1:kill@1s")},
		{f("0:stall@1s+1s"), f("0:stall@2s+1s"), f("0:kill@3s")},
		{f("0:kill@5s"), f("0:stall@1s+1s")}, // given out of order
	}
	for _, faults := range ok {
		if err := checkFaults(faults, 2); err != nil {
			t.Errorf("checkFaults(%v): %v", faults, err)
		}
	}
	bad := []struct {
		faults []SimFault
		want   string
	}{
		{[]SimFault{f("2:kill@1s")}, "replica 2 does not exist"},
		{[]SimFault{f("0:kill@1s"), f("0:kill@2s")}, "already dead"},
		{[]SimFault{f("0:kill@1s"), f("0:kill@1s")}, "already dead"},
		{[]SimFault{f("0:stall@1s+5s"), f("0:kill@3s")}, "overlaps"},
		{[]SimFault{f("1:stall@1s+1s"), f("1:stall@1500ms+1s")}, "overlaps"},
	}
	for _, tt := range bad {
		if err := checkFaults(tt.faults, 2); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("checkFaults(%v): %v, want an error containing %q", tt.faults, err, tt.want)
		}
	}
}

func TestScheduleFaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		type applied struct {
			fault string
			at    time.Duration
		}
		var mu sync.Mutex
		var got []applied
		start := time.Now()
		faults := []SimFault{
			{Replica: 1, Kind: FaultStall, At: 3 * time.Second, For: time.Second},
			{Replica: 0, Kind: FaultKill, At: time.Second},
			{Replica: 2, Kind: FaultKill, At: time.Hour},
		}
		stop := scheduleFaults(faults, func(f SimFault) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, applied{f.String(), time.Since(start)})
		})
		time.Sleep(10 * time.Second)
		stop() // the kill an hour in never comes
		time.Sleep(2 * time.Hour)
		want := []applied{{"0:kill@1s", time.Second}, {"1:stall@3s+1s", 3 * time.Second}}
		if diff := cmp.Diff(want, got, cmp.AllowUnexported(applied{})); diff != "" {
			t.Errorf("faults applied (-want +got):\n%s", diff)
		}
	})
}
