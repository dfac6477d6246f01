// Command gguf writes the tiny model llmgw's Ollama tests serve: a
// llama-architecture GGUF with random weights (2 layers, width 64), a
// byte-level GPT-2-style vocabulary with merges that make each common
// English word, with its leading space, one token, as llmgw's own
// tokenizer counts the words its bench writes, and the Modelfile that
// `ollama create` takes it with. Its answers are noise; what it is for is
// a real engine's scheduler, slots and prompt cache at a cost that fits a
// 2-core machine.
//
//	go -C internal/app/testdata/ollama/gguf run . DIR
//
// writes DIR/model.gguf and DIR/Modelfile. It is its own module so that
// Ollama's stays out of llmgw's go.mod.
package main

import (
	_ "embed"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/ollama/ollama/fs/ggml"
)

// The model's shape: as small as llama.cpp's llama graph takes, so that a
// 2,000-token prompt computes in well under a second on one core.
const (
	layers   = 2
	width    = 64
	heads    = 4
	headDim  = width / heads
	ffn      = 128
	contextN = 32768 // trained context; the Modelfile's num_ctx is what is served
	numCtx   = 16384 // a slot's context: the longest replayed prompt, 2,600 tokens, four times over
)

// words are the words llmgw's bench writes prompts from
// (internal/bench/text.go), each one token with its leading space here.
//
//go:embed words.txt
var words string

// modelfile is what `ollama create` reads: a template that writes every
// message of a conversation in order, so a conversation's next turn
// extends the prompt its last turn left in a slot.
const modelfile = `FROM ./model.gguf
TEMPLATE """{{- range .Messages }}<|{{ .Role }}|>{{ .Content }}
{{ end }}<|assistant|>"""
PARAMETER num_ctx %d
PARAMETER temperature 0
`

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gguf DIR")
		os.Exit(2)
	}
	if err := write(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "gguf:", err)
		os.Exit(1)
	}
}

func write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tokens, types, merges := vocabulary(strings.Fields(words))
	kv := ggml.KV{
		"general.architecture":                   "llama",
		"general.name":                           "llmgw-tiny",
		"general.file_type":                      uint32(0), // all F32
		"llama.vocab_size":                       uint32(len(tokens)),
		"llama.block_count":                      uint32(layers),
		"llama.context_length":                   uint32(contextN),
		"llama.embedding_length":                 uint32(width),
		"llama.feed_forward_length":              uint32(ffn),
		"llama.attention.head_count":             uint32(heads),
		"llama.attention.head_count_kv":          uint32(heads),
		"llama.rope.dimension_count":             uint32(headDim),
		"llama.rope.freq_base":                   float32(10000),
		"llama.attention.layer_norm_rms_epsilon": float32(1e-5),
		"tokenizer.ggml.model":                   "gpt2",
		"tokenizer.ggml.pre":                     "default",
		"tokenizer.ggml.tokens":                  tokens,
		"tokenizer.ggml.token_type":              types,
		"tokenizer.ggml.merges":                  merges,
		"tokenizer.ggml.bos_token_id":            uint32(bos),
		"tokenizer.ggml.eos_token_id":            uint32(eos),
		"tokenizer.ggml.add_bos_token":           true,
	}
	rng := rand.New(rand.NewPCG(1, 2))
	v := uint64(len(tokens))
	ts := []*ggml.Tensor{
		tensor(rng, "token_embd.weight", width, v),
		ones("output_norm.weight", width),
		tensor(rng, "output.weight", width, v),
	}
	for i := range layers {
		b := fmt.Sprintf("blk.%d.", i)
		ts = append(ts,
			ones(b+"attn_norm.weight", width),
			tensor(rng, b+"attn_q.weight", width, width),
			tensor(rng, b+"attn_k.weight", width, width),
			tensor(rng, b+"attn_v.weight", width, width),
			tensor(rng, b+"attn_output.weight", width, width),
			ones(b+"ffn_norm.weight", width),
			tensor(rng, b+"ffn_gate.weight", width, ffn),
			tensor(rng, b+"ffn_up.weight", width, ffn),
			tensor(rng, b+"ffn_down.weight", ffn, width),
		)
	}
	f, err := os.Create(filepath.Join(dir, "model.gguf"))
	if err != nil {
		return err
	}
	if err := ggml.WriteGGUF(f, kv, ts); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "Modelfile"), fmt.Appendf(nil, modelfile, numCtx), 0o644)
}

// Special tokens, after the 256 bytes.
const (
	bos = 256
	eos = 257
)

// Token types as GGUF writes them.
const (
	typeNormal  = 1
	typeControl = 3
)

// vocabulary is a byte-level BPE vocabulary: the 256 bytes as GPT-2 maps
// them to printable runes, BOS and EOS, then each word's pieces with its
// leading space (Ġ), built left to right by one merge each.
func vocabulary(words []string) (tokens []string, types []int32, merges []string) {
	enc := byteRunes()
	for b := range 256 {
		tokens = append(tokens, string(enc[b]))
		types = append(types, typeNormal)
	}
	tokens = append(tokens, "<s>", "</s>")
	types = append(types, typeControl, typeControl)
	seen := map[string]bool{}
	for _, t := range tokens {
		seen[t] = true
	}
	for _, w := range words {
		var rs []string
		for _, b := range []byte(" " + w) {
			rs = append(rs, string(enc[b]))
		}
		piece := rs[0]
		for _, r := range rs[1:] {
			next := piece + r
			if !seen[next] {
				seen[next] = true
				tokens = append(tokens, next)
				types = append(types, typeNormal)
				merges = append(merges, piece+" "+r)
			}
			piece = next
		}
	}
	return tokens, types, merges
}

// byteRunes is GPT-2's map of bytes to printable runes: printable Latin-1
// bytes stand for themselves, the others for runes from U+0100 up.
func byteRunes() [256]rune {
	var m [256]rune
	n := 0
	for b := range 256 {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			m[b] = rune(b)
		} else {
			m[b] = rune(256 + n)
			n++
		}
	}
	return m
}

// tensor is a rows×cols F32 weight of small random values; GGUF writes
// its row length first.
func tensor(rng *rand.Rand, name string, row, rows uint64) *ggml.Tensor {
	vals := make([]float32, row*rows)
	scale := float32(1 / float64(row))
	for i := range vals {
		vals[i] = (rng.Float32()*2 - 1) * scale * 4
	}
	return &ggml.Tensor{Name: name, Kind: 0, Shape: []uint64{row, rows}, WriterTo: f32(vals)}
}

// ones is a norm's weight of ones.
func ones(name string, n uint64) *ggml.Tensor {
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = 1
	}
	return &ggml.Tensor{Name: name, Kind: 0, Shape: []uint64{n}, WriterTo: f32(vals)}
}
