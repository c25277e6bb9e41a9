package pluginrpc

// The generated code in toolsetpb, modelproviderpb, hostpb and
// sandboxruntimepb is committed: CI does not run protoc.
// To regenerate, install protoc (Debian: protobuf-compiler), protoc-gen-go
// at the version of google.golang.org/protobuf in go.mod, and
// protoc-gen-go-grpc, then run go generate ./sdk/plugin/pluginrpc.
//go:generate protoc -I ../../../specs/proto --go_out=toolsetpb --go_opt=paths=source_relative --go-grpc_out=toolsetpb --go-grpc_opt=paths=source_relative toolset.proto
//go:generate protoc -I ../../../specs/proto --go_out=modelproviderpb --go_opt=paths=source_relative --go-grpc_out=modelproviderpb --go-grpc_opt=paths=source_relative modelprovider.proto
//go:generate protoc -I ../../../specs/proto --go_out=hostpb --go_opt=paths=source_relative --go-grpc_out=hostpb --go-grpc_opt=paths=source_relative host.proto
//go:generate protoc -I ../../../specs/proto --go_out=sandboxruntimepb --go_opt=paths=source_relative --go-grpc_out=sandboxruntimepb --go-grpc_opt=paths=source_relative sandboxruntime.proto
