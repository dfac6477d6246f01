#!/usr/bin/env bash
# Fetches the console's chart library from npm at its pinned version,
# checks the package against its pinned integrity and the file against its
# pinned SHA-256, and writes it beside this script. The file is committed:
# building or running llmgw needs neither this script nor Node.js.
# Run it to change the version, with the new pins.
set -euo pipefail
cd "$(dirname "$0")"

package=chart.js
version=4.6.1
integrity=sha512-hJyniucsFmq//EvXYvJ6c6mahPoI3kaxdjVH8awTaJ/fDNWeSqqqArixMJWkWNN6fcYvPU3HneSANFNYtRi61g==
file=chart.umd.min.js
sha256=fae96e55c6daa9ea7b3f60b6e6ea153904f510f6e00f59ed5ba3be21df231cd2

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tgz=$(npm pack "$package@$version" --pack-destination "$tmp" --silent)
got="sha512-$(openssl dgst -sha512 -binary "$tmp/$tgz" | base64 -w0)"
if [ "$got" != "$integrity" ]; then
	echo "vendor.sh: $package@$version has integrity $got, want $integrity" >&2
	exit 1
fi
tar -xzf "$tmp/$tgz" -C "$tmp" "package/dist/$file" package/LICENSE.md
# The source map is not served: drop the comment that would ask for it.
sed '$ s|//# sourceMappingURL=.*$||' "$tmp/package/dist/$file" >"$tmp/$file"
got=$(sha256sum "$tmp/$file" | cut -d' ' -f1)
if [ "$got" != "$sha256" ]; then
	echo "vendor.sh: $file of $package@$version has SHA-256 $got, want $sha256" >&2
	exit 1
fi
mv "$tmp/$file" "$file"
cp "$tmp/package/LICENSE.md" chart.js.LICENSE.md
echo "vendor.sh: $file from $package@$version"
