package admin

// The key routes: create (the only answer that ever holds a plaintext key),
// list, and revoke.

import (
	"context"
	"errors"
	"net/http"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/access"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/audit"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/keys"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/store"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// keyInfo is a key as the admin API shows it: never its hash.
type keyInfo struct {
	tenant.Key
	Status string `json:"status"`
}

// createdKey is the answer to a create: the key's plaintext, shown this
// once, beside what is listed.
type createdKey struct {
	Plaintext string `json:"key"`
	keyInfo
}

// createKey makes a key: an admin's anywhere, a tenant admin's inside its
// subtree. Whoever may change no key is refused before the body is read.
func (a *api) createKey(w http.ResponseWriter, r *http.Request) {
	id := access.FromContext(r.Context())
	if !id.Writes() {
		forbidden(w)
		return
	}
	var spec keys.Spec
	if e := decode(w, r, &spec); e != nil {
		openai.WriteError(w, e)
		return
	}
	if p, err := tenant.ParsePath(spec.Tenant); err == nil && !id.CanWrite(p) {
		forbidden(w)
		return
	}
	now := a.now()
	plain, k, err := keys.Create(r.Context(), a.st, spec, now)
	if err != nil {
		if e, ok := fieldError(err); ok {
			openai.WriteError(w, e)
			return
		}
		a.internal(w, "creating a key", err)
		return
	}
	a.log.Info("admin: key created", "key_id", k.ID, "tenant", k.Tenant, "actor", id.Actor())
	Note(r.Context(), a.st, a.log, r, id, audit.Entry{Action: audit.KeyCreate, Target: k.ID, Tenant: k.Tenant, Detail: k.Name}, now)
	writeJSON(w, http.StatusCreated, createdKey{Plaintext: plain, keyInfo: keyInfo{Key: k, Status: keys.Status(&k, now)}})
}

func (a *api) listKeys(w http.ResponseWriter, r *http.Request) {
	ks, err := a.st.Keys(r.Context())
	if err != nil {
		a.internal(w, "listing keys", err)
		return
	}
	ks = VisibleKeys(ks, access.FromContext(r.Context()))
	now := a.now()
	out := make([]keyInfo, len(ks))
	for i := range ks {
		out[i] = keyInfo{Key: ks[i], Status: keys.Status(&ks[i], now)}
	}
	writeJSON(w, http.StatusOK, newList(out))
}

// keyNotFound is the 404 for a key ID. It does not repeat the ID: what was
// sent might be a plaintext key pasted in the wrong place.
var keyNotFound = &openai.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "key_not_found", Param: "id", Message: "No key has that id."}

// revokeKey revokes a key and answers with it. Revoking a revoked key
// changes nothing and answers the same.
func (a *api) revokeKey(w http.ResponseWriter, r *http.Request) {
	id := access.FromContext(r.Context())
	if !id.Writes() {
		forbidden(w)
		return
	}
	now := a.now()
	k, err := Revoke(r.Context(), a.st, a.ring, id, r.PathValue("id"), now)
	switch {
	case errors.Is(err, store.ErrNotFound):
		openai.WriteError(w, keyNotFound)
		return
	case errors.Is(err, ErrForbidden):
		forbidden(w)
		return
	case err != nil:
		a.internal(w, "revoking a key", err)
		return
	}
	a.log.Info("admin: key revoked", "key_id", k.ID, "tenant", k.Tenant, "actor", id.Actor())
	Note(r.Context(), a.st, a.log, r, id, audit.Entry{Action: audit.KeyRevoke, Target: k.ID, Tenant: k.Tenant}, now)
	writeJSON(w, http.StatusOK, keyInfo{Key: k, Status: keys.Status(&k, now)})
}

// Revoke revokes the key with id at now for who and returns it, as the
// admin API and the console do: an id that is not a key id, no key's, or
// a key outside what who may read, is store.ErrNotFound; a key who may
// read but not change is ErrForbidden; a key already revoked stays as it
// was. ring, when not nil, forgets the key so this replica refuses it at
// once.
func Revoke(ctx context.Context, st store.Store, ring *keys.Keyring, who access.Identity, id string, now time.Time) (tenant.Key, error) {
	if !keys.ValidID(id) {
		return tenant.Key{}, store.ErrNotFound
	}
	k, err := st.Key(ctx, id)
	if err != nil {
		return tenant.Key{}, err
	}
	switch {
	case !who.CanRead(k.Tenant):
		return tenant.Key{}, store.ErrNotFound
	case !who.CanWrite(k.Tenant):
		return tenant.Key{}, ErrForbidden
	}
	if k.Revoked.IsZero() {
		at := now.UTC()
		if err := st.RevokeKey(ctx, id, at); err != nil {
			return tenant.Key{}, err
		}
		k.Revoked = at
	}
	if ring != nil {
		ring.Forget(id)
	}
	return k, nil
}
