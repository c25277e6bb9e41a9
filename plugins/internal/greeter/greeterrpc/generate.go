// Package greeterrpc is the wire protocol of the test-only "greeter" kind
// (greeter.proto), shared by its host package (plugins/internal/greeter)
// and its guest (testdata/guest): the generated messages and service,
// and the kind's go-plugin plugin.
//
// The generated code is committed; to regenerate it, see
// sdk/plugin/pluginrpc/generate.go and run go generate here.
package greeterrpc

//go:generate protoc -I . --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative greeter.proto
