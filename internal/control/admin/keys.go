package admin

// The key routes: create (the only answer that ever holds a plaintext key),
// list, and revoke.

import (
	"errors"
	"net/http"

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

func (a *api) createKey(w http.ResponseWriter, r *http.Request) {
	var spec keys.Spec
	if e := decode(w, r, &spec); e != nil {
		openai.WriteError(w, e)
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
	a.log.Info("admin: key created", "key_id", k.ID, "tenant", k.Tenant)
	writeJSON(w, http.StatusCreated, createdKey{Plaintext: plain, keyInfo: keyInfo{Key: k, Status: keys.Status(&k, now)}})
}

func (a *api) listKeys(w http.ResponseWriter, r *http.Request) {
	ks, err := a.st.Keys(r.Context())
	if err != nil {
		a.internal(w, "listing keys", err)
		return
	}
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
	id := r.PathValue("id")
	if !keys.ValidID(id) {
		openai.WriteError(w, keyNotFound)
		return
	}
	ctx := r.Context()
	k, err := a.st.Key(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		openai.WriteError(w, keyNotFound)
		return
	}
	if err != nil {
		a.internal(w, "reading a key to revoke", err)
		return
	}
	now := a.now()
	if k.Revoked.IsZero() {
		at := now.UTC()
		if err := a.st.RevokeKey(ctx, id, at); err != nil {
			a.internal(w, "revoking a key", err)
			return
		}
		k.Revoked = at
		a.log.Info("admin: key revoked", "key_id", k.ID, "tenant", k.Tenant)
	}
	if a.ring != nil {
		a.ring.Forget(id)
	}
	writeJSON(w, http.StatusOK, keyInfo{Key: k, Status: keys.Status(&k, now)})
}
