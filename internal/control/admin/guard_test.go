package admin

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

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
