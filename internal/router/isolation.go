package router

// Cache isolation: prompts of two isolation domains — tenants cut to
// router.cache_isolation's level — never share a cached prefix, so that
// no tenant can learn another's prompts from which of its own are served
// from cache. Each domain's prompts are hashed into the prefix index from
// a seed of its own, so the gateway neither predicts nor steers toward a
// hit on another domain's blocks; and pools whose servers take a
// cache_salt (vLLM's and SGLang's) are sent one made for the domain, so
// the servers keep the domains' blocks apart too. A salt is an HMAC of
// the domain under a secret the gateways sharing a store agree on: no
// tenant's name reaches a server, and no client can make another
// domain's salt.

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"sync"

	"github.com/cespare/xxhash/v2"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
)

// maxCachedDomains bounds the salts kept made: far more tenants than a
// gateway serves at once, and a bound on what clients naming tenants in a
// header (without keys) can make it hold.
const maxCachedDomains = 4096

// domainSalt is what keeps a request's prompts to its domain: the
// cache_salt sent to pools that take one, and the seed its prompt's
// blocks are hashed from. Both are zero without isolation and without a
// salt of the client's own.
type domainSalt struct {
	salt string
	seed uint64
}

// isolation makes each request's domainSalt.
type isolation struct {
	level string // org, team or user; empty: none
	key   []byte // the HMAC key salts are made with
	mu    sync.Mutex
	made  map[string]domainSalt // key: domain; at most maxCachedDomains
}

// newIsolation isolates at level (org, team, user, none, or empty for
// the default, org) with salts made under secret; a nil secret is one of
// this process's alone.
func newIsolation(level string, secret []byte) *isolation {
	switch level {
	case CacheIsolationNone:
		level = ""
	case "":
		level = tenant.LevelOrg
	}
	if secret == nil {
		secret = make([]byte, 32)
		rand.Read(secret)
	}
	return &isolation{level: level, key: secret, made: make(map[string]domainSalt)}
}

// of is the domainSalt of a request from tenantPath ("" for none) that
// sent clientSalt ("" for none). A client's own salt keeps its prompts
// apart within its domain, never joins them to another's: it is made into
// the domain's salt, not sent as it came.
func (iso *isolation) of(tenantPath, clientSalt string) domainSalt {
	if iso.level == "" {
		if clientSalt == "" {
			return domainSalt{}
		}
		return domainSalt{seed: xxhash.Sum64String(clientSalt)}
	}
	domain := tenant.AtLevel(tenantPath, iso.level)
	if clientSalt != "" {
		return iso.derive(domain, clientSalt)
	}
	iso.mu.Lock()
	defer iso.mu.Unlock()
	d, ok := iso.made[domain]
	if !ok {
		if len(iso.made) >= maxCachedDomains {
			clear(iso.made)
		}
		d = iso.derive(domain, "")
		iso.made[domain] = d
	}
	return d
}

// derive makes the salt of domain and clientSalt: 128 bits of the HMAC,
// as hex, and the seed from 64 more.
func (iso *isolation) derive(domain, clientSalt string) domainSalt {
	m := hmac.New(sha256.New, iso.key)
	m.Write([]byte(domain))
	m.Write([]byte{0})
	m.Write([]byte(clientSalt))
	sum := m.Sum(nil)
	return domainSalt{salt: hex.EncodeToString(sum[:16]), seed: binary.LittleEndian.Uint64(sum[16:24])}
}

// salt is the cache_salt calls to p carry for req: its domain's, on a
// pool that takes one; empty to send the body's own, if any.
func (p *servedPool) salt(req *parsedRequest) string {
	if !p.takesSalt {
		return ""
	}
	return req.salt.salt
}

// takesSalt reports whether a pool of kind sends requests a cache_salt:
// vLLM and SGLang servers key their prefix caches by it; others would
// refuse it or ignore it.
func takesSalt(kind string) bool {
	return kind == catalog.KindVLLM || kind == catalog.KindSGLang
}
