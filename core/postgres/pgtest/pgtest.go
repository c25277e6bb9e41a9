// Package pgtest gives tests a real PostgreSQL: a throw-away cluster that
// the first test asking for one starts (initdb and pg_ctl, in a temporary
// folder, listening on a unix socket there and on no TCP port) and Main
// stops, or the server KILN_TEST_POSTGRES names. Each test gets a schema
// of its own, dropped when it ends, so tests do not see each other's
// tables and need no database of their own.
//
// Without PostgreSQL's programs a test skips, saying what to install,
// unless KILN_REQUIRE_POSTGRES=1 (make test sets it; make deps installs
// Debian's postgresql) makes it fail instead.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Environment variables.
const (
	// RequireEnv, set to 1, makes a test fail rather than skip when no
	// PostgreSQL can be started.
	RequireEnv = "KILN_REQUIRE_POSTGRES"
	// DSNEnv names a running server (a connection string pgx takes) to
	// use instead of a throw-away cluster. Its user must be able to
	// create schemas in its database.
	DSNEnv = "KILN_TEST_POSTGRES"
	// BinEnv names the folder of initdb and pg_ctl, when they are neither
	// under /usr/lib/postgresql/<version>/bin nor on PATH.
	BinEnv = "KILN_POSTGRES_BIN"
)

var (
	once    sync.Once
	server  string // the admin connection string
	cluster *throwAway
	failure error
)

// Main runs m and then stops the cluster a test started. A package whose
// tests use DSN calls it from TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	if cluster != nil {
		cluster.stop()
	}
	os.Exit(code)
}

// DSN returns the connection string of a new, empty schema (its
// search_path) on the test server, which is dropped when tb ends: a
// postgres:// URL, as kiln serve --database takes, unless KILN_TEST_POSTGRES
// is in key=value form. It
// skips tb when there is no PostgreSQL (fails it with RequireEnv=1).
func DSN(tb testing.TB) string {
	tb.Helper()
	once.Do(func() {
		if dsn := os.Getenv(DSNEnv); dsn != "" {
			server = dsn
			return
		}
		cluster, failure = start()
		if failure == nil {
			server = cluster.dsn
		}
	})
	if failure != nil {
		if os.Getenv(RequireEnv) == "1" {
			tb.Fatalf("pgtest: %v (%s=1: install PostgreSQL, make deps does)", failure, RequireEnv)
		}
		tb.Skipf("pgtest: %v (install PostgreSQL, make deps does; %s=1 fails rather than skips)", failure, RequireEnv)
	}
	schema := "t_" + randomHex(8)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := admin(ctx, "CREATE SCHEMA "+schema); err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := admin(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			tb.Errorf("pgtest: %v", err)
		}
	})
	return withSearchPath(server, schema)
}

// Start starts a throw-away cluster outside a test (kiln-bench runs the
// benchmarks and their peers on one), as DSN's first call does: its admin
// connection string (a postgres:// URL to the database postgres, by a
// unix socket), and stop, which stops it and removes its folder.
func Start() (dsn string, stop func(), err error) {
	c, err := start()
	if err != nil {
		return "", nil, err
	}
	return c.dsn, c.stop, nil
}

// withSearchPath adds search_path=schema to dsn, in its own syntax (a URL
// or key=value pairs).
func withSearchPath(dsn, schema string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		return dsn + sep + "search_path=" + schema
	}
	return dsn + " search_path=" + schema
}

// admin runs one statement on the server's own connection string.
func admin(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// throwAway is a cluster this process started.
type throwAway struct {
	dir, bin string
	cred     *syscall.Credential
	dsn      string
}

// start makes a cluster in a new temporary folder and starts it. As root
// the cluster belongs to, and runs as, the postgres user (or nobody):
// PostgreSQL refuses to run as root.
func start() (*throwAway, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "kiln-pg-")
	if err != nil {
		return nil, err
	}
	c := &throwAway{dir: dir, bin: bin}
	if os.Geteuid() == 0 {
		if c.cred, err = unprivileged(); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		if err := os.Chown(dir, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	// The C locale orders text by bytes, as the Store's columns do
	// whatever a cluster's default is.
	if out, err := c.run("initdb", "-D", data, "-U", "kiln", "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync"); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	// No TCP port: the socket in dir is the only way in. Durability is
	// not what these tests check, so the cluster does not sync.
	opts := "-c listen_addresses='' -k " + dir + " -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
	if out, err := c.run("pg_ctl", "-D", data, "-l", filepath.Join(dir, "log"), "-o", opts, "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pg_ctl start: %v: %s%s", err, out, log)
	}
	c.dsn = "postgres://kiln@/postgres?host=" + url.QueryEscape(dir) + "&port=5432&sslmode=disable"
	return c, nil
}

// stop stops the cluster at once and removes its folder.
func (c *throwAway) stop() {
	c.run("pg_ctl", "-D", filepath.Join(c.dir, "data"), "-m", "immediate", "-w", "stop")
	os.RemoveAll(c.dir)
}

// run runs one of PostgreSQL's programs as the cluster's user.
func (c *throwAway) run(name string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(c.bin, name), args...)
	cmd.Dir = c.dir
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	return cmd.CombinedOutput()
}

// unprivileged returns the credentials of the postgres user, or of nobody.
func unprivileged() (*syscall.Credential, error) {
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 == nil && err2 == nil {
			return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
		}
	}
	return nil, errors.New("running as root, and neither a postgres nor a nobody user to run PostgreSQL as")
}

// binDir finds the folder of initdb and pg_ctl: BinEnv, the newest
// /usr/lib/postgresql/<version>/bin (Debian's), or PATH.
func binDir() (string, error) {
	if dir := os.Getenv(BinEnv); dir != "" {
		return dir, nil
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	slices.SortFunc(found, func(a, b string) int { return version(a) - version(b) })
	if len(found) > 0 {
		return filepath.Dir(found[len(found)-1]), nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("no PostgreSQL: initdb is neither under /usr/lib/postgresql/<version>/bin nor on PATH (" + BinEnv + " names its folder)")
}

// version is the major version in /usr/lib/postgresql/<version>/bin/initdb.
func version(path string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(path))))
	return n
}
