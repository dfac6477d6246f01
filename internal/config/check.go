// Checking a file from the command line (llmgw check --config FILE): every
// problem one a line, or a one-line summary of what the file defines.

package config

import (
	"fmt"
	"io"
)

// Check loads the file at path and writes to w either every problem, one a
// line, or a summary such as "ok: 2 pools, 3 models (5 names), 4
// endpoints". It returns an error, for a non-zero exit, exactly when the
// file is not a valid configuration or cannot be read.
func Check(path string, w io.Writer) error {
	c, err := Load(path)
	if err != nil {
		ps, ok := AsProblems(err)
		if !ok {
			fmt.Fprintln(w, err)
			return err
		}
		for _, p := range ps {
			fmt.Fprintf(w, "%s: %s\n", path, p.Error())
		}
		return fmt.Errorf("check %s: %s", path, plural(len(ps), "problem"))
	}
	if _, err := c.Catalog(); err != nil {
		fmt.Fprintln(w, err)
		return fmt.Errorf("check %s: %w", path, err)
	}
	names, endpoints := 0, 0
	for _, m := range c.Models {
		names += 1 + len(m.Aliases)
	}
	for _, p := range c.Pools {
		endpoints += len(p.Endpoints)
	}
	_, err = fmt.Fprintf(w, "ok: %s, %s (%s), %s\n",
		plural(len(c.Pools), "pool"), plural(len(c.Models), "model"),
		plural(names, "name"), plural(endpoints, "endpoint"))
	return err
}

// plural is n and the noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
