package arch

import (
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// moduleRoot is the repository's root, from this package's directory: the
// main module's, and the deploy module's beside it.
const moduleRoot = "../.."

// moduleFiles is sourceFiles of the module's root; it fails t when they
// cannot be read, or are too few to be the module's.
func moduleFiles(t *testing.T) []string {
	t.Helper()
	files, err := sourceFiles(moduleRoot)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 100 {
		t.Fatalf("read %d Go files, too few to be this module's", len(files))
	}
	return files
}

// sourceFiles is every Go file under root but tests, by its path from
// root with slashes: what the rules on llmgw's own code read. What the go
// command passes over (skipDir) is left out.
func sourceFiles(root string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && skipDir(name) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		files = append(files, filepath.ToSlash(rel))
		return nil
	})
	return files, err
}
