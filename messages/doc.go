// Package messages holds the wire protocol of protoshard: every message that
// crosses nodes, as protobuf, mirroring the names of Akka's classic Cluster
// Sharding and Cluster Singleton protocols.
//
// The Go code is generated and committed. Regenerate it with
//
//	go generate ./messages
//
// which needs protoc (Debian: protobuf-compiler) and protoc-gen-go
// (go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12).
package messages

//go:generate sh ./generate.sh
