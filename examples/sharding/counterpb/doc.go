// Package counterpb holds the protobuf messages of the sharding example's
// counter entity. The Go code is generated and committed; regenerate it with
// go generate (needs protoc and protoc-gen-go on PATH).
package counterpb

//go:generate protoc -I . --go_out=. --go_opt=paths=source_relative counter.proto
