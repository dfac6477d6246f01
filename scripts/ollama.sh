#!/usr/bin/env bash
# ollama.sh: builds Ollama from the Go module proxy into a cache directory
# outside the repo, writes the tiny model its tests and the replay serve
# beside it (internal/app/testdata/ollama/gguf), and prints that directory:
# DIR/bin/ollama, DIR/model/model.gguf and DIR/model/Modelfile, what
# LLMGW_TEST_OLLAMA names. The build (a few minutes on 2 cores) is reused
# while the binary for this version is there; the model, a second's work,
# is written every time.
#
# Ollama's module zip lacks the headers its vendor folder holds; they come
# from Debian (nlohmann-json3-dev, libstb-dev) and from the Go module
# github.com/gen2brain/malgo (miniaudio.h, as miniaudio/miniaudio.h),
# handed to cgo through CGO_CPPFLAGS.
#
#   OLLAMA_VERSION  the module version (default v0.17.4)
#   LLMGW_CACHE     the cache directory (default $HOME/.cache/llmgw)
set -euo pipefail

version=${OLLAMA_VERSION:-v0.17.4}
malgo=v0.11.24
cache=${LLMGW_CACHE:-$HOME/.cache/llmgw}/ollama/$version
bin=$cache/bin/ollama

model() {
	CGO_ENABLED=0 go -C internal/app/testdata/ollama/gguf run . "$cache/model" >&2
	echo "$cache"
}
cd "$(dirname "$0")/.."

if [ -x "$bin" ]; then
	model
	exit 0
fi

if [ ! -e /usr/include/nlohmann/json.hpp ] || [ ! -e /usr/include/stb/stb_image.h ]; then
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -qq --no-install-recommends nlohmann-json3-dev libstb-dev g++ >&2 ||
		{ apt-get update -qq && apt-get install -y -qq --no-install-recommends nlohmann-json3-dev libstb-dev g++ >&2; }
fi

mkdir -p "$cache/include/miniaudio" "$cache/bin"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# A module of no use but to fetch malgo into the module cache.
printf 'module fetch\n\ngo 1.22\n' >"$tmp/go.mod"
malgodir=$(go -C "$tmp" mod download -json "github.com/gen2brain/malgo@$malgo" |
	sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
cp "$malgodir/miniaudio.h" "$cache/include/miniaudio/miniaudio.h"
chmod u+w "$cache/include/miniaudio/miniaudio.h"

echo "ollama.sh: building ollama $version into $cache (a few minutes)" >&2
CGO_ENABLED=1 GOBIN="$cache/bin" \
	CGO_CPPFLAGS="-I$cache/include -I/usr/include/stb ${CGO_CPPFLAGS:-}" \
	go install "github.com/ollama/ollama@$version" >&2
model
