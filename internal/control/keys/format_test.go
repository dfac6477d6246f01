package keys

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

func TestGenerateParseRoundTrip(t *testing.T) {
	seen := make(map[string]bool)
	for range 200 {
		plain, id, hash, err := Generate()
		if err != nil {
			t.Fatal(err)
		}
		if len(plain) != plaintextLen || !strings.HasPrefix(plain, Prefix) {
			t.Fatalf("Generate() plaintext has length %d, want %d with prefix %q", len(plain), plaintextLen, Prefix)
		}
		if !ValidID(id) {
			t.Fatalf("Generate() id %q is not a valid ID", id)
		}
		if seen[id] {
			t.Fatalf("Generate() repeated id %q", id)
		}
		seen[id] = true
		gotID, gotHash, ok := Parse(plain)
		if !ok {
			t.Fatalf("Parse(Generate()) failed")
		}
		if gotID != id || gotHash != hash {
			t.Fatalf("Parse(Generate()) = %q, %q; want %q, %q", gotID, gotHash, id, hash)
		}
		secret := plain[len(Prefix)+publicLen+1:]
		want := sha256.Sum256([]byte(secret))
		if hash != hex.EncodeToString(want[:]) {
			t.Fatalf("hash is not hex(SHA-256(secret))")
		}
		if strings.Contains(plain, hash) || strings.Contains(hash, secret) {
			t.Fatalf("hash and secret overlap")
		}
	}
}

func TestParseRejects(t *testing.T) {
	plain, _, _, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	secretAt := len(Prefix) + publicLen + 1
	tests := []struct {
		name, in string
	}{
		{"empty", ""},
		{"prefix only", Prefix},
		{"other prefix", "sk-proj-" + plain[len(Prefix)-1:]},
		{"uppercase prefix", strings.ToUpper(Prefix) + plain[len(Prefix):]},
		{"one short", plain[:len(plain)-1]},
		{"one long", plain + "a"},
		{"uppercase in id", Prefix + "ABCDEFGHIJKL" + plain[secretAt-1:]},
		{"digit 8 in id", Prefix + "abcdefghijk8" + plain[secretAt-1:]},
		{"no dash", plain[:secretAt-1] + "x" + plain[secretAt:]},
		{"symbol in secret", plain[:secretAt] + "+" + plain[secretAt+1:]},
		{"space in secret", plain[:len(plain)-1] + " "},
		{"multibyte", plain[:len(plain)-2] + "é"},
		{"id instead of key", "key_abcdefghijkl"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, hash, ok := Parse(tt.in)
			if ok || id != "" || hash != "" {
				t.Errorf("Parse(%q) = %q, %q, %v; want rejected", tt.in, id, hash, ok)
			}
		})
	}
}

func TestValidID(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"key_abcdefgh2345", true},
		{"key_abcdefgh234", false},
		{"key_abcdefgh23456", false},
		{"key_ABCDEFGH2345", false},
		{"kex_abcdefgh2345", false},
		{"key_abcdefgh2340", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := ValidID(tt.in); got != tt.want {
			t.Errorf("ValidID(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for range 4 {
		plain, _, _, err := Generate()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(plain)
		f.Add(plain[:len(plain)-1])
	}
	f.Add("")
	f.Add(Prefix)
	f.Add("sk-llmgw-aaaaaaaaaaaa-" + strings.Repeat("Z", secretLen))
	f.Fuzz(func(t *testing.T, in string) {
		id, hash, ok := Parse(in)
		if !ok {
			if id != "" || hash != "" {
				t.Fatalf("Parse(%q) rejected but returned %q, %q", in, id, hash)
			}
			return
		}
		if !ValidID(id) {
			t.Fatalf("Parse(%q) gave invalid id %q", in, id)
		}
		// An accepted key is exactly its parts put back together.
		secret := in[len(Prefix)+publicLen+1:]
		if got := Prefix + id[len(IDPrefix):] + "-" + secret; got != in {
			t.Fatalf("reassembled %q, want %q", got, in)
		}
		sum := sha256.Sum256([]byte(secret))
		if hash != hex.EncodeToString(sum[:]) {
			t.Fatalf("Parse(%q) hash is not SHA-256 of the secret", in)
		}
	})
}

func BenchmarkParse(b *testing.B) {
	plain, _, _, err := Generate()
	if err != nil {
		b.Fatal(err)
	}
	var id [idLen]byte
	var sum [sha256.Size]byte
	b.ReportAllocs()
	for b.Loop() {
		if !parse(plain, &id, &sum) {
			b.Fatal("parse failed")
		}
	}
}
