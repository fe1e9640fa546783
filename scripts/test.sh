#!/usr/bin/env bash
# The whole test suite: installs what it needs (Consul and staticcheck,
# built from the Go module proxy and cached; Chromium from apt if missing
# and run as root), then runs go vet, staticcheck and every test.
#
#   scripts/test.sh
#
# Multi-node tests start several proto.actor remotes in one process, and each
# Remote.Start replaces grpc's global logger, which the race detector flags.
# So the suite runs twice: everything without -race, then again with -race,
# where the multi-node tests skip themselves (testkit.RaceEnabled) and the
# pure and single-node tests run with the race detector, as do the tests
# whose nodes run in processes of their own (testkit.StartProcess, such as
# actorsharding's TestRouterAcrossProcesses: the router under load while
# shards move, watched by each node's race detector).
set -euo pipefail
cd "$(dirname "$0")/.."

consul_bin=$(scripts/install-consul.sh | tail -n 1)
export PROTOSHARD_CONSUL="$consul_bin"
echo "test: using Consul at $PROTOSHARD_CONSUL"

# The shard-map page of package management is tested in headless Chromium.
# It is installed only where that can work (root, with apt-get); elsewhere
# the test finds a browser on PATH or skips, and fails in CI (CI=true).
if [ -z "${PROTOSHARD_CHROMIUM:-}" ]; then
  if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq chromium || echo "test: could not install Chromium from apt"
  fi
  if command -v chromium >/dev/null 2>&1; then
    PROTOSHARD_CHROMIUM=$(command -v chromium)
    export PROTOSHARD_CHROMIUM
  fi
fi
if [ -n "${PROTOSHARD_CHROMIUM:-}" ]; then
  echo "test: using Chromium at $PROTOSHARD_CHROMIUM"
else
  echo "test: no Chromium: TestShardMapPage uses a browser on PATH or skips (fails with CI=true)"
fi

# staticcheck, at a pinned version: the one on PATH or in Go's bin folder
# when it is that version, else installed there from the Go module proxy.
staticcheck_version=0.8.2
gobin=$(go env GOBIN)
gobin=${gobin:-$(go env GOPATH | cut -d: -f1)/bin}
find_staticcheck() {
  local bin
  for bin in "$(command -v staticcheck || true)" "$gobin/staticcheck"; do
    if [ -x "$bin" ] && "$bin" -version 2>/dev/null | grep -qF "($staticcheck_version)"; then
      echo "$bin"
      return 0
    fi
  done
  return 1
}
if ! staticcheck=$(find_staticcheck); then
  echo "test: installing staticcheck v$staticcheck_version"
  GOBIN="$gobin" go install "honnef.co/go/tools/cmd/staticcheck@v$staticcheck_version"
  staticcheck=$(find_staticcheck)
fi
echo "test: using staticcheck at $staticcheck"

echo "test: go vet"
go vet ./...

echo "test: staticcheck"
"$staticcheck" ./...

echo "test: go test -race (multi-node tests in one process skip under -race)"
go test -race -count=1 -timeout 20m ./...

echo "test: go test (all tests, Consul included)"
go test -count=1 -timeout 45m ./...
