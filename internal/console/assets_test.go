package console

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestVendoredChartIsPinned: the chart library served is the file
// vendor.sh fetches, at the SHA-256 it pins, and asks for no source map
// from anywhere.
func TestVendoredChartIsPinned(t *testing.T) {
	script, err := os.ReadFile("assets/vendor.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^sha256=([0-9a-f]{64})$`).FindSubmatch(script)
	if m == nil {
		t.Fatal("vendor.sh pins no sha256")
	}
	b, err := assetFS.ReadFile("assets/chart.umd.min.js")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if got := hex.EncodeToString(sum[:]); got != string(m[1]) {
		t.Errorf("assets/chart.umd.min.js has SHA-256 %s; vendor.sh pins %s", got, m[1])
	}
	if strings.Contains(string(b), "sourceMappingURL") {
		t.Error("the vendored chart still asks for a source map")
	}
}

// TestAssetsServed: the script and the chart are served as JavaScript to
// a signed-in browser, and the pages load nothing from another host.
func TestAssetsServed(t *testing.T) {
	tc := newTestConsole(t, testToken)
	c := tc.client(t)
	tc.signIn(t, c)
	for _, a := range []string{"console.js", "chart.umd.min.js", "console.css"} {
		resp, body := tc.get(t, c, "/ui/assets/"+a)
		if resp.StatusCode != 200 || len(body) < 100 {
			t.Errorf("/ui/assets/%s: %d, %d bytes", a, resp.StatusCode, len(body))
		}
	}
	offsite := regexp.MustCompile(`(src|href)="(https?:)?//`)
	for _, p := range pages {
		if _, body := tc.get(t, c, "/ui/"+p); offsite.MatchString(body) {
			t.Errorf("/ui/%s loads from another host: %s", p, offsite.FindString(body))
		}
	}
	if resp, _ := tc.get(t, c, "/ui/nothing-here"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown console page: %d, want 404", resp.StatusCode)
	}
}
