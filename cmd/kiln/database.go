package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"time"

	"github.com/kilnhq/kiln/cmd/kiln/internal/metrics"
	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/postgres"
	"github.com/kilnhq/kiln/core/sqlite"
)

// store is what kiln serve needs of its Store: the Store, the plugins'
// key/value namespaces and the engine's step contract.
type store interface {
	core.Store
	core.KVStore
	core.RunStore
}

// defaultSharedLeaseTTL is a run lease's TTL on PostgreSQL: the driver
// renews it every second, and the runs of a replica that died are taken
// over by another's sweep (also every second) within about 4 s.
const defaultSharedLeaseTTL = 3 * time.Second

// checkDatabase checks a --database (KILN_DATABASE) value: empty (the
// SQLite database in the data root) or a postgres:// URL. Its errors
// never repeat the value, which may hold a password.
func checkDatabase(raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" && u.Query().Get("host") == "" {
		return fmt.Errorf("KILN_DATABASE (--database) must be a postgres:// URL, e.g. postgres://kiln:secret@db.example.com:5432/kiln")
	}
	return nil
}

// openPostgres opens the PostgreSQL database dsn (a checked postgres://
// URL) names, whose password the redactor then knows; where is the URL
// without it.
func openPostgres(ctx context.Context, dsn string, red *core.Redactor, opts postgres.Options) (s *postgres.Store, where string, err error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, "", err
	}
	if pw, ok := u.User.Password(); ok {
		red.SetSecret("KILN_DATABASE", pw)
	}
	s, err = postgres.Open(ctx, dsn, opts)
	if err != nil {
		return nil, "", fmt.Errorf("open database %s: %s", u.Redacted(), red.Redact(err.Error()))
	}
	return s, u.Redacted(), nil
}

// openStore opens the PostgreSQL database cfg.Database names, whose
// password the redactor then knows, or <data>/kiln.db.
func openStore(ctx context.Context, cfg serveConfig, red *core.Redactor, met *metrics.Metrics, log *slog.Logger) (store, error) {
	if cfg.Database != "" {
		s, where, err := openPostgres(ctx, cfg.Database, red, postgres.Options{OnCommit: met.StoreCommit, OnRemoteEvent: met.EventDelivered,
			// A replica stopped inside an Update holds up the others for
			// at most about a lease (and 2 s at least).
			IdleInTransaction: max(cfg.LeaseTTL, postgres.DefaultIdleInTransaction)})
		if err != nil {
			return nil, err
		}
		log.Info("database", "backend", "postgres", "database", where)
		return s, nil
	}
	path := filepath.Join(cfg.DataRoot, "kiln.db")
	s, err := sqlite.Open(path, sqlite.Options{OnCommit: met.StoreCommit})
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	if s.SearchMode() != sqlite.SearchFTS5 {
		log.Warn("this kiln was built without SQLite full-text search (FTS5): thread and inbox search is basic (a scan, unranked); build with -tags sqlite_fts5 (make build does) for full-text search", "search", s.SearchMode())
	}
	return s, nil
}
