package app

// The admin listener's deadlines over real sockets, as the API listener's
// are held to theirs: a body trickled in is cut at server.body_timeout
// (at most maxAdminBodyTimeout), on the console's sign-in, the admin API
// and every other path.

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

func TestAdminListenerCutsSlowBodies(t *testing.T) {
	t.Setenv(envAdminToken, "")
	cfg := upstreamConfig("chat", catalog.KindOpenAI, []string{"http://127.0.0.1:1/v1"})
	cfg.Router.Auth = "keys"
	cfg.Admin.Token = adminTestToken
	cfg.Server.BodyTimeout = 300 * time.Millisecond
	g := startConfigured(t, cfg)
	if g.admin.ReadHeaderTimeout != apiReadHeaderTimeout || g.admin.IdleTimeout != apiIdleTimeout {
		t.Errorf("the admin listener's header and idle deadlines: %v, %v; want the API's", g.admin.ReadHeaderTimeout, g.admin.IdleTimeout)
	}
	for _, tt := range []struct {
		name, request string
		want          int
		says          string
	}{
		{"sign-in", "POST /ui/login HTTP/1.1\r\nOrigin: " + g.AdminURL() + "\r\nContent-Type: application/x-www-form-urlencoded\r\n",
			http.StatusRequestTimeout, "did not arrive in time"},
		{"admin API", "POST /admin/keys HTTP/1.1\r\nAuthorization: Bearer " + adminTestToken + "\r\nContent-Type: application/json\r\n",
			http.StatusRequestTimeout, "did not arrive in time"},
		{"a path that reads no body", "POST /nothing HTTP/1.1\r\nAuthorization: Bearer " + adminTestToken + "\r\n",
			http.StatusNotFound, "Unknown admin listener URL"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := trickledBody(t, g.adminLn.Addr().String(), tt.request+"Host: "+g.adminLn.Addr().String()+"\r\n")
			if resp.StatusCode != tt.want || !strings.Contains(string(b), tt.says) || !resp.Close {
				t.Errorf("%d %.200s, close %v; want %d saying %q, and the connection closed", resp.StatusCode, b, resp.Close, tt.want, tt.says)
			}
		})
	}
}
