// Package keys is llmgw's API keys: their format, how a new one is made and
// its secret hashed, the checks shared by every way of creating one, and the
// Keyring that authenticates a request's key against a cache of the store.
package keys

// The key format: what a plaintext key looks like, how one is generated, and
// how one is taken apart again without trusting a byte of it.

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/big"
	"strings"
)

// A plaintext key is "sk-llmgw-<public>-<secret>":
//
//   - <public> is 12 characters of lowercase base32 (a-z, 2-7), 60 random
//     bits, enough that two keys never share one. The key's ID in the store
//     and in every listing is "key_" followed by these 12 characters, so an
//     ID can be shown and logged freely while the plaintext never is.
//   - <secret> is 32 random bytes (256 bits) written in base62 (0-9, a-z,
//     A-Z), padded with '0' to a fixed 43 characters.
//
// The store keeps only hex(SHA-256(<secret>)). The secret is uniformly
// random and long, so a plain hash is as strong as a slow one here and keeps
// authentication in the hundreds of nanoseconds.
const (
	Prefix    = "sk-llmgw-"
	IDPrefix  = "key_"
	publicLen = 12
	secretLen = 43 // ceil(256 / log2(62)): 62^43 > 2^256
	secretRaw = 32 // random bytes in a secret
	// plaintextLen is the length of every well-formed key.
	plaintextLen = len(Prefix) + publicLen + 1 + secretLen
	idLen        = len(IDPrefix) + publicLen
)

const base32Lower = "abcdefghijklmnopqrstuvwxyz234567"

// Generate makes a new key: the plaintext to hand out once, its ID for the
// store, and the hash of its secret to keep. It fails only when the system's
// random source does.
func Generate() (plaintext, id, hash string, err error) {
	var pub [publicLen]byte
	if _, err := rand.Read(pub[:]); err != nil {
		return "", "", "", fmt.Errorf("keys: reading random bytes: %w", err)
	}
	for i, b := range pub {
		pub[i] = base32Lower[b&31]
	}
	var raw [secretRaw]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", "", "", fmt.Errorf("keys: reading random bytes: %w", err)
	}
	secret := new(big.Int).SetBytes(raw[:]).Text(62)
	secret = strings.Repeat("0", secretLen-len(secret)) + secret
	sum := sha256.Sum256([]byte(secret))
	return Prefix + string(pub[:]) + "-" + secret, IDPrefix + string(pub[:]), hex.EncodeToString(sum[:]), nil
}

// Parse takes a plaintext key apart into its ID and the hex SHA-256 of its
// secret, the form the store holds. ok is false for anything not exactly in
// the key format; Parse never looks anything up.
func Parse(plaintext string) (id, secretHash string, ok bool) {
	var idBuf [idLen]byte
	var sum [sha256.Size]byte
	if !parse(plaintext, &idBuf, &sum) {
		return "", "", false
	}
	return string(idBuf[:]), hex.EncodeToString(sum[:]), true
}

// parse is Parse without allocating: it writes the ID into id and the
// secret's SHA-256 into sum, and reports whether plaintext is well formed.
func parse(plaintext string, id *[idLen]byte, sum *[sha256.Size]byte) bool {
	if len(plaintext) != plaintextLen || plaintext[:len(Prefix)] != Prefix {
		return false
	}
	pub := plaintext[len(Prefix) : len(Prefix)+publicLen]
	for i := 0; i < len(pub); i++ {
		c := pub[i]
		if !(c >= 'a' && c <= 'z' || c >= '2' && c <= '7') {
			return false
		}
	}
	if plaintext[len(Prefix)+publicLen] != '-' {
		return false
	}
	secret := plaintext[len(Prefix)+publicLen+1:]
	for i := 0; i < len(secret); i++ {
		c := secret[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	copy(id[:], IDPrefix)
	copy(id[len(IDPrefix):], pub)
	var buf [secretLen]byte // hashing from an array keeps the secret off the heap
	copy(buf[:], secret)
	*sum = sha256.Sum256(buf[:])
	return true
}

// ValidID reports whether id has the form of a key ID, "key_" and 12
// base32 characters. It says nothing of whether such a key exists.
func ValidID(id string) bool {
	if len(id) != idLen || id[:len(IDPrefix)] != IDPrefix {
		return false
	}
	for i := len(IDPrefix); i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}
