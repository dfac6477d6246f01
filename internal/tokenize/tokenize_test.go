package tokenize

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestSplit(t *testing.T) {
	tests := []struct {
		text string
		want []string
	}{
		{"", []string{}},
		{"   \n\t", []string{}},
		{"hello", []string{"hello"}},
		{"The quick brown fox jumps over the lazy dog.",
			[]string{"The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", "."}},
		{"tokenizer", []string{"token", "izer"}},
		{"  leading and trailing  ", []string{"  leadi", "ng", " and", " trail", "ing"}},
		{"a,b;c", []string{"a", ",", "b", ";", "c"}},
		{"x := f(1234567)", []string{"x", " :", "=", " f", "(", "12345", "67", ")"}},
		{"snake_case_name", []string{"snake", "_case", "_name"}},
		// Non-ASCII letters are word bytes; a cut waits for the end of a
		// character: "é" is 2 bytes, "日" 3.
		{"café", []string{"café"}},
		{"日本語です", []string{"日本", "語で", "す"}},
		{"\n\nnew paragraph", []string{"\n\nnew", " parag", "raph"}},
	}
	for _, tt := range tests {
		got := Split(tt.text)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Split(%q) (-want +got):\n%s", tt.text, diff)
		}
		if n := Count(tt.text); n != len(tt.want) {
			t.Errorf("Count(%q) = %d, want %d", tt.text, n, len(tt.want))
		}
	}
}

// TestEnglishRatio checks the rule lands near 4 bytes of English prose a
// token, the figure the gateway's estimates rely on.
func TestEnglishRatio(t *testing.T) {
	prose := `Continuous batching lets an inference server add new requests to the
running batch at every step instead of waiting for the whole batch to finish.
Each step decodes one token for every running sequence, and a long prompt is
prefilled in chunks so that it does not stall the others for too long. The
key-value cache is divided into fixed-size blocks, and blocks that hold a
common prefix can be shared between requests.`
	n := Count(prose)
	ratio := float64(len(prose)) / float64(n)
	if ratio < 3.5 || ratio > 5 {
		t.Errorf("%d bytes in %d tokens = %.2f bytes/token, want between 3.5 and 5", len(prose), n, ratio)
	}
}

func TestTokensStopsEarly(t *testing.T) {
	var got []string
	for tok := range Tokens("one two three four") {
		got = append(got, tok)
		if len(got) == 2 {
			break
		}
	}
	if diff := cmp.Diff([]string{"one", " two"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestCountDoesNotAllocate(t *testing.T) {
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 50)
	if a := testing.AllocsPerRun(100, func() { Count(text) }); a != 0 {
		t.Errorf("Count allocates %v times a call, want 0", a)
	}
}

func FuzzTokens(f *testing.F) {
	for _, s := range []string{"", "hello world", "日本語です", "a,,b  c\n", "\xff\xfe bad utf8 \xc3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		toks := Split(text)
		if len(toks) != Count(text) {
			t.Fatalf("Count = %d, Split gives %d tokens", Count(text), len(toks))
		}
		if got, want := strings.Join(toks, ""), strings.TrimRight(text, " \t\n\r\v\f"); got != want {
			t.Fatalf("joined tokens %q, want %q", got, want)
		}
		for _, tok := range toks {
			if strings.TrimLeft(tok, " \t\n\r\v\f") == "" {
				t.Fatalf("token %q is only whitespace", tok)
			}
			if utf8.ValidString(text) && !utf8.ValidString(tok) {
				t.Fatalf("token %q of valid text %q splits a character", tok, text)
			}
		}
	})
}

func BenchmarkCount(b *testing.B) {
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 200) // 9 KB, ~2k tokens
	b.ReportAllocs()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		Count(text)
	}
}
