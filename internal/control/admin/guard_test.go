package admin

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/access"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/store"
)

// TestGuardConfiguredToken: white space around the configured token is not
// part of it, as around the token sent, and white space alone is no token.
func TestGuardConfiguredToken(t *testing.T) {
	tests := []struct {
		name, configured, sent string
		want                   int
	}{
		{"read from a file", token + "\n", "Bearer " + token, 200},
		{"padded both ways", "  " + token + "\t", "Bearer  " + token + " ", 200},
		{"padded, wrong token sent", token + "\n", "Bearer " + token + "x", 401},
		{"white space alone", " \n", "Bearer  ", 403},
		{"empty", "", "Bearer ", 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(New(store.NewMemory(), nil, Options{Guard: NewGuard(tt.configured, GuardOptions{})}))
			defer srv.Close()
			req, _ := http.NewRequest("GET", srv.URL+"/admin/keys", nil)
			req.Header.Set("Authorization", tt.sent)
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d, want %d; %s", resp.StatusCode, tt.want, b)
			}
		})
	}
}

// refusingVerifier takes no access token.
type refusingVerifier struct{}

func (refusingVerifier) Verify(context.Context, string) (access.Identity, error) {
	return access.Identity{}, errors.New("not a token of the provider's")
}

// TestGuardRefusalNamesWhatItTakes: a refused request is told what would
// open the path — the admin token, and the provider's access tokens only
// where a provider is configured.
func TestGuardRefusalNamesWhatItTakes(t *testing.T) {
	for _, tt := range []struct {
		name     string
		verifier TokenVerifier
		want     string
	}{
		{"admin token alone", nil, wrongTokenMessage},
		{"with a provider", refusingVerifier{}, wrongCredentialMessage},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewGuard(token, GuardOptions{Verifier: tt.verifier})
			srv := httptest.NewServer(New(store.NewMemory(), nil, Options{Guard: g}))
			defer srv.Close()
			req, _ := http.NewRequest("GET", srv.URL+"/admin/keys", nil)
			req.Header.Set("Authorization", "Bearer not-it")
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var body struct {
				Error struct{ Message string } `json:"error"`
			}
			err = json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusUnauthorized || body.Error.Message != tt.want {
				t.Errorf("status %d, message %q (%v); want 401 saying %q", resp.StatusCode, body.Error.Message, err, tt.want)
			}
		})
	}
}
