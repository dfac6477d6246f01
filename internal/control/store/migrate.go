// Schema migrations: numbered SQL files embedded per database, applied in
// order, each recorded in a schema_migrations table so reopening a store
// applies only what is new.

package store

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

//go:embed migrations
var migrationFiles embed.FS

// migration is one numbered SQL file.
type migration struct {
	version int    // from the file name: 0001_init.sql is 1
	name    string // the file name
	sql     string
}

// loadMigrations reads the migrations of one database (sqlite or
// postgres), lowest version first. Versions must be unique and positive.
func loadMigrations(db string) ([]migration, error) {
	dir := path.Join("migrations", db)
	entries, err := fs.ReadDir(migrationFiles, dir)
	if err != nil {
		return nil, fmt.Errorf("read %s migrations: %w", db, err)
	}
	var out []migration
	seen := map[int]string{} // key: version; value: file name
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".sql") {
			continue
		}
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s/%s: name must start with a positive number and '_'", db, name)
		}
		if prev, dup := seen[v]; dup {
			return nil, fmt.Errorf("migrations %s/%s and %s share version %d", db, prev, name, v)
		}
		seen[v] = name
		b, err := fs.ReadFile(migrationFiles, path.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("read migration %s/%s: %w", db, name, err)
		}
		out = append(out, migration{version: v, name: name, sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}
