// What a request's prompt is to the replica (tokens, block hashes, a
// digest) and the deterministic text, lengths and vectors it answers with.

package sim

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strconv"

	"gitea.mynodes.xyz/ilker/llmgw/internal/tokenize"
)

// promptInfo is a prompt as the engine sees it.
type promptInfo struct {
	tokens int
	hashes []uint64 // chained hash of each full block: its tokens and every block before
	digest uint64   // hash of every token
}

// FNV-1a, 64-bit: cheap, stable across processes, and good enough to tell
// prompts apart.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// promptHasher builds a promptInfo one token at a time.
type promptHasher struct {
	blockSize int
	inBlock   int
	h         uint64 // running hash, chained across blocks
	info      promptInfo
}

func newPromptHasher(blockSize int) *promptHasher {
	return &promptHasher{blockSize: blockSize, h: fnvOffset}
}

// addText adds text's tokens.
func (p *promptHasher) addText(text string) {
	for tok := range tokenize.Tokens(text) {
		p.addToken(tok)
	}
}

// addToken adds one token, given as its text.
func (p *promptHasher) addToken(tok string) {
	h := p.h
	for i := 0; i < len(tok); i++ {
		h ^= uint64(tok[i])
		h *= fnvPrime
	}
	h ^= 0xff // separates tokens: "ab"+"c" is not "a"+"bc"
	h *= fnvPrime
	p.h = h
	p.info.tokens++
	p.inBlock++
	if p.inBlock == p.blockSize {
		p.info.hashes = append(p.info.hashes, h)
		p.inBlock = 0
	}
}

// addTokenID adds one token given by number, as the completions API allows.
func (p *promptHasher) addTokenID(id int64) {
	var b [20]byte
	p.addToken(string(strconv.AppendInt(b[:0], id, 10)))
}

// salted is p with its blocks keyed by salt as well: a prompt salted
// differently, or not at all, hits none of them, as vLLM keys a salted
// prompt's first block, and so every block after it, by its salt.
func (p promptInfo) salted(salt string) promptInfo {
	h := uint64(fnvOffset)
	for i := 0; i < len(salt); i++ {
		h ^= uint64(salt[i])
		h *= fnvPrime
	}
	hashes := make([]uint64, len(p.hashes))
	for i, b := range p.hashes {
		hashes[i] = mix(b ^ h)
	}
	p.hashes = hashes
	return p
}

func (p *promptHasher) result() promptInfo {
	p.info.digest = p.h
	return p.info
}

// words are what output text is made of. Each is one token by
// tokenize.Count, so a gateway's estimate of the output matches.
var words = [...]string{
	"the", "model", "sends", "one", "token", "each", "step", "and", "cache",
	"keeps", "warm", "while", "queue", "waits", "for", "its", "turn", "so",
	"batch", "grows", "time", "falls", "when", "free", "space", "opens",
	"then", "new", "work", "joins", "at", "once", "a", "long", "short",
	"reply", "comes", "back", "to", "you", "as", "fast", "it", "can", "with",
	"every", "word", "in", "order", "good", "real", "light", "data", "flows",
	"from", "here", "there", "on", "our", "path", "made", "of", "plain", "text",
}

// mix is SplitMix64's finaliser: a well-spread 64-bit function of x.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// generation is what a request will answer: a seed for its words and how
// many tokens.
type generation struct {
	seed   uint64
	tokens int
	reason string // finish_reason: "length" when max_tokens cut it, else "stop"
}

// planGeneration is the answer to a prompt with the given digest: exactly maxTokens
// with ignoreEOS, else a length drawn from 1 to maxTokens by the request's
// content, its seed and the replica's Seed.
func planGeneration(digest uint64, replicaSeed int64, requestSeed int64, maxTokens int, ignoreEOS bool) generation {
	seed := mix(digest ^ mix(uint64(replicaSeed)) ^ mix(uint64(requestSeed)+1) ^ uint64(maxTokens)<<1)
	n := maxTokens
	if !ignoreEOS {
		n = 1 + int(mix(seed^0x5eed)%uint64(maxTokens))
	}
	reason := "stop"
	if n == maxTokens {
		reason = "length"
	}
	return generation{seed: seed, tokens: n, reason: reason}
}

// word is output token i: a word, with a leading space after the first.
func (g generation) word(i int) (space bool, w string) {
	return i > 0, words[mix(g.seed+uint64(i))%uint64(len(words))]
}

// text is the whole answer.
func (g generation) text() string {
	b := make([]byte, 0, g.tokens*6)
	for i := range g.tokens {
		sp, w := g.word(i)
		if sp {
			b = append(b, ' ')
		}
		b = append(b, w...)
	}
	return string(b)
}

// embedding is a unit vector of dims float32s determined by digest and the
// replica's seed.
func embedding(digest uint64, replicaSeed int64, dims int) []float32 {
	r := rand.New(rand.NewPCG(digest, uint64(replicaSeed)))
	v := make([]float32, dims)
	var norm float64
	for i := range v {
		x := r.NormFloat64()
		v[i] = float32(x)
		norm += x * x
	}
	norm = math.Sqrt(norm)
	for i := range v {
		v[i] = float32(float64(v[i]) / norm)
	}
	return v
}

// embeddingBytes is v as little-endian float32s, the bytes OpenAI's
// base64 encoding carries.
func embeddingBytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}
