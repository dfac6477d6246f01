// /v1/embeddings: deterministic unit vectors, one per input, with usage.
// Embeddings skip the batch: they are answered as soon as they are read.

package sim

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

type embeddingRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`
}

// maxEmbeddingDims bounds the dimensions a request may ask for.
const maxEmbeddingDims = 8192

func (s *Server) embeddings(w http.ResponseWriter, r *http.Request, body []byte, _ Faults) {
	var req embeddingRequest
	if err := decodeJSON(body, &req, ""); err != nil {
		openai.WriteError(w, err)
		return
	}
	if req.Model != "" && req.Model != s.cfg.Model {
		openai.WriteError(w, openai.ModelNotFound(req.Model))
		return
	}
	dims := s.cfg.EmbeddingDims
	if req.Dimensions != nil {
		if *req.Dimensions < 1 || *req.Dimensions > maxEmbeddingDims {
			openai.WriteError(w, openai.BadRequest("dimensions", "dimensions must be between 1 and %d, got %d.", maxEmbeddingDims, *req.Dimensions))
			return
		}
		dims = *req.Dimensions
	}
	if req.EncodingFormat != "" && req.EncodingFormat != "float" && req.EncodingFormat != "base64" {
		openai.WriteError(w, openai.BadRequest("encoding_format", "encoding_format must be float or base64, got %q.", req.EncodingFormat))
		return
	}
	inputs, err := embeddingInputs(req.Input, s.cfg.BlockSize)
	if err != nil {
		openai.WriteError(w, openai.BadRequest("input", "%v", err))
		return
	}

	type datum struct {
		Object    string `json:"object"`
		Index     int    `json:"index"`
		Embedding any    `json:"embedding"`
	}
	data := make([]datum, len(inputs))
	tokens := 0
	for i, p := range inputs {
		if p.tokens > s.cfg.MaxModelLen {
			openai.WriteError(w, openai.BadRequest("input", "input[%d] has %d tokens, more than the model's %d.", i, p.tokens, s.cfg.MaxModelLen))
			return
		}
		tokens += p.tokens
		v := embedding(p.digest, s.cfg.Seed, dims)
		var e any = v
		if req.EncodingFormat == "base64" {
			e = base64.StdEncoding.EncodeToString(embeddingBytes(v))
		}
		data[i] = datum{"embedding", i, e}
	}
	type embUsage struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	}
	writeJSON(w, struct {
		Object string   `json:"object"`
		Data   []datum  `json:"data"`
		Model  string   `json:"model"`
		Usage  embUsage `json:"usage"`
	}{"list", data, s.cfg.Model, embUsage{tokens, tokens}})
}

// embeddingInputs reads input: a string, an array of strings, an array of
// token ids, or an array of those.
func embeddingInputs(raw json.RawMessage, blockSize int) ([]promptInfo, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil, fmt.Errorf("input is required")
	}
	var items []json.RawMessage
	if raw[0] == '[' {
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, fmt.Errorf("input: %w", err)
		}
		if len(items) > 0 && !(items[0][0] == '"' || items[0][0] == '[') {
			items = []json.RawMessage{raw} // one array of token ids
		}
	} else {
		items = []json.RawMessage{raw}
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("input must not be empty")
	}
	out := make([]promptInfo, len(items))
	for i, it := range items {
		p, err := completionPrompt(it, blockSize)
		if err != nil {
			return nil, fmt.Errorf("input[%d]: %w", i, err)
		}
		out[i] = p
	}
	return out, nil
}
