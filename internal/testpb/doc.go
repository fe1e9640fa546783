// Package testpb holds the protobuf messages of protoshard's tests and
// examples. Regenerate with `go generate ./internal/testpb`.
package testpb

//go:generate sh -c "protoc -I . --go_out=. --go_opt=paths=source_relative test.proto"
