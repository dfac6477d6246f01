package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"debug/elf"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// testCA is a PEM bundle of one certificate authority made for the test,
// so that what the image ships is known whatever the machine holds.
func testCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "llmgw image test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// builtImage runs the image command as `make image` does, into a
// temporary directory, and returns the image read back from the OCI
// layout, the CA bundle it was given and the directory.
func builtImage(t *testing.T) (v1.Image, []byte, string) {
	t.Helper()
	dir := t.TempDir()
	ca := testCA(t)
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "1767225600") // 2026-01-01T00:00:00Z
	var out bytes.Buffer
	args := []string{"-src", "../..", "-ca", caFile, "-version", "1.2.3", "-revision", "abc123",
		"-oci", filepath.Join(dir, "oci"), "-tar", filepath.Join(dir, "llmgw.tar")}
	if err := run(t.Context(), args, &out); err != nil {
		t.Fatal(err)
	}
	t.Log(strings.TrimSpace(out.String()))
	idx, err := layout.ImageIndexFromPath(filepath.Join(dir, "oci"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 || m.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "1.2.3" {
		t.Fatalf("the OCI layout's index holds %+v, want one image named 1.2.3", m.Manifests)
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img, ca, dir
}

// wantConfig is the run configuration the image must have.
var wantConfig = v1.Config{
	User:         "65532:65532",
	Entrypoint:   []string{"/llmgw"},
	Cmd:          []string{"serve"},
	ExposedPorts: map[string]struct{}{"8080/tcp": {}, "8081/tcp": {}},
	Env:          []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "TMPDIR=/var/lib/llmgw"},
	WorkingDir:   "/var/lib/llmgw",
	Volumes:      map[string]struct{}{"/var/lib/llmgw": {}},
	Labels: map[string]string{
		"org.opencontainers.image.title":       "llmgw",
		"org.opencontainers.image.description": "An OpenAI-compatible gateway in front of pools of LLM inference servers and hosted providers.",
		"org.opencontainers.image.source":      "https://gitea.mynodes.xyz/ilker/llmgw",
		"org.opencontainers.image.version":     "1.2.3",
		"org.opencontainers.image.revision":    "abc123",
		"org.opencontainers.image.created":     "2026-01-01T00:00:00Z",
	},
}

// TestImage builds the image, checks its configuration and its files,
// checks that the Dockerfile describes the same image, and runs `llmgw
// serve` from the unpacked filesystem's binary to get a chat completion
// from the demo.
func TestImage(t *testing.T) {
	img, ca, dir := builtImage(t)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantConfig, cf.Config); diff != "" {
		t.Errorf("image config (-want +got):\n%s", diff)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s, want linux/%s", cf.OS, cf.Architecture, runtime.GOARCH)
	}

	// The tarball for `docker load` holds the same configuration and
	// layers; its manifest is docker's own.
	fromTar, err := tarball.ImageFromPath(filepath.Join(dir, "llmgw.tar"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := configAndLayers(t, img), configAndLayers(t, fromTar); !slices.Equal(a, b) {
		t.Errorf("the OCI layout's image has config and layers %v, the tarball's %v", a, b)
	}

	t.Run("Dockerfile", func(t *testing.T) { testDockerfileAgrees(t, cf.Config) })

	root := filepath.Join(dir, "rootfs")
	owners := unpack(t, img, root)
	wantFiles := map[string]string{ // path: mode and owner
		"llmgw":                             "-rwxr-xr-x 0:0",
		"etc/ssl/certs/ca-certificates.crt": "-rw-r--r-- 0:0",
		"var/lib/llmgw":                     "drwxr-xr-x 65532:65532",
	}
	for path, want := range wantFiles {
		if got := owners[path]; got != want {
			t.Errorf("%s: %q, want %q", path, got, want)
		}
	}
	for path, got := range owners {
		if _, ok := wantFiles[path]; !ok && !strings.HasPrefix(got, "d") {
			t.Errorf("the image holds %s (%s), which it should not", path, got)
		}
	}
	if got, err := os.ReadFile(filepath.Join(root, "etc/ssl/certs/ca-certificates.crt")); err != nil || !bytes.Equal(got, ca) {
		t.Errorf("the image's CA bundle is not the one given (%v)", err)
	}
	checkStatic(t, filepath.Join(root, "llmgw"))

	t.Run("serve", func(t *testing.T) { testServeFromImage(t, root) })
}

// configAndLayers is img's config digest and its layers' diff IDs.
func configAndLayers(t *testing.T, img v1.Image) []v1.Hash {
	t.Helper()
	c, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	out := []v1.Hash{c}
	for _, l := range layers {
		d, err := l.DiffID()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// unpack writes img's flattened filesystem under root, and returns each
// entry's mode and owner as "-rwxr-xr-x uid:gid", keyed by its path.
func unpack(t *testing.T, img v1.Image, root string) map[string]string {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	owners := map[string]string{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Clean(h.Name)
		if !filepath.IsLocal(name) {
			t.Fatalf("the image holds a path outside its root: %q", h.Name)
		}
		owners[filepath.ToSlash(name)] = fmt.Sprintf("%s %d:%d", h.FileInfo().Mode(), h.Uid, h.Gid)
		dst := filepath.Join(root, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(dst, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, h.FileInfo().Mode().Perm())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(f, tr); err != nil {
				t.Fatal(err)
			}
			f.Close()
		default:
			t.Errorf("the image holds %s of tar type %q: links and devices are not expected", h.Name, h.Typeflag)
		}
	}
	return owners
}

// checkStatic fails unless the ELF binary at path needs no dynamic loader
// and no shared library: on an empty base there is neither.
func checkStatic(t *testing.T, path string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("%s is dynamically linked (%v)", path, p.Type)
		}
	}
}

// testServeFromImage runs `llmgw serve` with no configuration — the demo —
// from the unpacked binary, in the image's working directory and with its
// environment, and sends it a chat completion.
func testServeFromImage(t *testing.T, root string) {
	data := filepath.Join(root, "var/lib/llmgw")
	cmd := exec.Command(filepath.Join(root, "llmgw"), "serve", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0")
	cmd.Dir = data
	cmd.Env = []string{"TMPDIR=" + data}
	var logs bytes.Buffer // written by exec's goroutine until Wait returns
	cmd.Stderr = &logs
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	defer func() {
		if !stopped {
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("llmgw serve's log:\n%s", logs.String())
		}
	}()
	urls := make(chan [2]string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			// llmgw: OpenAI API on URL, metrics and admin on URL
			if f := strings.Fields(sc.Text()); len(f) == 10 && f[1] == "OpenAI" {
				urls <- [2]string{strings.TrimSuffix(f[4], ","), f[9]}
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	var api, admin string
	select {
	case u := <-urls:
		api, admin = u[0], u[1]
	case err := <-exited:
		stopped = true
		t.Fatalf("llmgw serve from the image exited before serving: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("llmgw serve from the image did not start")
	}

	resp, err := http.Post(api+"/chat/completions", "application/json",
		strings.NewReader(`{"model":"demo","max_tokens":8,"messages":[{"role":"user","content":"Hello!"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var answer struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	err = json.NewDecoder(resp.Body).Decode(&answer)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || len(answer.Choices) != 1 || answer.Choices[0].Message.Content == "" {
		t.Fatalf("chat completion from the image's binary: status %d, %+v, %v", resp.StatusCode, answer, err)
	}
	for _, path := range []string{"/livez", "/readyz"} {
		resp, err := http.Get(admin + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %d", path, resp.StatusCode)
		}
	}

	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Errorf("llmgw serve after SIGTERM: %v, want exit status 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("llmgw serve did not exit within 30 s of SIGTERM")
	}
	left, _ := os.ReadDir(data)
	if len(left) != 0 {
		t.Errorf("the demo left %d entries in %s, such as %s", len(left), data, left[0].Name())
	}
}

// dockerfile is what the Dockerfile's final stage says of the image.
type dockerfile struct {
	config v1.Config
	copies []string // where each COPY writes, in the image
	build  string   // the build stage's go build command line
}

// parseDockerfile reads the instructions of the Dockerfile at path that
// make the image's configuration. It knows the forms this repository's
// Dockerfile uses: JSON arrays for ENTRYPOINT, CMD and VOLUME, key=value
// pairs (quoted or not) for ENV and LABEL, ${ARG} for an ARG's value:
// buildArgs's, else its default.
func parseDockerfile(t *testing.T, path string, buildArgs map[string]string) dockerfile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Join continued lines and drop comments.
	var lines []string
	var cur strings.Builder
	for _, l := range strings.Split(string(b), "\n") {
		if t := strings.TrimSpace(l); strings.HasPrefix(t, "#") || t == "" && cur.Len() == 0 {
			continue
		}
		if s, ok := strings.CutSuffix(strings.TrimRight(l, " \t"), `\`); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(l)
		lines = append(lines, strings.TrimSpace(cur.String()))
		cur.Reset()
	}
	var d dockerfile
	c := &d.config
	args := map[string]string{}
	final := false
	for _, l := range lines {
		instr, rest, _ := strings.Cut(l, " ")
		rest = strings.TrimSpace(rest)
		if strings.EqualFold(instr, "RUN") && strings.Contains(rest, "go build") {
			d.build = rest
		}
		if strings.EqualFold(instr, "FROM") {
			final = strings.HasPrefix(rest, "scratch")
			continue
		}
		if !final {
			continue
		}
		expand := func(s string) string {
			return os.Expand(s, func(k string) string { return args[k] })
		}
		switch strings.ToUpper(instr) {
		case "ARG":
			k, v, _ := strings.Cut(rest, "=")
			if given, ok := buildArgs[k]; ok {
				v = given
			}
			args[k] = v
		case "USER":
			c.User = rest
		case "WORKDIR":
			c.WorkingDir = rest
		case "ENTRYPOINT":
			c.Entrypoint = jsonArray(t, l, rest)
		case "CMD":
			c.Cmd = jsonArray(t, l, rest)
		case "VOLUME":
			c.Volumes = map[string]struct{}{}
			for _, v := range jsonArray(t, l, rest) {
				c.Volumes[v] = struct{}{}
			}
		case "EXPOSE":
			c.ExposedPorts = map[string]struct{}{}
			for _, p := range strings.Fields(rest) {
				if !strings.Contains(p, "/") {
					p += "/tcp"
				}
				c.ExposedPorts[p] = struct{}{}
			}
		case "ENV":
			for k, v := range pairs(t, l, rest) {
				c.Env = append(c.Env, k+"="+expand(v))
			}
			slices.Sort(c.Env)
		case "LABEL":
			if c.Labels == nil {
				c.Labels = map[string]string{}
			}
			for k, v := range pairs(t, l, rest) {
				c.Labels[k] = expand(v)
			}
		case "COPY":
			f := strings.Fields(rest)
			d.copies = append(d.copies, f[len(f)-1])
		default:
			t.Errorf("the Dockerfile's final stage has %q, which this test does not know: teach it, and the image command", instr)
		}
	}
	return d
}

func jsonArray(t *testing.T, line, s string) []string {
	t.Helper()
	var out []string
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		t.Errorf("Dockerfile %q: want a JSON array: %v", line, err)
	}
	return out
}

// pairs reads key=value pairs, each value bare or in double quotes.
func pairs(t *testing.T, line, s string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		k, rest, ok := strings.Cut(s, "=")
		if !ok {
			t.Errorf("Dockerfile %q: want key=value pairs", line)
			return out
		}
		var v string
		if strings.HasPrefix(rest, `"`) {
			end := strings.Index(rest[1:], `"`)
			if end < 0 {
				t.Errorf("Dockerfile %q: an unclosed quote", line)
				return out
			}
			v, s = rest[1:1+end], rest[2+end:]
		} else {
			v, s, _ = strings.Cut(rest, " ")
		}
		out[k] = v
	}
	return out
}

// testDockerfileAgrees checks that the Dockerfile's final stage gives the
// image the configuration the image command gave it (its ARGs given as
// the command's flags were), copies what the image holds, and builds the
// binary with the same flags.
func testDockerfileAgrees(t *testing.T, built v1.Config) {
	// The build's own values, passed as docker build's --build-arg.
	d := parseDockerfile(t, "../../Dockerfile", map[string]string{
		"VERSION":  built.Labels["org.opencontainers.image.version"],
		"REVISION": built.Labels["org.opencontainers.image.revision"],
		"CREATED":  built.Labels["org.opencontainers.image.created"],
	})
	if diff := cmp.Diff(built, d.config); diff != "" {
		t.Errorf("the Dockerfile's image config differs from the image command's (-command +Dockerfile):\n%s", diff)
	}
	wantCopies := []string{caPath, binaryPath, dataDir}
	if diff := cmp.Diff(wantCopies, d.copies); diff != "" {
		t.Errorf("the Dockerfile's final stage copies (-the image command's layers +Dockerfile):\n%s", diff)
	}
	for _, want := range []string{"CGO_ENABLED=0", "GOOS=linux", "GOWORK=off", "go build", "-trimpath", `-ldflags="-s -w -buildid="`, "./cmd/llmgw"} {
		if !strings.Contains(d.build, want) {
			t.Errorf("the Dockerfile's go build (%q) lacks %s, which the image command's has", d.build, want)
		}
	}
	if !slices.Contains(goBuildFlags, "-trimpath") || !slices.Contains(goBuildFlags, "-ldflags=-s -w -buildid=") {
		t.Errorf("the image command builds with %q, not the Dockerfile's flags", goBuildFlags)
	}
}

// TestBuildIgnoresWorkspaces builds the binary with GOWORK naming a
// workspace that cannot load: the image's binary is built from llmgw's
// module alone, at the versions its go.mod gives, whatever workspace the
// build machine has.
func TestBuildIgnoresWorkspaces(t *testing.T) {
	dir := t.TempDir()
	work := filepath.Join(dir, "go.work")
	if err := os.WriteFile(work, []byte("go 1.26.8\n\nuse ./nowhere\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOWORK", work)
	if err := buildBinary(t.Context(), "../..", runtime.GOARCH, filepath.Join(dir, "llmgw")); err != nil {
		t.Fatal(err)
	}
}
