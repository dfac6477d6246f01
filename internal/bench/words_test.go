package bench

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// TestOllamaModelWords holds the word list of the tiny model the Ollama
// tests serve (internal/app/testdata/ollama/gguf), each word one token
// there, to the vocabulary prompts are written from, so that a prompt
// counts about as many tokens on that engine as here.
func TestOllamaModelWords(t *testing.T) {
	b, err := os.ReadFile("../app/testdata/ollama/gguf/words.txt")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(string(b)); !slices.Equal(got, vocabulary[:]) {
		t.Errorf("words.txt has %d words, the vocabulary %d, or their order differs: write it again from text.go's vocabulary", len(got), len(vocabulary))
	}
}
