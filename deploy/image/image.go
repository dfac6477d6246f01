// The container image, built without a container daemon: a static llmgw
// binary and a bundle of CA certificates on an empty base, run as a user
// with no privileges, everything it writes under one directory. The
// Dockerfile at the repository's root builds the same image with a
// daemon; image_test.go holds the two to each other.

package main

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// What the image holds and how it starts. The Dockerfile says the same.
const (
	// binaryPath is where the llmgw binary lies, and the entrypoint.
	binaryPath = "/llmgw"
	// caPath is where Go's crypto/x509 looks first on Linux.
	caPath = "/etc/ssl/certs/ca-certificates.crt"
	// dataDir is the one directory llmgw writes to: the working
	// directory (so the default store, sqlite:llmgw.db, and its spool
	// land there), TMPDIR (the spool of a PostgreSQL store and the
	// demo's), and a volume, so that a read-only root filesystem serves.
	dataDir = "/var/lib/llmgw"
	// uid and gid are distroless's "nonroot": no name, no privileges, and
	// not root inside the container's user namespace either.
	uid = 65532
	gid = 65532
)

// defaultPath is the PATH docker build gives an image whose base has none;
// stated in both, so that both images say the same.
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// ports are those the image exposes: the API and the admin listener, as
// a configuration for a container sets them (server.listen ":8080",
// server.admin_listen ":8081").
var ports = []string{"8080/tcp", "8081/tcp"}

// goBuildFlags build llmgw as the Dockerfile does: no cgo, so the binary
// is static and needs no libc; paths and symbol tables left out.
var goBuildFlags = []string{"build", "-trimpath", "-ldflags=-s -w -buildid=", "-o"}

// spec is what varies between builds of the image.
type spec struct {
	// Arch is the GOARCH the binary is built for.
	Arch string
	// Version, Revision and Created become their OCI labels.
	Version, Revision string
	Created           time.Time
	// CA is the PEM bundle of certificate authorities to ship.
	CA []byte
}

// staticLabels are the OCI labels every build carries alike.
var staticLabels = map[string]string{
	"org.opencontainers.image.title":       "llmgw",
	"org.opencontainers.image.description": "An OpenAI-compatible gateway in front of pools of LLM inference servers and hosted providers.",
	"org.opencontainers.image.source":      "https://gitea.mynodes.xyz/ilker/llmgw",
}

// labels are every OCI label of an image built to s.
func (s spec) labels() map[string]string {
	l := map[string]string{
		"org.opencontainers.image.version":  s.Version,
		"org.opencontainers.image.revision": s.Revision,
		"org.opencontainers.image.created":  s.Created.UTC().Format(time.RFC3339),
	}
	for k, v := range staticLabels {
		l[k] = v
	}
	return l
}

// config is the image's run configuration.
func (s spec) config() v1.Config {
	exposed := make(map[string]struct{}, len(ports))
	for _, p := range ports {
		exposed[p] = struct{}{}
	}
	return v1.Config{
		User:         fmt.Sprintf("%d:%d", uid, gid),
		Entrypoint:   []string{binaryPath},
		Cmd:          []string{"serve"},
		ExposedPorts: exposed,
		Env:          []string{defaultPath, "TMPDIR=" + dataDir},
		WorkingDir:   dataDir,
		Volumes:      map[string]struct{}{dataDir: {}},
		Labels:       s.labels(),
	}
}

// buildBinary builds cmd/llmgw from the module at src for linux/arch into
// out. It builds from that module alone, at the versions its go.mod
// gives: no go.work, whatever GOWORK says, adds another module's
// requirements to it.
func buildBinary(ctx context.Context, src, arch, out string) error {
	cmd := exec.CommandContext(ctx, "go", append(goBuildFlags, out, "./cmd/llmgw")...)
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch, "GOWORK=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %w\n%s", err, b)
	}
	return nil
}

// file is one entry of a layer: a directory when body is nil.
type file struct {
	path     string // absolute, in the image
	mode     int64
	uid, gid int
	body     []byte
}

// layer is a gzipped OCI layer of files, every one stamped at mtime so
// that the same inputs give the same digest.
func layer(files []file, mtime time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{
			Name: strings.TrimPrefix(f.path, "/"), Mode: f.mode, Uid: f.uid, Gid: f.gid,
			ModTime: mtime, Format: tar.FormatPAX,
		}
		if f.body == nil {
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("layer: %s: %w", f.path, err)
		}
		if _, err := tw.Write(f.body); err != nil {
			return nil, fmt.Errorf("layer: %s: %w", f.path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// dirs are the directories above path, outermost first, as root's 0755.
func dirs(path string) []file {
	var out []file
	for d := filepath.Dir(path); d != "/"; d = filepath.Dir(d) {
		out = append([]file{{path: d, mode: 0o755}}, out...)
	}
	return out
}

// buildImage is the image of the llmgw binary at binary, built to s: three
// layers, as the Dockerfile's three COPYs into its final stage make — the
// CA bundle, the binary, and the data directory owned by the image's
// user.
func buildImage(binary []byte, s spec) (v1.Image, error) {
	mtime := s.Created
	layers := [][]file{
		append(dirs(caPath), file{path: caPath, mode: 0o644, body: s.CA}),
		{{path: binaryPath, mode: 0o755, body: binary}},
		append(dirs(dataDir), file{path: dataDir, mode: 0o755, uid: uid, gid: gid}),
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	var history []v1.History
	for i, files := range layers {
		l, err := layer(files, mtime)
		if err != nil {
			return nil, err
		}
		h := v1.History{Created: v1.Time{Time: mtime}, CreatedBy: "llmgw deploy/image: " + files[len(files)-1].path}
		history = append(history, h)
		if img, err = mutate.Append(img, mutate.Addendum{Layer: l, History: h}); err != nil {
			return nil, fmt.Errorf("layer %d: %w", i, err)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = s.Arch, "linux"
	cf.Created = v1.Time{Time: mtime}
	cf.Config = s.config()
	cf.History = history
	return mutate.ConfigFile(img, cf)
}
