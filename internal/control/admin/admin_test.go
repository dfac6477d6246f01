package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/keys"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/store"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
)

const token = "admin-secret-token"

var now0 = time.Date(2025, 6, 15, 12, 0, 0, 0, time.UTC)

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type fixture struct {
	srv  *httptest.Server
	st   *store.Memory
	ring *keys.Keyring
	logs *syncBuffer
}

func newFixture(t *testing.T, tok string) *fixture {
	t.Helper()
	st := store.NewMemory()
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	clock := func() time.Time { return now0 }
	ring := keys.NewKeyring(st, keys.Options{Now: clock, Logger: log})
	srv := httptest.NewServer(New(st, ring, Options{Guard: NewGuard(tok, GuardOptions{Now: clock}), Now: clock, Logger: log}))
	t.Cleanup(srv.Close)
	return &fixture{srv: srv, st: st, ring: ring, logs: logs}
}

// do sends a request with the admin token when tok is not empty and
// returns the status and body.
func (f *fixture) do(t *testing.T, method, path, tok, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, f.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// apiError is an OpenAI-style error body.
type apiError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func parseError(t *testing.T, b []byte) apiError {
	t.Helper()
	var body struct {
		Error *apiError `json:"error"`
	}
	if err := json.Unmarshal(b, &body); err != nil || body.Error == nil {
		t.Fatalf("not an OpenAI-style error body: %s", b)
	}
	return *body.Error
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func TestAuthWithToken(t *testing.T) {
	f := newFixture(t, token)
	tests := []struct {
		name, method, path, auth string
		want                     int
	}{
		{"no token", "GET", "/admin/keys", "", 401},
		{"wrong token", "GET", "/admin/keys", "Bearer nope", 401},
		{"token as prefix", "GET", "/admin/keys", "Bearer " + token + "x", 401},
		{"not bearer", "GET", "/admin/keys", "Basic " + token, 401},
		{"bare token", "GET", "/admin/keys", token, 401},
		{"no token, write", "POST", "/admin/keys", "", 401},
		{"no token, unknown url", "GET", "/admin/nothing", "", 401},
		{"right token", "GET", "/admin/keys", "Bearer " + token, 200},
		{"right token, lowercase scheme", "GET", "/admin/keys", "bearer " + token, 200},
		{"empty bearer", "GET", "/admin/keys", "Bearer ", 401},
		{"right token, usage", "GET", "/admin/usage", "Bearer " + token, 200},
		{"right token, tenants", "GET", "/admin/tenants", "Bearer " + token, 200},
		{"right token, unknown url", "GET", "/admin/nothing", "Bearer " + token, 404},
		{"right token, wrong method", "PATCH", "/admin/keys", "Bearer " + token, 405},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, f.srv.URL+tt.path, nil)
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			resp, err := f.srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.want {
				t.Fatalf("status = %d, want %d; body %s", resp.StatusCode, tt.want, b)
			}
			if got := resp.Header.Get("WWW-Authenticate"); (tt.want == 401) != (got == "Bearer") {
				t.Errorf("WWW-Authenticate = %q on a %d, want Bearer on a 401 alone", got, tt.want)
			}
			if tt.want >= 400 {
				e := parseError(t, b)
				if tt.want == 401 && (e.Type != "invalid_request_error" || str(e.Code) != "invalid_api_key") {
					t.Errorf("401 body = %+v, want invalid_request_error/invalid_api_key", e)
				}
				if strings.Contains(string(b), token) {
					t.Errorf("error body repeats the token: %s", b)
				}
			}
		})
	}
}

// TestNoTokenRefusesEverything: with no admin token configured, every
// route, read or write, known or not, with a bearer token or without, is
// refused with a 403 saying how to set one, and shows nothing the store
// holds.
func TestNoTokenRefusesEverything(t *testing.T) {
	f := newFixture(t, "")
	ctx := context.Background()
	_, k, err := keys.Create(ctx, f.st, keys.Spec{Tenant: "secretorg/team", Name: "listed"}, now0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.st.SetTenantLimits(ctx, tenant.TenantLimits{Path: "secretorg", Limits: tenant.Limits{RPM: 7}}); err != nil {
		t.Fatal(err)
	}
	if err := f.st.AddUsage(ctx, []usage.Record{{ID: "r1", Time: now0.Add(-time.Hour), KeyID: k.ID, Tenant: "secretorg/team", Model: "m", PromptTokens: 987654, Status: 200}}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/admin/keys", ""},
		{"GET", "/admin/tenants", ""},
		{"GET", "/admin/usage", ""},
		{"GET", "/admin/usage?by=tenant", ""},
		{"HEAD", "/admin/keys", ""},
		{"GET", "/admin/nothing", ""},
		{"POST", "/admin/keys", `{"tenant":"acme"}`},
		{"DELETE", "/admin/keys/" + k.ID, ""},
		{"POST", "/admin/keys/" + k.ID + "/revoke", ""},
		{"PUT", "/admin/tenants/acme", `{"rpm":1}`},
	} {
		for _, tok := range []string{"", "anything"} {
			status, b := f.do(t, r.method, r.path, tok, r.body)
			if status != http.StatusForbidden {
				t.Errorf("%s %s without a configured token (bearer %q): status %d, want 403; %s", r.method, r.path, tok, status, b)
				continue
			}
			if r.method == "HEAD" {
				continue
			}
			e := parseError(t, b)
			if !strings.Contains(e.Message, "set LLMGW_ADMIN_TOKEN or admin.token in the config") || e.Type != "permission_error" {
				t.Errorf("%s %s refusal = %+v, want a permission_error saying how to set a token", r.method, r.path, e)
			}
			for _, leak := range []string{k.ID, "secretorg", "987654"} {
				if strings.Contains(string(b), leak) {
					t.Errorf("%s %s refusal holds %q: %s", r.method, r.path, leak, b)
				}
			}
		}
	}
	ks, _ := f.st.Keys(ctx)
	if len(ks) != 1 || !ks[0].Revoked.IsZero() {
		t.Errorf("refused writes changed the keys: %+v", ks)
	}
}

// listedKey is a key as listed, with its JSON kept to look for secrets.
type listedKey struct {
	ID       string        `json:"id"`
	Name     string        `json:"name"`
	Tenant   string        `json:"tenant"`
	Models   []string      `json:"models"`
	Limits   tenant.Limits `json:"limits"`
	Priority string        `json:"priority"`
	Created  time.Time     `json:"created"`
	Expires  time.Time     `json:"expires"`
	Revoked  time.Time     `json:"revoked"`
	Status   string        `json:"status"`
}

func TestKeyLifecycle(t *testing.T) {
	f := newFixture(t, token)
	ctx := context.Background()

	status, b := f.do(t, "POST", "/admin/keys", token, `{"tenant":"acme/search","name":"ci","models":["llama-*"],"rpm":60,"budget_usd":10,"period":"day","priority":"critical","expires_in":"30d"}`)
	if status != http.StatusCreated {
		t.Fatalf("create: status %d, want 201; %s", status, b)
	}
	var created struct {
		Key string `json:"key"`
		listedKey
	}
	if err := json.Unmarshal(b, &created); err != nil {
		t.Fatal(err)
	}
	want := listedKey{
		ID: created.ID, Name: "ci", Tenant: "acme/search", Models: []string{"llama-*"},
		Limits:   tenant.Limits{RPM: 60, BudgetUSD: 10, Period: "day"},
		Priority: "critical", Created: now0, Expires: now0.Add(30 * 24 * time.Hour), Status: "active",
	}
	if diff := cmp.Diff(want, created.listedKey); diff != "" {
		t.Errorf("create answer (-want +got):\n%s", diff)
	}
	k, err := f.ring.Authenticate(ctx, created.Key)
	if err != nil {
		t.Fatalf("the created key does not authenticate: %v", err)
	}
	if k.ID != created.ID {
		t.Fatalf("authenticated as %s, want %s", k.ID, created.ID)
	}
	if strings.Contains(string(b), k.Hash) {
		t.Errorf("create answer holds the key's hash")
	}

	status, b = f.do(t, "GET", "/admin/keys", token, "")
	if status != http.StatusOK {
		t.Fatalf("list: status %d; %s", status, b)
	}
	var listed struct {
		Object string      `json:"object"`
		Data   []listedKey `json:"data"`
	}
	if err := json.Unmarshal(b, &listed); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]listedKey{want}, listed.Data); diff != "" || listed.Object != "list" {
		t.Errorf("list (-want +got):\n%s (object %q)", diff, listed.Object)
	}
	if strings.Contains(string(b), `"key"`) || strings.Contains(string(b), k.Hash) {
		t.Errorf("list shows a key's secret or hash: %s", b)
	}

	status, b = f.do(t, "DELETE", "/admin/keys/"+created.ID, token, "")
	if status != http.StatusOK {
		t.Fatalf("revoke: status %d; %s", status, b)
	}
	var revoked listedKey
	json.Unmarshal(b, &revoked)
	if revoked.Status != "revoked" || !revoked.Revoked.Equal(now0) {
		t.Errorf("revoke answer: status %q revoked %v, want revoked at %v", revoked.Status, revoked.Revoked, now0)
	}
	// This replica refuses the key at once, without waiting for MaxAge.
	if _, err := f.ring.Authenticate(ctx, created.Key); !errors.Is(err, keys.ErrRevoked) {
		t.Errorf("Authenticate after revoke: %v, want ErrRevoked", err)
	}
	// Revoking again is harmless and keeps the first time.
	status, b = f.do(t, "POST", "/admin/keys/"+created.ID+"/revoke", token, "")
	json.Unmarshal(b, &revoked)
	if status != http.StatusOK || !revoked.Revoked.Equal(now0) {
		t.Errorf("second revoke: status %d revoked %v; %s", status, revoked.Revoked, b)
	}

	for _, id := range []string{"key_abcdefghijkl", "nope", created.Key} {
		status, b = f.do(t, "DELETE", "/admin/keys/"+id, token, "")
		e := parseError(t, b)
		if status != http.StatusNotFound || str(e.Code) != "key_not_found" || str(e.Param) != "id" {
			t.Errorf("revoke of an unknown id: status %d %+v, want 404 key_not_found", status, e)
		}
	}
}

func TestCreateValidation(t *testing.T) {
	f := newFixture(t, token)
	tests := []struct {
		name, body string
		status     int
		param      string
	}{
		{"empty body", ``, 400, ""},
		{"not json", `{tenant:`, 400, ""},
		{"two objects", `{"tenant":"acme"}{}`, 400, ""},
		{"unknown field", `{"tenant":"acme","secret":"x"}`, 400, "secret"},
		{"wrong type", `{"tenant":"acme","rpm":"many"}`, 400, "rpm"},
		{"models not array", `{"tenant":"acme","models":"llama"}`, 400, "models"},
		{"no tenant", `{}`, 400, "tenant"},
		{"deep tenant", `{"tenant":"a/b/c/d"}`, 400, "tenant"},
		{"bad priority", `{"tenant":"acme","priority":"vip"}`, 400, "priority"},
		{"bad period", `{"tenant":"acme","period":"year"}`, 400, "period"},
		{"glob with a control character", `{"tenant":"acme","models":["x\u0007"]}`, 400, "models[0]"},
		{"negative rpm", `{"tenant":"acme","rpm":-1}`, 400, "rpm"},
		{"negative budget", `{"tenant":"acme","budget_usd":-2.5}`, 400, "budget_usd"},
		{"bad expiry", `{"tenant":"acme","expires_in":"forever"}`, 400, "expires_in"},
		{"too large", `{"tenant":"acme","name":"` + strings.Repeat("x", maxBodyBytes) + `"}`, 413, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, b := f.do(t, "POST", "/admin/keys", token, tt.body)
			if status != tt.status {
				t.Fatalf("status = %d, want %d; %s", status, tt.status, b)
			}
			e := parseError(t, b)
			if e.Type != "invalid_request_error" || str(e.Param) != tt.param {
				t.Errorf("error = type %q param %q (%s), want invalid_request_error param %q", e.Type, str(e.Param), e.Message, tt.param)
			}
		})
	}
	if ks, _ := f.st.Keys(context.Background()); len(ks) != 0 {
		t.Errorf("refused creates stored %d keys", len(ks))
	}
}

func TestTenants(t *testing.T) {
	f := newFixture(t, token)
	status, b := f.do(t, "PUT", "/admin/tenants/acme/search", token, `{"rpm":5,"budget_tokens":1000,"period":"day"}`)
	if status != http.StatusOK {
		t.Fatalf("put: status %d; %s", status, b)
	}
	f.do(t, "PUT", "/admin/tenants/acme", token, `{"tpm":100}`)
	want := []tenant.TenantLimits{
		{Path: "acme", Limits: tenant.Limits{TPM: 100}},
		{Path: "acme/search", Limits: tenant.Limits{RPM: 5, BudgetTokens: 1000, Period: "day"}},
	}
	var listed struct {
		Data []tenant.TenantLimits `json:"data"`
	}
	_, b = f.do(t, "GET", "/admin/tenants", token, "")
	if err := json.Unmarshal(b, &listed); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, listed.Data); diff != "" {
		t.Errorf("tenants (-want +got):\n%s", diff)
	}
	// This replica's keyring has them at once.
	if diff := cmp.Diff(want, f.ring.TenantLimits("acme/search/alice")); diff != "" {
		t.Errorf("keyring tenant limits (-want +got):\n%s", diff)
	}

	// Zero limits remove a level.
	f.do(t, "PUT", "/admin/tenants/acme", token, `{}`)
	_, b = f.do(t, "GET", "/admin/tenants", token, "")
	listed.Data = nil
	json.Unmarshal(b, &listed)
	if diff := cmp.Diff(want[1:], listed.Data); diff != "" {
		t.Errorf("tenants after removal (-want +got):\n%s", diff)
	}

	bad := []struct {
		name, path, body, param string
	}{
		{"too deep", "/admin/tenants/a/b/c/d", `{"rpm":1}`, "path"},
		{"empty path", "/admin/tenants/", `{"rpm":1}`, "path"},
		{"bad char", "/admin/tenants/ac%20me", `{"rpm":1}`, "path"},
		{"negative", "/admin/tenants/acme", `{"tpm":-1}`, "tpm"},
		{"bad period", "/admin/tenants/acme", `{"period":"week"}`, "period"},
		{"unknown field", "/admin/tenants/acme", `{"rpn":1}`, "rpn"},
	}
	for _, tt := range bad {
		status, b := f.do(t, "PUT", tt.path, token, tt.body)
		e := parseError(t, b)
		if status != 400 || str(e.Param) != tt.param {
			t.Errorf("%s: status %d param %q (%s), want 400 param %q", tt.name, status, str(e.Param), e.Message, tt.param)
		}
	}
}

func TestUsage(t *testing.T) {
	f := newFixture(t, token)
	recs := []usage.Record{
		{ID: "1", Time: now0.Add(-time.Hour), KeyID: "key_aaaaaaaaaaaa", Tenant: "acme/search", Model: "llama", PromptTokens: 10, CompletionTokens: 5, CostUSD: 0.5, Status: 200},
		{ID: "2", Time: now0.Add(-2 * time.Hour), KeyID: "key_aaaaaaaaaaaa", Tenant: "acme/search", Model: "qwen", PromptTokens: 20, CompletionTokens: 1, Status: 500},
		{ID: "3", Time: now0.Add(-time.Hour), KeyID: "key_bbbbbbbbbbbb", Tenant: "globex", Model: "llama", PromptTokens: 7, Status: 200},
		{ID: "4", Time: now0.Add(-72 * time.Hour), KeyID: "key_aaaaaaaaaaaa", Tenant: "acme/search", Model: "llama", PromptTokens: 1000, Status: 200},
	}
	if err := f.st.AddUsage(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		query string
		want  []usage.Row
	}{
		{"?tenant=acme&since=24h&by=model", []usage.Row{
			{Group: "llama", Requests: 1, PromptTokens: 10, CompletionTokens: 5, CostUSD: 0.5},
			{Group: "qwen", Requests: 1, Errors: 1, PromptTokens: 20, CompletionTokens: 1},
		}},
		{"?since=1d&by=tenant", []usage.Row{
			{Group: "acme/search", Requests: 2, Errors: 1, PromptTokens: 30, CompletionTokens: 6, CostUSD: 0.5},
			{Group: "globex", Requests: 1, PromptTokens: 7},
		}},
		{"?by=key&key=key_aaaaaaaaaaaa", []usage.Row{
			{Group: "key_aaaaaaaaaaaa", Requests: 3, Errors: 1, PromptTokens: 1030, CompletionTokens: 6, CostUSD: 0.5},
		}},
		{"?since=" + now0.Add(-90*time.Minute).Format(time.RFC3339), []usage.Row{
			{Requests: 2, PromptTokens: 17, CompletionTokens: 5, CostUSD: 0.5},
		}},
	}
	for _, tt := range tests {
		status, b := f.do(t, "GET", "/admin/usage"+tt.query, token, "")
		if status != http.StatusOK {
			t.Fatalf("GET %s: status %d; %s", tt.query, status, b)
		}
		var got struct {
			Object string      `json:"object"`
			Data   []usage.Row `json:"data"`
		}
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, got.Data); diff != "" || got.Object != "list" {
			t.Errorf("GET /admin/usage%s (-want +got):\n%s", tt.query, diff)
		}
	}

	bad := []struct{ query, param string }{
		{"?by=day", "by"},
		{"?since=yesterday", "since"},
		{"?since=-1h", "since"},
		{"?tenant=a/b/c/d", "tenant"},
		{"?key=sk-llmgw-whatever", "key"},
	}
	for _, tt := range bad {
		status, b := f.do(t, "GET", "/admin/usage"+tt.query, token, "")
		e := parseError(t, b)
		if status != 400 || str(e.Param) != tt.param {
			t.Errorf("GET /admin/usage%s: status %d param %q, want 400 param %q", tt.query, status, str(e.Param), tt.param)
		}
		if strings.Contains(e.Message, "whatever") {
			t.Errorf("error repeats the value given: %s", e.Message)
		}
	}
}

// TestPlaintextShownOnce checks that a key's plaintext appears in its
// create answer and nowhere else: not in listings, logs, or error bodies of
// requests that carry it in the wrong place.
func TestPlaintextShownOnce(t *testing.T) {
	f := newFixture(t, token)
	status, b := f.do(t, "POST", "/admin/keys", token, `{"tenant":"acme","name":"leak-check"}`)
	if status != http.StatusCreated {
		t.Fatalf("create: %d %s", status, b)
	}
	var created struct {
		Key string `json:"key"`
		ID  string `json:"id"`
	}
	json.Unmarshal(b, &created)
	plain := created.Key
	if _, _, ok := keys.Parse(plain); !ok {
		t.Fatalf("create answer has no valid key: %s", b)
	}
	secret := plain[strings.LastIndex(plain, "-")+1:]

	var seen []string // bodies and logs, labelled without the request's path
	record := func(what string, b []byte) { seen = append(seen, what+": "+string(b)) }
	for i, r := range []struct{ method, path, body string }{
		{"GET", "/admin/keys", ""},
		{"DELETE", "/admin/keys/" + plain, ""},
		{"POST", "/admin/keys/" + plain + "/revoke", ""},
		{"GET", "/admin/" + plain, ""},
		{"GET", "/admin/usage?key=" + plain, ""},
		{"GET", "/admin/usage?tenant=" + plain + "/x/y/z", ""},
		{"PUT", "/admin/tenants/" + plain + "/x/y/z", `{"rpm":1}`},
		{"POST", "/admin/keys", `{"tenant":"acme","name":"` + plain + `","rpm":-1}`},
		{"POST", "/admin/keys", `{"tenant":"` + plain + `/x/y/z"}`},
		{"POST", "/admin/keys", `{"tenant":"acme","expires_in":"` + plain + `"}`},
		{"POST", "/admin/keys", `{"tenant":"acme","models":["` + plain + `"]}`},
		{"POST", "/admin/keys", `{"tenant":"acme","models":["` + plain + `*"]}`},
		{"DELETE", "/admin/keys/" + created.ID, ""},
		{"GET", "/admin/keys", ""},
	} {
		_, b := f.do(t, r.method, r.path, token, r.body)
		record(fmt.Sprintf("request %d (%s)", i, r.method), b)
	}
	record("logs", []byte(f.logs.String()))
	if !strings.Contains(f.logs.String(), created.ID) {
		t.Errorf("the audit log does not name the created key %s:\n%s", created.ID, f.logs.String())
	}
	for _, s := range seen {
		if strings.Contains(s, secret) {
			t.Errorf("the key's secret appears outside its create answer:\n%s", s)
		}
	}
}
