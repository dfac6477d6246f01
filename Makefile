# The commands the README names. Each is a plain go command too.

.PHONY: run test bench lint build

build:
	go build -o llmgw ./cmd/llmgw

run:
	go run ./cmd/llmgw serve

test:
	go test -race ./...

# Microbenchmarks of the hot path; whole-process runs are in docs/BENCHMARKS.md.
bench:
	go test -run '^$$' -bench . -benchmem ./internal/openai ./internal/router/... ./internal/limits ./internal/control/keys ./internal/tokenize

lint:
	gofmt -l . && go vet ./...
