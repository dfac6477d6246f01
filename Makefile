# The commands the README names. Each is a plain go command too.

.PHONY: run test bench lint build fuzz agents image

build:
	go build -o llmgw ./cmd/llmgw

run:
	go run ./cmd/llmgw serve

# deploy/ is a module of its own (the image builder, the chart's tests,
# the dashboards and the rules), so that Helm and Kubernetes stay out of
# llmgw's: ./... at the root does not reach it.
test:
	go test -race ./...
	go -C deploy test -race ./...

# The coding agents the agent tests run, at pinned versions; without them
# those tests skip.
agents:
	npm install --prefix internal/app/testdata/agents --no-audit --no-fund

# Microbenchmarks of the hot path; whole-process runs are in docs/BENCHMARKS.md.
bench:
	go test -run '^$$' -bench . -benchmem ./internal/openai ./internal/router/... ./internal/limits ./internal/control/keys ./internal/tokenize

# gofmt -l lists what it would change and still exits 0: a file it lists,
# or one it cannot parse, fails the target.
lint:
	@unformatted=$$(gofmt -l .) || exit 1; if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	go vet ./...
	go -C deploy vet ./...

# The differential fuzz targets (the SSE framer's against a reading of
# the specification among them), the API translations' round trips and
# the redaction of upstreams' errors, each for FUZZTIME (default 10m);
# see docs/SECURITY.md.
FUZZTIME ?= 10m
fuzz:
	go test -run '^$$' -fuzz '^FuzzServerMatchesNetHTTP$$' -fuzztime $(FUZZTIME) ./internal/h1
	go test -run '^$$' -fuzz '^FuzzTransportMatchesNetHTTP$$' -fuzztime $(FUZZTIME) ./internal/router/proxy
	go test -run '^$$' -fuzz '^FuzzRedact$$' -fuzztime $(FUZZTIME) ./internal/router/proxy
	go test -run '^$$' -fuzz '^FuzzRequestMatchesEncodingJSON$$' -fuzztime $(FUZZTIME) ./internal/openai
	go test -run '^$$' -fuzz '^FuzzScanMatchesJSONValid$$' -fuzztime $(FUZZTIME) ./internal/openai
	go test -run '^$$' -fuzz '^FuzzRenameModel$$' -fuzztime $(FUZZTIME) ./internal/openai
	go test -run '^$$' -fuzz '^FuzzFramerMatchesSpec$$' -fuzztime $(FUZZTIME) ./internal/openai
	go test -run '^$$' -fuzz '^FuzzFinishReasonMatchesEncodingJSON$$' -fuzztime $(FUZZTIME) ./internal/openai
	go test -run '^$$' -fuzz '^FuzzParseMatchesExpfmt$$' -fuzztime $(FUZZTIME) ./internal/router/scrape
	go test -run '^$$' -fuzz '^FuzzTranslateAnthropic$$' -fuzztime $(FUZZTIME) ./internal/translate
	go test -run '^$$' -fuzz '^FuzzTranslateResponses$$' -fuzztime $(FUZZTIME) ./internal/translate
	go test -run '^$$' -fuzz '^FuzzTranslateStream$$' -fuzztime $(FUZZTIME) ./internal/translate
	go test -run '^$$' -fuzz '^FuzzAppendJSONMatchesEncodingJSON$$' -fuzztime $(FUZZTIME) ./internal/control/usage

# The container image, built without a container daemon: an OCI image
# layout in llmgw-image/ and a tarball for `docker load -i llmgw-image.tar`.
# The Dockerfile builds the same image with one.
VERSION ?= dev
image:
	cd deploy && SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct) go run ./image -src .. -version $(VERSION) \
		-revision $$(git rev-parse HEAD) -oci ../llmgw-image -tar ../llmgw-image.tar
