// Command image builds llmgw's container image without a container daemon
// and writes it as an OCI image layout, and as a tarball `docker load`
// reads when asked: `go run ./image -src ..` in deploy/, or `make image`
// from the repository's root.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// defaultCA is the build machine's bundle of certificate authorities, as
// Debian's and Ubuntu's ca-certificates package writes it.
const defaultCA = "/etc/ssl/certs/ca-certificates.crt"

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	var (
		src      = fs.String("src", ".", "the llmgw module's root `directory`")
		binary   = fs.String("binary", "", "a llmgw `file` built already (CGO_ENABLED=0, GOOS=linux); empty builds one")
		arch     = fs.String("arch", runtime.GOARCH, "the `GOARCH` to build for")
		ca       = fs.String("ca", defaultCA, "the PEM `file` of certificate authorities to ship")
		version  = fs.String("version", "dev", "the image's org.opencontainers.image.version")
		revision = fs.String("revision", "unknown", "the image's org.opencontainers.image.revision: the commit built")
		ociDir   = fs.String("oci", "llmgw-image", "write an OCI image layout to this `directory`")
		tarPath  = fs.String("tar", "", "also write a tarball `docker load` reads to this file")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	created, err := sourceDate(os.Getenv("SOURCE_DATE_EPOCH"))
	if err != nil {
		return err
	}
	s := spec{Arch: *arch, Version: *version, Revision: *revision, Created: created}
	if s.CA, err = os.ReadFile(*ca); err != nil {
		return fmt.Errorf("the CA bundle: %w", err)
	}
	bin := *binary
	if bin == "" {
		tmp, err := os.MkdirTemp("", "llmgw-image-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		bin = filepath.Join(tmp, "llmgw")
		if err := buildBinary(ctx, *src, *arch, bin); err != nil {
			return err
		}
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	img, err := buildImage(b, s)
	if err != nil {
		return err
	}
	tag, err := name.NewTag("llmgw:" + *version)
	if err != nil {
		return fmt.Errorf("--version: %w", err)
	}
	if err := writeLayout(*ociDir, img, tag); err != nil {
		return err
	}
	if *tarPath != "" {
		if err := tarball.WriteToFile(*tarPath, tag, img); err != nil {
			return fmt.Errorf("writing %s: %w", *tarPath, err)
		}
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	size, err := compressedSize(img)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "image %s %s: %.1f MB compressed, in %s\n", tag, digest, float64(size)/1e6, *ociDir)
	return nil
}

// sourceDate is SOURCE_DATE_EPOCH as a time, so that two builds of one
// commit give one digest; now when it is empty.
func sourceDate(epoch string) (time.Time, error) {
	if epoch == "" {
		return time.Now().UTC().Truncate(time.Second), nil
	}
	n, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH: %w", err)
	}
	return time.Unix(n, 0).UTC(), nil
}

// writeLayout writes img to an OCI image layout at dir, named tag; what
// dir held before is replaced.
func writeLayout(dir string, img v1.Image, tag name.Tag) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("writing %s: %w", dir, err)
	}
	ann := map[string]string{"org.opencontainers.image.ref.name": tag.TagStr()}
	if err := p.AppendImage(img, layout.WithAnnotations(ann)); err != nil {
		return fmt.Errorf("writing %s: %w", dir, err)
	}
	return nil
}

// compressedSize is what pulling img moves: its layers as stored.
func compressedSize(img v1.Image) (int64, error) {
	layers, err := img.Layers()
	if err != nil {
		return 0, err
	}
	var n int64
	for _, l := range layers {
		s, err := l.Size()
		if err != nil {
			return 0, err
		}
		n += s
	}
	return n, nil
}
