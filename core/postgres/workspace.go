package postgres

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/internal/codec"
)

const grantCols = "id, owner_id, name, path, writable, data_root, created_at"

func scanGrant(r pgx.Row) (*core.Grant, error) {
	var g core.Grant
	var created int64
	if err := r.Scan(&g.ID, &g.OwnerID, &g.Name, &g.Path, &g.Writable, &g.DataRoot, &created); err != nil {
		return nil, err
	}
	g.CreatedAt = codec.DecTime(created)
	return &g, nil
}

func (x *tx) Grant(id string) (*core.Grant, error) {
	return one(x, "get grant", "grant \""+id+"\" not found", "SELECT "+grantCols+" FROM grants WHERE id = $1", []any{id}, scanGrant)
}

func (x *tx) Grants(ownerID string) ([]*core.Grant, error) {
	return list(x, "list grants", "SELECT "+grantCols+" FROM grants WHERE owner_id = $1 ORDER BY name", []any{ownerID}, scanGrant)
}

func (x *tx) PutGrant(g *core.Grant) error {
	if err := x.writable("put grant"); err != nil {
		return err
	}
	created, err := codec.EncodeGrant(g)
	if err != nil {
		return err
	}
	_, err = x.guarded(`INSERT INTO grants (`+grantCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (id) DO UPDATE SET owner_id = excluded.owner_id, name = excluded.name, path = excluded.path,
 writable = excluded.writable, data_root = excluded.data_root, created_at = excluded.created_at`,
		g.ID, g.OwnerID, g.Name, g.Path, g.Writable, g.DataRoot, created)
	if isCode(err, uniqueViolation) {
		return core.Errorf(core.ECONFLICT, "grant %q: the owner has another grant named %q", g.ID, g.Name)
	}
	if err != nil {
		return fmt.Errorf("postgres: put grant: %w", err)
	}
	return nil
}

func (x *tx) DeleteGrant(id string) error {
	return x.deleteByID("grant", "grants", id)
}

// deleteByID deletes the row of table with id; ENOTFOUND names it as
// kind when there is none.
func (x *tx) deleteByID(kind, table, id string) error {
	if err := x.writable("delete " + kind); err != nil {
		return err
	}
	tag, err := x.exec("delete "+kind, "DELETE FROM "+table+" WHERE id = $1", id)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return core.Errorf(core.ENOTFOUND, "%s %q not found", kind, id)
	}
	return nil
}

const attachmentCols = "id, owner_id, thread_id, name, mime, size, sha256, created_at"

func scanAttachment(r pgx.Row) (*core.Attachment, error) {
	var a core.Attachment
	var thread *string
	var created int64
	if err := r.Scan(&a.ID, &a.OwnerID, &thread, &a.Name, &a.MIME, &a.Size, &a.SHA256, &created); err != nil {
		return nil, err
	}
	a.ThreadID, a.CreatedAt = str(thread), codec.DecTime(created)
	return &a, nil
}

func (x *tx) Attachment(id string) (*core.Attachment, error) {
	return one(x, "get attachment", "attachment \""+id+"\" not found", "SELECT "+attachmentCols+" FROM attachments WHERE id = $1", []any{id}, scanAttachment)
}

func (x *tx) Attachments(q core.AttachmentQuery) ([]*core.Attachment, error) {
	if q == (core.AttachmentQuery{}) {
		return nil, core.Errorf(core.EINVALID, "attachment query needs an owner, a thread or a sha256")
	}
	var p params
	var b strings.Builder
	b.WriteString("SELECT " + attachmentCols + " FROM attachments WHERE true")
	for _, f := range []struct{ col, v string }{{"thread_id", q.ThreadID}, {"sha256", q.SHA256}, {"owner_id", q.OwnerID}} {
		if f.v != "" {
			b.WriteString(" AND " + f.col + " = " + p.add(f.v))
		}
	}
	b.WriteString(" ORDER BY created_at, id")
	return list(x, "list attachments", b.String(), p, scanAttachment)
}

func (x *tx) PutAttachment(a *core.Attachment) error {
	if err := x.writable("put attachment"); err != nil {
		return err
	}
	created, err := codec.EncodeAttachment(a)
	if err != nil {
		return err
	}
	_, err = x.guarded(`INSERT INTO attachments (`+attachmentCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (id) DO UPDATE SET owner_id = excluded.owner_id, thread_id = excluded.thread_id, name = excluded.name,
 mime = excluded.mime, size = excluded.size, sha256 = excluded.sha256, created_at = excluded.created_at`,
		a.ID, a.OwnerID, codec.NullText(a.ThreadID), a.Name, a.MIME, a.Size, a.SHA256, created)
	if isCode(err, foreignKeyViolation) {
		return core.Errorf(core.ENOTFOUND, "attachment %q: thread %q not found", a.ID, a.ThreadID)
	}
	if err != nil {
		return fmt.Errorf("postgres: put attachment: %w", err)
	}
	return nil
}

func (x *tx) DeleteAttachment(id string) error {
	return x.deleteByID("attachment", "attachments", id)
}

const fileCols = "path, seq, size, run_id, deleted, updated_at"

// scanFile scans a row of fileCols (and data, when withData).
func scanFile(threadID string, withData bool) func(pgx.Row) (*core.File, error) {
	return func(r pgx.Row) (*core.File, error) {
		f := &core.File{ThreadID: threadID}
		var run *string
		var updated int64
		dest := []any{&f.Path, &f.Seq, &f.Size, &run, &f.Deleted, &updated}
		if withData {
			dest = append(dest, &f.Data)
		}
		if err := r.Scan(dest...); err != nil {
			return nil, err
		}
		f.RunID, f.UpdatedAt = str(run), codec.DecTime(updated)
		return f, nil
	}
}

func (x *tx) File(threadID, path string) (*core.File, error) {
	missing := fmt.Sprintf("file %q of thread %q not found", path, threadID)
	f, err := one(x, "get file", missing, "SELECT "+fileCols+", data FROM files WHERE thread_id = $1 AND path = $2 ORDER BY seq DESC LIMIT 1",
		[]any{threadID, path}, scanFile(threadID, true))
	if err == nil && f.Deleted {
		return nil, core.Errorf(core.ENOTFOUND, "%s", missing)
	}
	return f, err
}

func (x *tx) Files(threadID string, upTo int, withData bool) ([]*core.File, error) {
	cols := fileCols
	if withData {
		cols += ", data"
	}
	return list(x, "list files", "SELECT "+cols+` FROM (
 SELECT DISTINCT ON (path) * FROM files WHERE thread_id = $1 AND ($2 < 0 OR seq <= $2) ORDER BY path, seq DESC) v
WHERE NOT deleted ORDER BY path`, []any{threadID, upTo}, scanFile(threadID, withData))
}

func (x *tx) FileVersions(threadID string, upTo int) ([]*core.File, error) {
	return list(x, "list file versions", "SELECT "+fileCols+", data FROM files WHERE thread_id = $1 AND seq <= $2 ORDER BY path, seq",
		[]any{threadID, upTo}, scanFile(threadID, true))
}

func (x *tx) PutFile(f *core.File) error {
	if err := x.writable("put file"); err != nil {
		return err
	}
	updated, err := codec.EncodeFile(f)
	if err != nil {
		return err
	}
	_, err = x.guarded(`INSERT INTO files (thread_id, path, seq, size, run_id, deleted, updated_at, data)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (thread_id, path, seq) DO UPDATE SET size = excluded.size, run_id = excluded.run_id,
 deleted = excluded.deleted, updated_at = excluded.updated_at, data = excluded.data`,
		f.ThreadID, f.Path, f.Seq, f.Size, codec.NullText(f.RunID), f.Deleted, updated, f.Data)
	if isCode(err, foreignKeyViolation) {
		return core.Errorf(core.ENOTFOUND, "file %q: thread %q not found", f.Path, f.ThreadID)
	}
	if err != nil {
		return fmt.Errorf("postgres: put file: %w", err)
	}
	return nil
}
