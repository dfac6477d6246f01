module gitea.mynodes.xyz/ilker/llmgw/internal/app/testdata/ollama/gguf

go 1.24.1

require github.com/ollama/ollama v0.17.4

require golang.org/x/sync v0.17.0 // indirect
