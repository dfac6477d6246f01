// Package docs holds llmgw's documentation; its tests check that every
// relative link in the README and the pages under docs/ resolves, and that
// every name they give of the code exists (names_test.go).
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// linkRE is a Markdown link or image: its target, without a title.
var linkRE = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// headingRE is an ATX heading.
var headingRE = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*#*\s*$`)

// anchor is the fragment GitHub gives a heading: lower case, punctuation
// but hyphens and underscores dropped, spaces as hyphens.
func anchor(heading string) string {
	heading = strings.ReplaceAll(heading, "`", "")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors are the fragments of the headings in a Markdown page, code
// blocks left out; a repeated heading's later fragments get -1, -2...
func anchors(page string) map[string]bool {
	var text strings.Builder
	fenced := false
	for line := range strings.SplitSeq(page, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			text.WriteString(line + "\n")
		}
	}
	seen := make(map[string]int)
	out := make(map[string]bool)
	for _, m := range headingRE.FindAllStringSubmatch(text.String(), -1) {
		a := anchor(m[1])
		if n := seen[a]; n > 0 {
			out[a+"-"+string(rune('0'+n))] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// pages are the README and every Markdown page under docs/.
func pages(t *testing.T) []string {
	t.Helper()
	ps := []string{"../README.md"}
	err := filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			ps = append(ps, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// TestRelativeLinksResolve: every relative link names a file or directory
// that exists, and every fragment a heading of the page it points at.
func TestRelativeLinksResolve(t *testing.T) {
	for _, p := range pages(t) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range linkRE.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			dest := p
			if file != "" {
				dest = filepath.Join(filepath.Dir(p), file)
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s: link %s: %v", p, target, err)
					continue
				}
			}
			if frag == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			page, err := os.ReadFile(dest)
			if err != nil {
				t.Errorf("%s: link %s: %v", p, target, err)
				continue
			}
			if !anchors(string(page))[frag] {
				t.Errorf("%s: link %s: %s has no heading #%s", p, target, dest, frag)
			}
		}
	}
}

// TestAnchor: the fragments of headings as GitHub makes them.
func TestAnchor(t *testing.T) {
	for heading, want := range map[string]string{
		"8. Redis":                                "8-redis",
		"The switch to net/http":                  "the-switch-to-nethttp",
		"Prompt caches":                           "prompt-caches",
		"Anthropic's Messages API":                "anthropics-messages-api",
		"`llmgw bench` and its flags":             "llmgw-bench-and-its-flags",
		"A token's cost through a translated API": "a-tokens-cost-through-a-translated-api",
	} {
		if got := anchor(heading); got != want {
			t.Errorf("anchor(%q) = %q, want %q", heading, got, want)
		}
	}
}
