package arch

import (
	"os/exec"
	"strings"
	"testing"
)

// testOnly are modules the tests use and the binary must never link: the
// OpenID Provider the sign-in tests run, and the browser they drive.
var testOnly = []string{"github.com/zitadel/", "github.com/chromedp/"}

// TestBinaryLinksNoTestTools: nothing cmd/llmgw reaches is from a module
// only the tests may use.
func TestBinaryLinksNoTestTools(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "./cmd/llmgw")
	cmd.Dir = moduleRoot
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/llmgw: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list gave %d packages for cmd/llmgw, too few", len(deps))
	}
	for _, d := range deps {
		for _, m := range testOnly {
			if strings.HasPrefix(d, m) {
				t.Errorf("cmd/llmgw links %s, a test-only module's", d)
			}
		}
	}
}
