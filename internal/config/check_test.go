package config

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

func TestCheck(t *testing.T) {
	// What llmgw check says of the pools' credentials reads the
	// environment, and names no secret.
	for _, k := range []string{"ANTHROPIC_API_KEY", "AZURE_OPENAI_API_KEY", "GEMINI_API_KEY", "AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"} {
		t.Setenv(k, "")
	}
	t.Setenv("OPENAI_API_KEY", "sk-secret-in-env")
	t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", "/var/run/secrets/token")
	tests := []struct {
		file    string
		want    string // what Check writes
		wantErr bool
	}{
		{"testdata/full.good.yaml", `ok: 11 pools, 3 models (5 names), 12 endpoints
pool openai: key from $OPENAI_API_KEY
pool claude: key from $ANTHROPIC_API_KEY, which is not set
pool azure: key from $AZURE_OPENAI_API_KEY, which is not set
pool bedrock: AWS credentials from web identity (AWS_WEB_IDENTITY_TOKEN_FILE, as on EKS), signing for us-east-1, assuming arn:aws:iam::123456789012:role/llmgw-bedrock
pool gemini: key from $GEMINI_API_KEY, which is not set
pool vertex: Google credentials from credentials_file /etc/llmgw/vertex-sa.json
pool vertex-claude: Google credentials from credentials_file /etc/llmgw/vertex-sa.json
`, false},
		{"testdata/minimal.good.yaml", "ok: 1 pool, 1 model (1 name), 1 endpoint\n", false},
		{"testdata/same-listen.bad.yaml", `testdata/same-listen.bad.yaml: server.admin_listen: must differ from server.listen, both are ":8080" (line 4)
testdata/same-listen.bad.yaml: store.url: sqlite: needs a file path, such as sqlite:llmgw.db (line 6)
testdata/same-listen.bad.yaml: limits.redis: must name a host, such as redis://127.0.0.1:6379/0 (line 8)
`, true},
		{"testdata/malformed.bad.yaml", "testdata/malformed.bad.yaml: did not find expected ',' or '}' (line 3)\n", true},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.file), func(t *testing.T) {
			var out bytes.Buffer
			err := Check(tt.file, &out)
			if (err != nil) != tt.wantErr {
				t.Errorf("Check error = %v; want error: %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, out.String()); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCheckCountsProblems(t *testing.T) {
	var out bytes.Buffer
	err := Check("testdata/settings.bad.yaml", &out)
	want := "check testdata/settings.bad.yaml: 18 problems"
	if err == nil || err.Error() != want {
		t.Errorf("Check error = %v; want %q", err, want)
	}
	if got := strings.Count(out.String(), "\n"); got != 18 {
		t.Errorf("Check wrote %d lines; want one a problem, 18:\n%s", got, out.String())
	}
}

func TestCheckMissingFile(t *testing.T) {
	var out bytes.Buffer
	err := Check(filepath.Join(t.TempDir(), "nope.yaml"), &out)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Check error = %v; want fs.ErrNotExist", err)
	}
	if !strings.Contains(out.String(), "nope.yaml") {
		t.Errorf("Check output %q does not name the file", out.String())
	}
}

// TestCheckAgainst: checked against the file in service, a file's changes
// that a reload leaves for a restart are named; a file whose changes a
// reload applies says so; a file in service that does not load fails.
func TestCheckAgainst(t *testing.T) {
	full, err := os.ReadFile("testdata/full.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	next := strings.NewReplacer(`listen: ":8080"`, `listen: ":9090"`, "url: sqlite:/var/lib/llmgw/llmgw.db", "url: sqlite:/srv/llmgw.db",
		"tenant_label: team", "tenant_label: team\n  # a comment changes nothing").Replace(string(full))
	path := filepath.Join(t.TempDir(), "next.yaml")
	if err := os.WriteFile(path, []byte(next), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AZURE_OPENAI_API_KEY", "GEMINI_API_KEY", "AWS_ACCESS_KEY_ID", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_PROFILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"} {
		t.Setenv(k, "")
	}
	const ok = `ok: 11 pools, 3 models (5 names), 12 endpoints
pool openai: key from $OPENAI_API_KEY, which is not set
pool claude: key from $ANTHROPIC_API_KEY, which is not set
pool azure: key from $AZURE_OPENAI_API_KEY, which is not set
pool bedrock: AWS credentials from the shared config's default profile if it has them, else instance metadata (IMDS), signing for us-east-1, assuming arn:aws:iam::123456789012:role/llmgw-bedrock
pool gemini: key from $GEMINI_API_KEY, which is not set
pool vertex: Google credentials from credentials_file /etc/llmgw/vertex-sa.json
pool vertex-claude: Google credentials from credentials_file /etc/llmgw/vertex-sa.json
`
	tests := []struct {
		path, inService, want string
		wantErr               bool
	}{
		{path, "testdata/full.good.yaml", ok + "needs a restart: server.listen, store.url; a reload applies the rest\n", false},
		{"testdata/full.good.yaml", "testdata/full.good.yaml", ok + "a reload applies every change since testdata/full.good.yaml\n", false},
		{"testdata/full.good.yaml", "testdata/same-listen.bad.yaml", ok + "testdata/same-listen.bad.yaml, the configuration in service: ", true},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		err := CheckAgainst(tt.path, tt.inService, &out)
		if (err != nil) != tt.wantErr || !strings.HasPrefix(out.String(), tt.want) {
			t.Errorf("CheckAgainst(%s, %s) = %v, writing %q; want %q (error: %v)", tt.path, tt.inService, err, out.String(), tt.want, tt.wantErr)
		}
	}
}

// TestCheckNamesKeyFile: a pool whose key is in a file is said to take it
// from the file, by its path alone.
func TestCheckNamesKeyFile(t *testing.T) {
	p := catalog.Pool{Name: "gemini", Kind: catalog.KindGemini, APIKeyFile: "/run/secrets/gemini"}
	if got, want := credentialChain(p, func(string) string { return "" }), "key from the file /run/secrets/gemini"; got != want {
		t.Errorf("credentialChain = %q, want %q", got, want)
	}
}
