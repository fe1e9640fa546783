#!/usr/bin/env bash
# The whole test suite: installs what it needs (Consul, built from the Go
# module proxy and cached; Chromium from apt if missing), then runs every
# test.
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
if ! command -v chromium >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq chromium
fi
PROTOSHARD_CHROMIUM=$(command -v chromium)
export PROTOSHARD_CHROMIUM
echo "test: using Chromium at $PROTOSHARD_CHROMIUM"

echo "test: go vet"
go vet ./...

echo "test: go test -race (multi-node tests in one process skip under -race)"
go test -race -count=1 -timeout 20m ./...

echo "test: go test (all tests, Consul included)"
go test -count=1 -timeout 45m ./...
