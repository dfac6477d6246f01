package proxy

import "testing"

// TestReasons: every reason has a label value of its own, none empty but
// ReasonNone's, and a value outside the set has none.
func TestReasons(t *testing.T) {
	seen := map[string]Reason{}
	for _, r := range Reasons {
		name := r.String()
		if name == "" {
			t.Errorf("reason %d has no label value", r)
		}
		if prev, ok := seen[name]; ok {
			t.Errorf("reasons %d and %d share the label value %q", prev, r, name)
		}
		seen[name] = r
	}
	if len(Reasons) != len(reasonNames)-1 {
		t.Errorf("Reasons lists %d reasons, the set has %d", len(Reasons), len(reasonNames)-1)
	}
	if ReasonNone.String() != "" || Reason(len(reasonNames)).String() != "" {
		t.Error("ReasonNone, or a value outside the set, has a label value")
	}
	if b, _ := ReasonStatus5xx.MarshalText(); string(b) != "status_5xx" {
		t.Errorf("ReasonStatus5xx marshals as %q", b)
	}
}
