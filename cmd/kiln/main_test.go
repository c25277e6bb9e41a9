package main

import (
	"context"
	"os"
	"testing"
)

// TestMain lets the test binary stand in for kiln when a server started
// in-process re-executes it as a built-in plugin ("__plugin ID").
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == builtinPluginCmd {
		os.Exit(execute(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}
