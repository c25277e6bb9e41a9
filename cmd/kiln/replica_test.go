package main

import (
	"strings"
	"testing"
)

func TestLockDataRoot(t *testing.T) {
	dir := t.TempDir()
	release, err := lockDataRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockDataRoot(dir); err == nil || !strings.Contains(err.Error(), "another kiln serve") {
		t.Fatalf("a second lock of the data root: %v", err)
	}
	release()
	again, err := lockDataRoot(dir)
	if err != nil {
		t.Fatalf("a lock after the first was released: %v", err)
	}
	again()
}

func TestReplicaID(t *testing.T) {
	dir := t.TempDir()
	id, err := replicaID(dir)
	if err != nil || id == "" {
		t.Fatalf("replicaID = %q, %v", id, err)
	}
	if again, err := replicaID(dir); err != nil || again != id {
		t.Fatalf("replicaID again = %q, %v; want %q", again, err, id)
	}
	if other, _ := replicaID(t.TempDir()); other == id {
		t.Fatalf("two data roots share the replica id %q", id)
	}
}

func TestCheckDatabase(t *testing.T) {
	for _, ok := range []string{"", "postgres://kiln:pw@db:5432/kiln", "postgresql://db/kiln?sslmode=require", "postgres://kiln@/kiln?host=/run/postgresql"} {
		if err := checkDatabase(ok); err != nil {
			t.Errorf("checkDatabase(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"mysql://kiln:hunter2@db/kiln", "host=db password=hunter2", "postgres://", "/var/lib/kiln.db", "postgres://kiln:hunter2@%zz"} {
		err := checkDatabase(bad)
		if err == nil {
			t.Errorf("checkDatabase(%q) accepted it", bad)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("checkDatabase's error repeats the password: %v", err)
		}
	}
}
