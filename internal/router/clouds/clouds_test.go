package clouds

import (
	"testing"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

func TestPoolsOfEachCloud(t *testing.T) {
	for _, c := range []struct {
		pool                  catalog.Pool
		prefix                string
		translated, anthropic bool
	}{
		{catalog.Pool{Kind: catalog.KindVertex, Project: "p 1", Location: "us-east5"}, "/projects/p%201/locations/us-east5/publishers/google", true, false},
		{catalog.Pool{Kind: catalog.KindVertex, Project: "proj-1", Location: "global", Publisher: catalog.PublisherGoogle}, "/projects/proj-1/locations/global/publishers/google", true, false},
		{catalog.Pool{Kind: catalog.KindVertex, Project: "proj-1", Location: "us-east5", Publisher: catalog.PublisherAnthropic}, "/projects/proj-1/locations/us-east5/publishers/anthropic", false, true},
		{catalog.Pool{Kind: catalog.KindGemini}, "", true, false},
		{catalog.Pool{Kind: catalog.KindBedrock, Region: "us-east-1"}, "", true, false},
		{catalog.Pool{Kind: catalog.KindAnthropic, Publisher: catalog.PublisherAnthropic}, "", false, false},
	} {
		p := c.pool
		if got := Prefix(p); got != c.prefix {
			t.Errorf("%s pool %+v: prefix %q, want %q", p.Kind, p, got, c.prefix)
		}
		if Translated(p) != c.translated || Anthropic(p) != c.anthropic {
			t.Errorf("%s pool %+v: translated %v, Anthropic's %v; want %v, %v", p.Kind, p, Translated(p), Anthropic(p), c.translated, c.anthropic)
		}
		if signed := Signer(p) != nil; signed != (p.Kind == catalog.KindVertex || p.Kind == catalog.KindBedrock) {
			t.Errorf("%s pool: a signer %v", p.Kind, signed)
		}
	}
}
