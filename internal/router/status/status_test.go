package status

import (
	"testing"
	"time"
)

// TestModelRates counts requests in the completed seconds of the window
// alone: the second under way and those past the window are left out.
func TestModelRates(t *testing.T) {
	var m modelRates
	base := time.Unix(1_000_000, 0)
	for i := range 20 {
		status := 200
		if i%4 == 0 {
			status = 503
		}
		m.note("m", status, base.Add(time.Duration(i)*500*time.Millisecond)) // seconds 0..9, two a second
	}
	rps, errRate := m.rate("m", base.Add(10*time.Second))
	if rps != 2 || errRate != 0.25 {
		t.Errorf("rate at +10s = %v/s, errors %v; want 2/s, 0.25", rps, errRate)
	}
	m.note("m", 200, base.Add(30*time.Second)) // the second under way at base+30s
	if rps, _ := m.rate("m", base.Add(30*time.Second)); rps != 0 {
		t.Errorf("rate at +30s = %v/s; want 0: the second under way is not counted, the old ones are past the window", rps)
	}
	if rps, _ := m.rate("other", base); rps != 0 {
		t.Errorf("rate of a model never seen = %v", rps)
	}
}
