// The latest records, in the suite every Store passes.

package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
)

func testRecords(t *testing.T, s Store) {
	recs := []usage.Record{
		rec("a1", 0, "k1", "acme", "llama", 200, 100, 10, 0, 1),
		rec("a2", 1*time.Minute, "k2", "acme/search", "llama", 200, 200, 20, 50, 2),
		rec("a3", 2*time.Minute, "k3", "acme/search/alice", "qwen", 429, 300, 0, 0, 0),
		rec("a4", 3*time.Minute, "k3", "acme/search/alice", "qwen", 200, 400, 40, 0, 4),
		rec("a5", 4*time.Minute, "k4", "acme2", "llama", 200, 1000, 100, 0, 8),
		rec("a6", 5*time.Minute, "k5", "acme-x", "llama", 499, 2000, 5, 0, 0.5),
		rec("a7", 6*time.Minute, "k6", "a_c", "qwen", 503, 5, 0, 0, 0),
		// Two at the same time: the later ID comes first.
		rec("a8", 7*time.Minute, "k7", "<b>x</b>", "<script>m</script>", 200, 7, 0, 0, 0),
		rec("a9", 7*time.Minute, "k8", "abc", "qwen", 200, 9, 1, 0, 0.125),
	}
	recs[8].Estimated, recs[8].Streamed = true, false
	if err := s.AddUsage(t.Context(), recs); err != nil {
		t.Fatal(err)
	}
	ids := func(rs []usage.Record) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	tests := []struct {
		name string
		q    usage.RecordQuery
		want []string
	}{
		{"everything, newest first", usage.RecordQuery{}, []string{"a9", "a8", "a7", "a6", "a5", "a4", "a3", "a2", "a1"}},
		{"limit", usage.RecordQuery{Limit: 2}, []string{"a9", "a8"}},
		{"tenant and descendants", usage.RecordQuery{TenantPrefix: "acme"}, []string{"a4", "a3", "a2", "a1"}},
		{"tenant prefix is not a string prefix", usage.RecordQuery{TenantPrefix: "acme/sea"}, nil},
		{"underscore is literal", usage.RecordQuery{TenantPrefix: "a_c"}, []string{"a7"}},
		{"key", usage.RecordQuery{KeyID: "k3"}, []string{"a4", "a3"}},
		{"model", usage.RecordQuery{Model: "qwen"}, []string{"a9", "a7", "a4", "a3"}},
		{"model named with markup", usage.RecordQuery{Model: "<script>m</script>"}, []string{"a8"}},
		{"status", usage.RecordQuery{Status: 429}, []string{"a3"}},
		{"errors", usage.RecordQuery{Errors: true}, []string{"a7", "a6", "a3"}},
		{"since is inclusive, until exclusive", usage.RecordQuery{Since: t0.Add(time.Minute), Until: t0.Add(3 * time.Minute)}, []string{"a3", "a2"}},
		{"every filter", usage.RecordQuery{TenantPrefix: "acme", KeyID: "k3", Model: "qwen", Errors: true, Since: t0, Until: t0.Add(time.Hour), Limit: 5}, []string{"a3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.Records(t.Context(), tt.q)
			if err != nil {
				t.Fatalf("Records: %v", err)
			}
			if diff := cmp.Diff(tt.want, ids(got)); diff != "" {
				t.Errorf("Records(%+v) IDs (-want +got):\n%s", tt.q, diff)
			}
		})
	}
	// Every field comes back as written.
	got, err := s.Records(t.Context(), usage.RecordQuery{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]usage.Record{recs[8]}, got); diff != "" {
		t.Errorf("the latest record read back (-want +got):\n%s", diff)
	}

	// A tool call's record, its kind and bytes among its fields.
	tool := usage.Record{ID: "t1", Time: t0.Add(time.Hour), KeyID: "k1", Tenant: "acme", Model: "github__create_issue",
		Pool: "github", Status: 200, Duration: 3 * time.Millisecond, Kind: usage.KindTool, BytesIn: 42, BytesOut: 1234}
	if err := s.AddUsage(t.Context(), []usage.Record{tool}); err != nil {
		t.Fatal(err)
	}
	if got, err = s.Records(t.Context(), usage.RecordQuery{Limit: 1}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]usage.Record{tool}, got); diff != "" {
		t.Errorf("a tool call's record read back (-want +got):\n%s", diff)
	}
}

// testRecordsLimit checks that the limit is bounded whatever is asked.
func testRecordsLimit(t *testing.T, s Store) {
	var recs []usage.Record
	for i := range usage.MaxRecords + 5 {
		recs = append(recs, rec(fmt.Sprintf("r%05d", i), time.Duration(i)*time.Millisecond, "k", "acme", "m", 200, 1, 1, 0, 0))
	}
	if err := s.AddUsage(t.Context(), recs); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ limit, want int }{{0, usage.DefaultRecords}, {-1, usage.DefaultRecords}, {7, 7}, {usage.MaxRecords * 10, usage.MaxRecords}} {
		got, err := s.Records(t.Context(), usage.RecordQuery{Limit: tt.limit})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != tt.want {
			t.Errorf("Records(Limit: %d): got %d records, want %d", tt.limit, len(got), tt.want)
		}
		if len(got) > 0 && got[0].ID != recs[len(recs)-1].ID {
			t.Errorf("Records(Limit: %d): first is %s, want the latest, %s", tt.limit, got[0].ID, recs[len(recs)-1].ID)
		}
	}
}
