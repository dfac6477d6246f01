package app

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/keys"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/store"
)

// runKeys runs `llmgw keys args...` and returns its stdout and stderr.
func runKeys(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := KeysCommand(context.Background(), args, &stdout, &stderr)
	return stdout.String(), stderr.String(), err
}

func TestKeysCommandEndToEnd(t *testing.T) {
	ctx := context.Background()
	storeURL := "sqlite:" + filepath.Join(t.TempDir(), "llmgw.db")

	out, errOut, err := runKeys(t, "create", "--store", storeURL, "--tenant", "acme/search/alice",
		"--name", "alice laptop", "--models", "llama-*, qwen3-8b", "--rpm", "60", "--tpm", "100000",
		"--budget-tokens", "5000000", "--budget-usd", "25", "--period", "day", "--priority", "critical", "--expires", "90d")
	if err != nil {
		t.Fatalf("keys create: %v\n%s", err, errOut)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 1 || !strings.HasSuffix(out, "\n") {
		t.Fatalf("keys create stdout = %q, want exactly one line", out)
	}
	plain := lines[0]
	id, _, ok := keys.Parse(plain)
	if !ok {
		t.Fatalf("keys create printed %q, not a key", plain)
	}
	if !strings.Contains(errOut, id) || strings.Contains(errOut, plain) {
		t.Errorf("keys create stderr should name the id and not the key: %q", errOut)
	}

	// A second key, to see both listed and only one revoked.
	out2, _, err := runKeys(t, "create", "--store", storeURL, "--tenant", "globex")
	if err != nil {
		t.Fatal(err)
	}
	plain2 := strings.TrimSpace(out2)

	st, err := store.Open(ctx, storeURL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ring := keys.NewKeyring(st, keys.Options{})
	k, err := ring.Authenticate(ctx, plain)
	if err != nil {
		t.Fatalf("the created key does not authenticate: %v", err)
	}
	if k.Tenant != "acme/search/alice" || k.Limits.RPM != 60 || k.Priority != "critical" || len(k.Models) != 2 || k.Models[1] != "qwen3-8b" || k.Expires.IsZero() {
		t.Errorf("created key = %+v, not what was asked for", k)
	}

	out, _, err = runKeys(t, "list", "--store", storeURL)
	if err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(strings.TrimSpace(out), "\n")
	if len(rows) != 3 {
		t.Fatalf("keys list printed %d lines, want a header and 2 keys:\n%s", len(rows), out)
	}
	for _, want := range []string{id, "alice laptop", "acme/search/alice", "llama-*,qwen3-8b", "100000", "5000000 tok/day, $25.00/day", "critical", "active"} {
		if !strings.Contains(rows[1], want) {
			t.Errorf("keys list row %q lacks %q", rows[1], want)
		}
	}
	// Columns line up: every row has STATUS where the header does.
	col := strings.Index(rows[0], "STATUS")
	for _, r := range rows[1:] {
		if len(r) < col || !strings.HasPrefix(r[col:], "active") {
			t.Errorf("row %q has no status under the header's STATUS column", r)
		}
	}
	for _, secret := range []string{plain, plain2, plain[strings.LastIndex(plain, "-")+1:], k.Hash} {
		if strings.Contains(out, secret) {
			t.Errorf("keys list shows a secret or hash:\n%s", out)
		}
	}

	// Flags after the id work too.
	if _, errOut, err := runKeys(t, "revoke", id, "--store", storeURL); err != nil {
		t.Fatalf("keys revoke: %v\n%s", err, errOut)
	}
	ring.Forget(id) // the command ran in another "process"; skip waiting MaxAge
	if _, err := ring.Authenticate(ctx, plain); !errors.Is(err, keys.ErrRevoked) {
		t.Errorf("Authenticate after keys revoke: %v, want ErrRevoked", err)
	}
	if _, err := ring.Authenticate(ctx, plain2); err != nil {
		t.Errorf("the other key stopped working: %v", err)
	}
	out, _, _ = runKeys(t, "list", "--store", storeURL)
	if !strings.Contains(out, "revoked") {
		t.Errorf("keys list after revoke shows no revoked key:\n%s", out)
	}
	if _, errOut, err := runKeys(t, "revoke", "--store", storeURL, id); err != nil || !strings.Contains(errOut, "already revoked") {
		t.Errorf("second revoke: %v, stderr %q; want success saying it was already revoked", err, errOut)
	}
}

func TestKeysCommandErrors(t *testing.T) {
	dir := t.TempDir()
	storeURL := "sqlite:" + filepath.Join(dir, "llmgw.db")
	plain, _, _, _ := keys.Generate()
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"no subcommand", nil, "subcommand"},
		{"unknown subcommand", []string{"rotate"}, "unknown subcommand"},
		{"no tenant", []string{"create", "--store", storeURL}, "--tenant"},
		{"bad priority", []string{"create", "--store", storeURL, "--tenant", "acme", "--priority", "vip"}, "--priority"},
		{"bad budget", []string{"create", "--store", storeURL, "--tenant", "acme", "--budget-tokens", "-1"}, "--budget-tokens"},
		{"glob holding a key", []string{"create", "--store", storeURL, "--tenant", "acme", "--models", "ok,sk-llmgw-aaaaaaaaaaaa-bbbb"}, "--models"},
		{"bad expiry", []string{"create", "--store", storeURL, "--tenant", "acme", "--expires", "later"}, "--expires"},
		{"not a number", []string{"create", "--store", storeURL, "--tenant", "acme", "--rpm", "lots"}, "invalid value"},
		{"stray argument", []string{"create", "--store", storeURL, "--tenant", "acme", "extra"}, `unexpected argument "extra"`},
		{"revoke without id", []string{"revoke", "--store", storeURL}, "one key id"},
		{"revoke a plaintext key", []string{"revoke", "--store", storeURL, plain}, "not a key id"},
		{"revoke unknown", []string{"revoke", "--store", storeURL, "key_abcdefghijkl"}, "no key key_abcdefghijkl"},
		{"list with argument", []string{"list", "--store", storeURL, "x"}, `unexpected argument "x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, err := runKeys(t, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error = %v, want one mentioning %q", err, tt.wantErr)
			}
			if out != "" {
				t.Errorf("stdout = %q on failure, want nothing", out)
			}
			if strings.Contains(err.Error()+errOut, plain) {
				t.Errorf("a plaintext key was repeated: %v %s", err, errOut)
			}
		})
	}
}
