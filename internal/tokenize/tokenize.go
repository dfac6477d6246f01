// Package tokenize is llmgw's approximate tokenizer: a fixed, deterministic
// rule that counts about as many tokens as a BPE tokenizer would for English
// text, cheaply enough for the gateway's hot path, and that yields the token
// strings themselves for the simulated server's prefix cache.
//
// The rule, applied to the bytes of the text:
//
//   - Whitespace is free: it is folded into the token that follows it, as
//     BPE vocabularies fold a leading space into a word. Trailing
//     whitespace costs nothing.
//   - A word is a run of ASCII letters, digits and underscores, together
//     with any non-ASCII characters. It costs one token per started
//     WordBytes bytes, so "the", "model" and "cache" are one token each
//     and "tokenizer" is two. A cut never splits a UTF-8 character.
//   - Every other byte (punctuation, symbols) is a token of its own.
//
// For ordinary English prose this is about 4 to 4.5 bytes per token, near
// what cl100k-class tokenizers give; code and punctuation-heavy text count
// higher, as they do with real tokenizers.
package tokenize

import "iter"

// WordBytes is how many bytes of a word one token covers. Five makes most
// common English words one token, and the average English word (4.7
// letters) a little over one, as in BPE vocabularies of ~100k entries.
const WordBytes = 5

// class is what a byte is to the rule above.
type class uint8

const (
	space class = iota
	word
	punct
)

// classes maps each byte to its class.
var classes = func() (t [256]class) {
	for i := range t {
		c := byte(i)
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f':
			t[i] = space
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c >= 0x80:
			t[i] = word
		default:
			t[i] = punct
		}
	}
	return t
}()

// Count is how many tokens text holds under the rule. It does not allocate.
func Count(text string) int {
	n := 0
	for i := 0; i < len(text); {
		switch classes[text[i]] {
		case space:
			i++
		case punct:
			n++
			i++
		default:
			i = wordChunkEnd(text, i)
			n++
		}
	}
	return n
}

// wordChunkEnd is where the token that starts with the word byte at i ends:
// at most WordBytes bytes on, sooner if the word ends, later only to finish
// a UTF-8 character.
func wordChunkEnd(text string, i int) int {
	end := i + 1
	for end < len(text) && end-i < WordBytes && classes[text[end]] == word {
		end++
	}
	for end < len(text) && text[end]&0xC0 == 0x80 { // continuation byte
		end++
	}
	return end
}

// Tokens yields text's tokens in order, each a substring of text carrying
// the whitespace that precedes it. Their number is Count(text); joined, they
// are text without its trailing whitespace.
func Tokens(text string) iter.Seq[string] {
	return func(yield func(string) bool) {
		start := 0
		for i := 0; i < len(text); {
			switch classes[text[i]] {
			case space:
				i++
				continue
			case punct:
				i++
			default:
				i = wordChunkEnd(text, i)
			}
			if !yield(text[start:i]) {
				return
			}
			start = i
		}
	}
}

// Split is text's tokens as a slice; see Tokens.
func Split(text string) []string {
	out := make([]string, 0, Count(text))
	for t := range Tokens(text) {
		out = append(out, t)
	}
	return out
}
