package bench

import (
	"strings"
	"testing"
)

// TestWriteTableJain checks the fairness line: Jain alone, or with the
// max-min fair share's beside it when the report has one.
func TestWriteTableJain(t *testing.T) {
	for _, tc := range []struct {
		name             string
		jain, jainMaxMin float64
		want             string
	}{
		{"both", 0.928, 0.9294, "Jain's fairness index over the tenants' served tokens: 0.928 (max-min fair share of the same tokens: 0.929)\n"},
		{"no max-min", 0.928, 0, "Jain's fairness index over the tenants' served tokens: 0.928\n"},
		{"one tenant", 0, 0, ""},
	} {
		out := &Output{Workload: WorkloadNoisy, Target: "http://gw", Report: Report{Jain: tc.jain, JainMaxMin: tc.jainMaxMin}}
		var b strings.Builder
		if err := WriteTable(&b, out); err != nil {
			t.Fatal(err)
		}
		var got string
		for _, line := range strings.SplitAfter(b.String(), "\n") {
			if strings.HasPrefix(line, "Jain's") {
				got += line
			}
		}
		if got != tc.want {
			t.Errorf("%s: fairness line %q, want %q", tc.name, got, tc.want)
		}
	}
}
