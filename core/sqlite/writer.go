package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"sync/atomic"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"
)

// writerConnector opens a Store's write connection (writerDrv) and keeps
// the one it opened last: the pool has at most one (SetMaxOpenConns(1)),
// so it is the connection commit holds.
type writerConnector struct {
	dsn  string
	last atomic.Pointer[sqlite3.SQLiteConn]
}

func (c *writerConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := writerDrv.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	c.last.Store(conn.(*sqlite3.SQLiteConn))
	return conn, nil
}

func (c *writerConnector) Driver() driver.Driver { return writerDrv }

// writeConn is what the writer's transaction runs on: database/sql's Conn
// for queries, and for statements that return no rows the driver's
// connection under it, which skips database/sql's locking and argument
// checking per call: a third of a small insert's time, and most
// statements of a step are small inserts. It is sound because commit
// holds the Conn from BEGIN to the end: the pool neither hands the
// connection to anyone else nor closes it meanwhile, and the statements
// run one at a time on commit's goroutine.
type writeConn struct {
	*sql.Conn
	raw  *sqlite3.SQLiteConn
	args []driver.NamedValue
}

// ExecContext runs query with args on the driver's connection, the args
// converted as database/sql converts them for go-sqlite3.
func (c *writeConn) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	named := c.args[:0]
	for i, a := range args {
		v, err := driverValue(a)
		if err != nil {
			return nil, fmt.Errorf("sql: converting argument $%d type: %w", i+1, err)
		}
		named = append(named, driver.NamedValue{Ordinal: i + 1, Value: v})
	}
	res, err := c.raw.ExecContext(ctx, query, named)
	clear(named) // keep no argument alive
	c.args = named[:0]
	return res, err
}

// driverValue is a as database/sql passes it to a driver that checks no
// values itself (go-sqlite3): the types every statement here uses as they
// are, any other through driver.DefaultParameterConverter.
func driverValue(a any) (driver.Value, error) {
	switch a := a.(type) {
	case nil, int64, string, bool, []byte, float64, time.Time:
		return a, nil
	case int:
		return int64(a), nil
	}
	return driver.DefaultParameterConverter.ConvertValue(a)
}
