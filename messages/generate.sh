#!/bin/sh
# Regenerates the Go code of the .proto files in this folder.
# Needs protoc (Debian: protobuf-compiler) and protoc-gen-go on PATH
# (go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12).
set -eu
cd "$(dirname "$0")"
actor_dir="$(go list -m -f '{{.Dir}}' github.com/asynkron/protoactor-go)/actor"
PATH="$PATH:$(go env GOPATH)/bin"
protoc -I . -I "$actor_dir" \
  --go_out=. --go_opt=paths=source_relative \
  --go_opt=Mactor.proto=github.com/asynkron/protoactor-go/actor \
  envelope.proto sharding.proto singleton.proto remember.proto delivery.proto daemon.proto
