// Package jobspb holds the protobuf messages of the jobs example. The Go
// code is generated and committed; regenerate it with go generate (needs
// protoc and protoc-gen-go on PATH).
package jobspb

//go:generate protoc -I . --go_out=. --go_opt=paths=source_relative jobs.proto
