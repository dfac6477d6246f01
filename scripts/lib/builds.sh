# Shared by the scripts that compare builds. Source it from the
# repository's root with the binaries named on the command line as its
# arguments: it sets $work, a scratch directory removed at exit once every
# job left running is killed, and $bins, those binaries, or this tree's
# build when none is named.
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null; rm -rf "$work"' EXIT
bins=("$@")
if [ ${#bins[@]} -eq 0 ]; then
	go build -o "$work/llmgw" ./cmd/llmgw
	bins=("$work/llmgw")
fi
