#!/usr/bin/env bash
# Builds Consul from the Go module proxy (there is no Debian package and no
# download of release binaries here) and caches the binary.
#
#   scripts/install-consul.sh            # installs into $PROTOSHARD_CACHE/bin
#
# Prints the path of the binary on its last line. A cached binary of the right
# version is reused, so only the first run pays the ~6 minute build.
set -euo pipefail

CONSUL_VERSION="${CONSUL_VERSION:-v1.20.6}"
CACHE="${PROTOSHARD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/protoshard}"
DEST="$CACHE/bin"
BIN="$DEST/consul-$CONSUL_VERSION"

# The version is read whole before it is matched: with pipefail, `version |
# grep -q` fails whenever grep exits before consul has written its last line
# (SIGPIPE), and the cached binary was rebuilt for nothing.
if [ -x "$BIN" ]; then
  have=$("$BIN" version 2>/dev/null || true)
  if [[ "$have" == *"Consul ${CONSUL_VERSION}"* ]]; then
    echo "$BIN"
    exit 0
  fi
fi

command -v go >/dev/null || { echo "install-consul: go is not on PATH" >&2; exit 1; }
mkdir -p "$DEST"
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

echo "install-consul: building Consul $CONSUL_VERSION from the Go module proxy (a few minutes)..." >&2
dir=$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "github.com/hashicorp/consul@$CONSUL_VERSION" \
  | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -n "$dir" ] && [ -d "$dir" ] || { echo "install-consul: go mod download gave no module dir" >&2; exit 1; }
cp -r "$dir" "$work/consul"
chmod -R u+w "$work/consul"
cd "$work/consul"
# The module's replace block points at sub-folders (api, sdk, ...) that are not
# in the module zip; without it the published versions of those modules are used.
awk 'BEGIN{skip=0} /^replace \($/{skip=1; next} skip && /^\)$/{skip=0; next} !skip' go.mod > go.mod.new
mv go.mod.new go.mod
sed -i '/^replace .*=> \.\//d' go.mod
GOFLAGS=-mod=mod go mod tidy >&2
GOFLAGS=-mod=mod go build -o "$BIN.tmp" . >&2
mv "$BIN.tmp" "$BIN"
"$BIN" version >&2
echo "$BIN"
