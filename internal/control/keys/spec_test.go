package keys

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
)

func TestSpecValidate(t *testing.T) {
	tests := []struct {
		name      string
		spec      Spec
		wantField string // empty: valid
	}{
		{"minimal", Spec{Tenant: "acme"}, ""},
		{"full", Spec{Tenant: "acme/search/alice", Name: "alice's laptop", Models: []string{"llama-*", "qwen3-8b"}, RPM: 60, TPM: 1e5, BudgetTokens: 1e7, BudgetUSD: 12.5, Period: "day", Priority: "critical", ExpiresIn: "90d"}, ""},
		{"go duration", Spec{Tenant: "acme", ExpiresIn: "36h"}, ""},
		{"no tenant", Spec{}, "tenant"},
		{"tenant too deep", Spec{Tenant: "a/b/c/d"}, "tenant"},
		{"tenant bad char", Spec{Tenant: "acme corp"}, "tenant"},
		{"tenant empty level", Spec{Tenant: "acme//x"}, "tenant"},
		{"name too long", Spec{Tenant: "acme", Name: string(make([]byte, 129))}, "name"},
		{"name control char", Spec{Tenant: "acme", Name: "a\nb"}, "name"},
		{"empty glob", Spec{Tenant: "acme", Models: []string{"ok", ""}}, "models[1]"},
		{"glob with a control character", Spec{Tenant: "acme", Models: []string{"llama-\n"}}, "models[0]"},
		{"glob holding a key", Spec{Tenant: "acme", Models: []string{"sk-llmgw-aaaaaaaaaaaa-bbbb*"}}, "models[0]"},
		{"glob too long", Spec{Tenant: "acme", Models: []string{strings.Repeat("a", maxGlobLen+1)}}, "models[0]"},
		{"negative rpm", Spec{Tenant: "acme", RPM: -1}, "rpm"},
		{"negative tpm", Spec{Tenant: "acme", TPM: -1}, "tpm"},
		{"negative budget tokens", Spec{Tenant: "acme", BudgetTokens: -5}, "budget_tokens"},
		{"negative budget usd", Spec{Tenant: "acme", BudgetUSD: -0.01}, "budget_usd"},
		{"nan budget usd", Spec{Tenant: "acme", BudgetUSD: math.NaN()}, "budget_usd"},
		{"inf budget usd", Spec{Tenant: "acme", BudgetUSD: math.Inf(1)}, "budget_usd"},
		{"bad period", Spec{Tenant: "acme", Period: "week"}, "period"},
		{"bad priority", Spec{Tenant: "acme", Priority: "urgent"}, "priority"},
		{"bad expiry", Spec{Tenant: "acme", ExpiresIn: "soon"}, "expires_in"},
		{"negative expiry", Spec{Tenant: "acme", ExpiresIn: "-1h"}, "expires_in"},
		{"zero expiry", Spec{Tenant: "acme", ExpiresIn: "0d"}, "expires_in"},
		{"huge days", Spec{Tenant: "acme", ExpiresIn: "99999999999d"}, "expires_in"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.spec.Validate()
			gotField := ""
			if err != nil {
				fe, ok := AsFieldError(err)
				if !ok {
					t.Fatalf("Validate() error %v is not a *FieldError", err)
				}
				gotField = fe.Field
			}
			if gotField != tt.wantField {
				t.Errorf("Validate() field at fault = %q (err %v), want %q", gotField, err, tt.wantField)
			}
		})
	}
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{"90d", 90 * 24 * time.Hour, false},
		{"0d", 0, false},
		{"36h", 36 * time.Hour, false},
		{"1h30m", 90 * time.Minute, false},
		{"d", 0, true},
		{"1.5d", 0, true},
		{"-1d", 0, true},
		{"x", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseDuration(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

// keyList is a KeyCreator that keeps what it is given.
type keyList struct {
	keys []tenant.Key
	err  error
}

func (l *keyList) CreateKey(_ context.Context, k tenant.Key) error {
	if l.err != nil {
		return l.err
	}
	l.keys = append(l.keys, k)
	return nil
}

func TestCreate(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.FixedZone("x", 3600))
	var st keyList
	spec := Spec{Tenant: "acme/search", Name: "ci", Models: []string{"llama-*"}, RPM: 10, BudgetUSD: 5, Period: "day", ExpiresIn: "30d"}
	plain, k, err := Create(context.Background(), &st, spec, now)
	if err != nil {
		t.Fatal(err)
	}
	id, hash, ok := Parse(plain)
	if !ok || id != k.ID || hash != k.Hash {
		t.Fatalf("Create returned a plaintext that does not match its key")
	}
	want := tenant.Key{
		ID: k.ID, Hash: k.Hash, Name: "ci", Tenant: "acme/search", Models: []string{"llama-*"},
		Limits:   tenant.Limits{RPM: 10, BudgetUSD: 5, Period: "day"},
		Priority: tenant.PriorityStandard,
		Created:  now.UTC(),
		Expires:  now.UTC().Add(30 * 24 * time.Hour),
	}
	if diff := cmp.Diff(want, k); diff != "" {
		t.Errorf("Create key (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]tenant.Key{want}, st.keys); diff != "" {
		t.Errorf("stored keys (-want +got):\n%s", diff)
	}

	if _, _, err := Create(context.Background(), &st, Spec{Tenant: "acme", RPM: -1}, now); err == nil {
		t.Errorf("Create with a bad spec succeeded")
	} else if fe, ok := AsFieldError(err); !ok || fe.Field != "rpm" {
		t.Errorf("Create with a bad spec: %v, want a FieldError for rpm", err)
	}
	if len(st.keys) != 1 {
		t.Errorf("a refused spec was stored")
	}

	boom := errors.New("disk full")
	st.err = boom
	if _, _, err := Create(context.Background(), &st, spec, now); !errors.Is(err, boom) {
		t.Errorf("Create with a failing store: %v, want it to wrap %v", err, boom)
	}
}
