package main

import (
	"testing"

	"github.com/kilnhq/kiln/core/postgres/pgtest"
)

// TestMain stops the PostgreSQL cluster the tests that run kiln serve on
// PostgreSQL start (pgtest).
func TestMain(m *testing.M) { pgtest.Main(m) }
