package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/postgres"
	"github.com/kilnhq/kiln/core/sqlite"
	"github.com/kilnhq/kiln/sandbox/service"
)

func newMigrateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate --to postgres://…",
		Short: "Copy a data root's SQLite database into an empty PostgreSQL database",
		Long: `Copy everything <data>/kiln.db holds (threads, folders, runs, messages,
checkpoints, interrupts, the event log with its sequence numbers, grants,
attachment records, virtual files, settings, triggers and their
occurrences, sandbox records and plugins' key/value data) into an empty
PostgreSQL database, then read both back and compare them kind by kind,
by count and by SHA-256. A target that holds anything of Kiln's is
refused. The server must be stopped (the data root is locked while the
copy runs). Then start it with --database (KILN_DATABASE).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			flags := cmd.Flags()
			data := setting(flags, "data", os.Getenv("KILN_DATA_ROOT"), "")
			if data == "" {
				home, err := os.UserHomeDir()
				if err != nil {
					return fmt.Errorf("find the home directory for the default data root (set KILN_DATA_ROOT or --data): %w", err)
				}
				data = filepath.Join(home, ".kiln")
			}
			to := setting(flags, "to", "", "")
			if to == "" {
				return usageError{errors.New("--to names the PostgreSQL database: --to postgres://user:password@host:5432/db")}
			}
			if err := checkDatabase(to); err != nil {
				return usageError{err}
			}
			return migrate(cmd.Context(), data, to, cmd.OutOrStdout())
		},
	}
	cmd.Flags().String("data", "", "data directory whose kiln.db to copy (env KILN_DATA_ROOT, default ~/.kiln)")
	cmd.Flags().String("to", "", "the PostgreSQL database to copy into, a postgres:// URL")
	return cmd
}

// migrate copies data's SQLite database into the empty database to and
// checks the copy, printing what it copied.
func migrate(ctx context.Context, data, to string, out io.Writer) error {
	path := filepath.Join(data, "kiln.db")
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("no database to copy at %s: %w", path, err)
	}
	unlock, err := lockDataRoot(data)
	if err != nil {
		return err
	}
	defer unlock()
	from, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer from.Close()
	red := core.NewRedactor()
	dst, _, err := openPostgres(ctx, to, red, postgres.Options{})
	if err != nil {
		return err
	}
	defer dst.Close()
	if empty, err := dst.IsEmpty(ctx); err != nil {
		return err
	} else if !empty {
		return errors.New("the target database already holds Kiln data: kiln migrate copies into an empty one only")
	}
	owners, err := from.Owners(ctx)
	if err != nil {
		return err
	}
	namespaces, err := from.KVNamespaces(ctx)
	if err != nil {
		return err
	}
	w := walk{owners: owners, namespaces: namespaces}
	if err := w.copy(ctx, from, dst); err != nil {
		return fmt.Errorf("copy: %s", red.Redact(err.Error()))
	}
	src, err := w.digest(ctx, from)
	if err != nil {
		return err
	}
	got, err := w.digest(ctx, dst)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tCOPIED\tSHA-256\tCHECK")
	bad := 0
	for _, k := range digestKinds {
		check := "ok"
		if src[k] != got[k] {
			check, bad = fmt.Sprintf("MISMATCH (%d in the target)", got[k].n), bad+1
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", k, src[k].n, src[k].sum[:16], check)
	}
	tw.Flush()
	if bad > 0 {
		return fmt.Errorf("the copy differs from the source in %d kinds; the target is not to be used", bad)
	}
	fmt.Fprintf(out, "copied %s into PostgreSQL; start the server with --database\n", path)
	return nil
}

// walk visits a whole Store: its owners' lists, and what hangs off
// their threads, runs and triggers.
type walk struct {
	owners, namespaces []string
}

// source is what a walk reads: a Store with the key/value namespaces.
type source interface {
	core.Store
	core.KVStore
}

// pageSize is how many objects a copy writes an Update.
const pageSize = 200

// copy writes everything of from into to, each kind in an order that
// keeps references valid: folders before threads, threads before their
// runs and messages, runs before their checkpoints and interrupts.
func (w walk) copy(ctx context.Context, from source, to source) error {
	return w.visit(ctx, from, func(kind string, objs []any) error {
		if kind == "kv" {
			for _, o := range objs {
				e := o.(kvEntry)
				if err := to.KVPut(ctx, e.NS, e.Key, e.Value); err != nil {
					return err
				}
			}
			return nil
		}
		_, err := to.Update(ctx, func(tx core.Tx) error {
			for _, o := range objs {
				if err := put(tx, o); err != nil {
					return fmt.Errorf("%s: %w", kind, err)
				}
			}
			return nil
		})
		return err
	})
}

// put writes one object in tx.
func put(tx core.Tx, o any) error {
	switch v := o.(type) {
	case *core.Folder:
		return tx.PutFolder(v)
	case *core.Thread:
		return tx.PutThread(v)
	case *core.Run:
		return tx.PutRun(v)
	case *core.Message:
		return tx.AppendMessages(v)
	case *core.Checkpoint:
		return tx.PutCheckpoint(v)
	case *core.Interrupt:
		return tx.PutInterrupt(v)
	case core.Event:
		last, err := tx.LastSeq()
		if err != nil {
			return err
		}
		if v.Seq != last+1 {
			return fmt.Errorf("event %d would become %d: the source's log has a gap", v.Seq, last+1)
		}
		return tx.Emit(v)
	case *core.Grant:
		return tx.PutGrant(v)
	case *core.Attachment:
		return tx.PutAttachment(v)
	case *core.File:
		return tx.PutFile(v)
	case *core.Settings:
		return tx.PutSettings(v)
	case *core.Trigger:
		return tx.PutTrigger(v)
	case *core.Occurrence:
		return tx.PutOccurrence(v)
	case *core.Sandbox:
		rt, ok := tx.(service.RecordTx)
		if !ok {
			return errors.New("the target keeps no sandbox records")
		}
		return rt.PutSandbox(v)
	}
	return fmt.Errorf("cannot copy a %T", o)
}

// kvEntry is one key's value.
type kvEntry struct {
	NS, Key string
	Value   []byte
}

// digestKinds are the kinds a digest sums, in the order a copy writes
// them.
var digestKinds = []string{"folders", "threads", "runs", "messages", "checkpoints", "interrupts", "events",
	"grants", "attachments", "files", "settings", "triggers", "occurrences", "sandboxes", "kv"}

// sum is a kind's count and SHA-256 over its objects' JSON.
type sum struct {
	n   int
	sum string
}

// digest reads s whole, as a copy does, and sums each kind.
func (w walk) digest(ctx context.Context, s source) (map[string]sum, error) {
	hashes := map[string]hash.Hash{}
	counts := map[string]int{}
	for _, k := range digestKinds {
		hashes[k] = sha256.New()
	}
	err := w.visit(ctx, s, func(kind string, objs []any) error {
		for _, o := range objs {
			b, err := json.Marshal(o)
			if err != nil {
				return err
			}
			hashes[kind].Write(append(b, '\n'))
			counts[kind]++
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := map[string]sum{}
	for _, k := range digestKinds {
		out[k] = sum{n: counts[k], sum: hex.EncodeToString(hashes[k].Sum(nil))}
	}
	return out, nil
}

// visit reads s whole and hands each kind's objects to fn in pages, in
// the order digestKinds lists them.
func (w walk) visit(ctx context.Context, s source, fn func(kind string, objs []any) error) error {
	var threads []*core.Thread
	var runs []*core.Run
	var triggers []*core.Trigger
	page := func(kind string, objs []any) error {
		for len(objs) > 0 {
			n := min(len(objs), pageSize)
			if err := fn(kind, objs[:n]); err != nil {
				return err
			}
			objs = objs[n:]
		}
		return nil
	}
	read := func(f func(tx core.ReadTx) error) error { return s.View(ctx, f) }
	var objs []any
	add := func(o ...any) { objs = append(objs, o...) }
	flush := func(kind string) error {
		err := page(kind, objs)
		objs = nil
		return err
	}
	steps := []struct {
		kind string
		read func(tx core.ReadTx) error
	}{
		{"folders", func(tx core.ReadTx) error {
			for _, o := range w.owners {
				fs, err := tx.Folders(o)
				if err != nil {
					return err
				}
				for _, f := range fs {
					add(f)
				}
			}
			return nil
		}},
		{"threads", func(tx core.ReadTx) error {
			for _, o := range w.owners {
				for q := (core.ThreadQuery{OwnerID: o, Limit: 500}); ; {
					ts, next, err := tx.Threads(q)
					if err != nil {
						return err
					}
					for _, t := range ts {
						threads = append(threads, t)
						add(t)
					}
					if next == "" {
						break
					}
					q.Cursor = next
				}
			}
			return nil
		}},
		{"runs", func(tx core.ReadTx) error {
			for q := (core.RunQuery{Limit: 500}); ; {
				rs, next, err := tx.Runs(q)
				if err != nil {
					return err
				}
				for _, r := range rs {
					runs = append(runs, r)
					add(r)
				}
				if next == "" {
					return nil
				}
				q.Cursor = next
			}
		}},
		{"messages", func(tx core.ReadTx) error {
			for _, t := range threads {
				ms, err := tx.Messages(t.ID, 0, 0)
				if err != nil {
					return err
				}
				for _, m := range ms {
					add(m)
				}
			}
			return nil
		}},
		{"checkpoints", func(tx core.ReadTx) error {
			for _, r := range runs {
				latest, err := tx.Checkpoint(r.ID, 0)
				if core.IsNotFound(err) {
					continue
				}
				if err != nil {
					return err
				}
				for v := 1; v <= latest.Version; v++ {
					c, err := tx.Checkpoint(r.ID, v)
					if core.IsNotFound(err) {
						continue
					}
					if err != nil {
						return err
					}
					add(c)
				}
			}
			return nil
		}},
		{"interrupts", func(tx core.ReadTx) error {
			is, err := tx.Interrupts(core.InterruptQuery{})
			for _, i := range is {
				add(i)
			}
			return err
		}},
		{"events", func(tx core.ReadTx) error {
			for after := int64(0); ; {
				evs, err := tx.Events(core.EventQuery{After: after, Limit: 500})
				if err != nil || len(evs) == 0 {
					return err
				}
				for _, e := range evs {
					add(e)
				}
				after = evs[len(evs)-1].Seq
			}
		}},
		{"grants", func(tx core.ReadTx) error {
			for _, o := range w.owners {
				gs, err := tx.Grants(o)
				if err != nil {
					return err
				}
				for _, g := range gs {
					add(g)
				}
			}
			return nil
		}},
		{"attachments", func(tx core.ReadTx) error {
			for _, o := range w.owners {
				as, err := tx.Attachments(core.AttachmentQuery{OwnerID: o})
				if err != nil {
					return err
				}
				for _, a := range as {
					add(a)
				}
			}
			return nil
		}},
		{"files", func(tx core.ReadTx) error {
			for _, t := range threads {
				fs, err := tx.FileVersions(t.ID, math.MaxInt32)
				if err != nil {
					return err
				}
				for _, f := range fs {
					add(f)
				}
			}
			return nil
		}},
		{"settings", func(tx core.ReadTx) error {
			for _, o := range w.owners {
				st, err := tx.Settings(o)
				if core.IsNotFound(err) {
					continue
				}
				if err != nil {
					return err
				}
				add(st)
			}
			return nil
		}},
		{"triggers", func(tx core.ReadTx) error {
			trs, err := tx.Triggers(core.TriggerQuery{})
			for _, tr := range trs {
				triggers = append(triggers, tr)
				add(tr)
			}
			return err
		}},
		{"occurrences", func(tx core.ReadTx) error {
			for _, tr := range triggers {
				for q := (core.OccurrenceQuery{TriggerID: tr.ID, Limit: 500}); ; {
					os, err := tx.Occurrences(q)
					if err != nil {
						return err
					}
					// Newest first: written oldest first.
					for i := len(os) - 1; i >= 0; i-- {
						add(os[i])
					}
					if len(os) < q.Limit {
						break
					}
					before := os[len(os)-1].ScheduledAt
					q.Before = &before
				}
			}
			return nil
		}},
		{"sandboxes", func(tx core.ReadTx) error {
			rr, ok := tx.(service.RecordReader)
			if !ok {
				return nil
			}
			sbs, err := rr.Sandboxes(core.SandboxQuery{})
			for i := len(sbs) - 1; i >= 0; i-- {
				add(sbs[i])
			}
			return err
		}},
	}
	for _, st := range steps {
		if err := read(func(tx core.ReadTx) error { objs = nil; return st.read(tx) }); err != nil {
			return fmt.Errorf("read %s: %w", st.kind, err)
		}
		if err := flush(st.kind); err != nil {
			return err
		}
	}
	for _, ns := range w.namespaces {
		for after := ""; ; {
			keys, err := s.KVList(ctx, ns, "", after, 0)
			if err != nil {
				return err
			}
			for _, k := range keys {
				v, _, err := s.KVGet(ctx, ns, k)
				if err != nil {
					return err
				}
				add(kvEntry{ns, k, v})
			}
			if err := flush("kv"); err != nil {
				return err
			}
			if len(keys) < core.MaxKVList {
				break
			}
			after = keys[len(keys)-1]
		}
	}
	return nil
}
