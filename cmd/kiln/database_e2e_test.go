package main

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/postgres/pgtest"
)

// TestDatabasePasswordStaysSecret: the password of KILN_DATABASE reaches
// neither the server's logs nor its answers, whether the database is
// reached or not.
func TestDatabasePasswordStaysSecret(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds and runs kiln serve")
	}
	const secret = "db-pass-9f3c1e77"
	u, err := url.Parse(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), secret) // the test cluster trusts its socket: any password does
	data := t.TempDir()
	srv := startProc(t, procAddr(t), data, "KILN_DATABASE="+u.String())
	c := srv.client()
	ctx := context.Background()
	th, err := c.CreateThread(ctx, core.ThreadInput{Title: "on postgres"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.GetThread(ctx, th.ID); err != nil || got.Title != "on postgres" {
		t.Fatalf("thread read back: %+v, %v", got, err)
	}
	if st, err := c.Status(ctx); err != nil || st.Search != "postgres" {
		t.Fatalf("status on PostgreSQL: %+v, %v; want search postgres", st, err)
	}
	srv.kill()
	logs, _ := os.ReadFile(filepath.Join(data, "logs", "kiln.log"))
	for what, text := range map[string]string{"stderr": srv.logs.String(), "the log file": string(logs)} {
		if strings.Contains(text, secret) {
			t.Errorf("%s holds the database password:\n%s", what, text)
		}
	}
	if !strings.Contains(string(logs), `"backend":"postgres"`) {
		t.Errorf("the log does not say the database is PostgreSQL:\n%s", logs)
	}

	// A database that cannot be reached: kiln serve stops, saying so,
	// without the password.
	bin, err := buildKiln()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--addr", procAddr(t), "--data", t.TempDir(), "--database", "postgres://kiln:"+secret+"@127.0.0.1:1/kiln?connect_timeout=5")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatal("kiln serve started without its database")
	}
	if strings.Contains(string(out), secret) || !strings.Contains(string(out), "open database") {
		t.Errorf("kiln serve without its database said:\n%s", out)
	}
}
