package scrape

// The JSON two servers tell their load by where there is no Prometheus
// text to read: llama.cpp's /slots, read when its /metrics is off, and
// Ollama's /api/ps, the models it has loaded. Each is read within the
// bounds a scrape's text is, and a count that is not believable makes the
// answer unread, never a load of zero.

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Format is what a Target's MetricsURL answers with.
type Format int

const (
	// FormatPrometheus is the Prometheus text vLLM, SGLang and llama.cpp
	// write on /metrics.
	FormatPrometheus Format = iota
	// FormatOllama is the JSON of Ollama's GET /api/ps: the models its
	// server has loaded.
	FormatOllama
)

const (
	// maxSlots bounds the slots one /slots answer may list: llama.cpp
	// runs one per parallel sequence (-np), a handful to a few hundred.
	maxSlots = 4096
	// maxModels bounds the models one /api/ps answer may list: Ollama
	// keeps three a GPU loaded by default (OLLAMA_MAX_LOADED_MODELS).
	maxModels = 256
	// maxModelName bounds a model's name as read: Ollama's longest, host,
	// namespace, model and tag, is under 350 bytes.
	maxModelName = 512
)

// parseSlots reads the load of a llama.cpp server from its /slots: the
// slots it runs, and those processing a request are Running; what waits
// for a slot is not shown there, nor the KV cache, and both stay unknown.
func parseSlots(body []byte) (Load, error) {
	var slots []struct {
		IsProcessing *bool `json:"is_processing"`
	}
	if err := json.Unmarshal(body, &slots); err != nil {
		return unknownLoad(), fmt.Errorf("slots: %w", err)
	}
	if len(slots) == 0 || len(slots) > maxSlots {
		return unknownLoad(), fmt.Errorf("slots: %d slots, want 1 to %d", len(slots), maxSlots)
	}
	busy := 0
	for i, s := range slots {
		if s.IsProcessing == nil {
			return unknownLoad(), fmt.Errorf("slots: slot %d has no is_processing", i)
		}
		if *s.IsProcessing {
			busy++
		}
	}
	l := unknownLoad()
	l.Running = float64(busy)
	l.Slots = len(slots)
	return l, nil
}

// parsePS reads the models an Ollama server has loaded from its
// /api/ps: each model's name and model, as OllamaName writes them.
// Requests and the KV cache are not shown there, and stay unknown.
func parsePS(body []byte) (Load, error) {
	var ps struct {
		Models *[]struct {
			Name  string `json:"name"`
			Model string `json:"model"`
		} `json:"models"`
	}
	if err := json.Unmarshal(body, &ps); err != nil {
		return unknownLoad(), fmt.Errorf("ps: %w", err)
	}
	if ps.Models == nil {
		return unknownLoad(), errors.New("ps: no models list")
	}
	if len(*ps.Models) > maxModels {
		return unknownLoad(), fmt.Errorf("ps: %d models, more than %d", len(*ps.Models), maxModels)
	}
	l := unknownLoad()
	l.Models = []string{}
	for _, m := range *ps.Models {
		for _, name := range [2]string{m.Name, m.Model} {
			if name == "" || len(name) > maxModelName {
				continue
			}
			if n := OllamaName(name); !contains(l.Models, n) {
				l.Models = append(l.Models, n)
			}
		}
	}
	return l, nil
}

func contains(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

// OllamaName is an Ollama model name as the server compares it: lower
// case, its default host and namespace (registry.ollama.ai, library)
// left off, and the tag latest where it names none — llama3.2 is
// llama3.2:latest.
func OllamaName(name string) string {
	n := strings.ToLower(name)
	n = strings.TrimPrefix(n, "registry.ollama.ai/")
	n = strings.TrimPrefix(n, "library/")
	if !strings.Contains(n[strings.LastIndexByte(n, '/')+1:], ":") {
		n += ":latest"
	}
	return n
}

// disabled reports whether err is a server's answer that the endpoint is
// not served: llama.cpp answers 501 for /metrics without --metrics and
// /slots with --no-slots, and older servers 404.
func disabled(err error) bool {
	var status statusError
	return errors.As(err, &status) && (status == http.StatusNotFound || status == http.StatusNotImplemented)
}
