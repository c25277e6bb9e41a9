package service

import (
	"context"
	"errors"

	"github.com/kilnhq/kiln/core"
)

// RecordReader reads sandbox records (core.Sandbox) inside a Store's
// transaction. The service owns the records; a Store keeps them by giving
// the transactions of its View this interface and those of its Update
// RecordTx, and the service finds them there by type assertion (core does
// not know the sandbox service). The records' conformance suite is
// sandbox/service/recordtest.
type RecordReader interface {
	// Sandbox returns a sandbox record (ENOTFOUND when there is none);
	// Sandboxes lists those matching q, newest first (by CreatedAt, then
	// ID).
	Sandbox(id string) (*core.Sandbox, error)
	Sandboxes(q core.SandboxQuery) ([]*core.Sandbox, error)
}

// RecordTx writes sandbox records inside a Store's Update.
type RecordTx interface {
	RecordReader

	// PutSandbox inserts or replaces a sandbox record (EINVALID without
	// an ID, an owner, a runtime or a state); DeleteSandbox removes one
	// (ENOTFOUND when there is none).
	PutSandbox(sb *core.Sandbox) error
	DeleteSandbox(id string) error
}

// storeReadTx and storeTx are a Store's transactions with the sandbox records.
type (
	storeReadTx interface {
		core.ReadTx
		RecordReader
	}
	storeTx interface {
		core.Tx
		RecordTx
	}
)

// errNoRecords is New's error for a Store that keeps no sandbox records.
var errNoRecords = errors.New("sandbox service: the Store keeps no sandbox records (its transactions do not implement service.RecordReader and service.RecordTx)")

// errProbe rolls back checkRecords's Update.
var errProbe = errors.New("probe")

// checkRecords returns errNoRecords unless the transactions of store's
// View and Update keep sandbox records. Its Update writes nothing and
// rolls back.
func checkRecords(ctx context.Context, store core.Store) error {
	err := store.View(ctx, func(t core.ReadTx) error {
		if _, ok := t.(RecordReader); !ok {
			return errNoRecords
		}
		return nil
	})
	if err != nil {
		return err
	}
	_, err = store.Update(ctx, func(t core.Tx) error {
		if _, ok := t.(RecordTx); !ok {
			return errNoRecords
		}
		return errProbe
	})
	if errors.Is(err, errProbe) {
		return nil
	}
	return err
}

// view runs fn in a View of the Store, with the sandbox records.
func (s *Service) view(ctx context.Context, fn func(tx storeReadTx) error) error {
	return s.cfg.Store.View(ctx, func(t core.ReadTx) error {
		rt, ok := t.(storeReadTx)
		if !ok {
			return errNoRecords
		}
		return fn(rt)
	})
}

// update runs fn in an Update of the Store, with the sandbox records.
func (s *Service) update(ctx context.Context, fn func(tx storeTx) error) error {
	_, err := s.cfg.Store.Update(ctx, func(t core.Tx) error {
		wt, ok := t.(storeTx)
		if !ok {
			return errNoRecords
		}
		return fn(wt)
	})
	return err
}
