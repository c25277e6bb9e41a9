package sqlite

import (
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/internal/codec"
)

// ---- grants

const grantCols = "id, owner_id, name, path, writable, data_root, created_at"

func scanGrant(sc scanner) (*core.Grant, error) {
	var g core.Grant
	var created int64
	if err := sc.Scan(&g.ID, &g.OwnerID, &g.Name, &g.Path, &g.Writable, &g.DataRoot, &created); err != nil {
		return nil, err
	}
	g.CreatedAt = codec.DecTime(created)
	return &g, nil
}

func (x *tx) Grant(id string) (*core.Grant, error) {
	g, err := scanGrant(x.queryRow("SELECT "+grantCols+" FROM grants WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, core.Errorf(core.ENOTFOUND, "grant %q not found", id)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get grant: %w", err)
	}
	return g, nil
}

func (x *tx) Grants(ownerID string) ([]*core.Grant, error) {
	rows, err := x.query("list grants", "SELECT "+grantCols+" FROM grants WHERE owner_id = +? ORDER BY name", ownerID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*core.Grant
	for rows.Next() {
		g, err := scanGrant(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list grants: %w", err)
		}
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list grants: %w", err)
	}
	return out, nil
}

func (x *tx) PutGrant(g *core.Grant) error {
	if err := x.writable("put grant"); err != nil {
		return err
	}
	created, err := codec.EncodeGrant(g)
	if err != nil {
		return err
	}
	_, err = x.tx.ExecContext(x.ctx, `INSERT INTO grants (`+grantCols+`) VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET owner_id = excluded.owner_id, name = excluded.name, path = excluded.path,
 writable = excluded.writable, data_root = excluded.data_root, created_at = excluded.created_at`,
		g.ID, g.OwnerID, g.Name, g.Path, g.Writable, g.DataRoot, created)
	if isDuplicate(err) {
		return core.Errorf(core.ECONFLICT, "grant %q: the owner has another grant named %q", g.ID, g.Name)
	}
	if err != nil {
		return fmt.Errorf("sqlite: put grant: %w", err)
	}
	return nil
}

func (x *tx) DeleteGrant(id string) error {
	if err := x.writable("delete grant"); err != nil {
		return err
	}
	res, err := x.exec("delete grant", "DELETE FROM grants WHERE id = ?", id)
	if err != nil {
		return err
	}
	if k, _ := res.RowsAffected(); k == 0 {
		return core.Errorf(core.ENOTFOUND, "grant %q not found", id)
	}
	return nil
}

// ---- settings

func (x *tx) Settings(ownerID string) (*core.Settings, error) {
	s := &core.Settings{OwnerID: ownerID}
	var limits []byte
	var updated int64
	err := x.queryRow("SELECT prompt_addendum, limits, memory, theme, sandbox_runtime, updated_at FROM settings WHERE owner_id = ?", ownerID).
		Scan(&s.PromptAddendum, &limits, &s.Memory, &s.Theme, &s.SandboxRuntime, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, core.Errorf(core.ENOTFOUND, "owner %q has no settings", ownerID)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get settings: %w", err)
	}
	if err := codec.DecJSON(limits, &s.Limits, "settings limits"); err != nil {
		return nil, err
	}
	s.UpdatedAt = codec.DecTime(updated)
	return s, nil
}

func (x *tx) PutSettings(s *core.Settings) error {
	if err := x.writable("put settings"); err != nil {
		return err
	}
	limits, updated, err := codec.EncodeSettings(s)
	if err != nil {
		return err
	}
	_, err = x.exec("put settings", `INSERT INTO settings (owner_id, prompt_addendum, limits, memory, theme, sandbox_runtime, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (owner_id) DO UPDATE SET prompt_addendum = excluded.prompt_addendum, limits = excluded.limits,
 memory = excluded.memory, theme = excluded.theme, sandbox_runtime = excluded.sandbox_runtime, updated_at = excluded.updated_at`,
		s.OwnerID, s.PromptAddendum, limits, s.Memory, s.Theme, s.SandboxRuntime, updated)
	return err
}

// ---- attachments

const attachmentCols = `a.id, a.owner_id, ts.s, a.name, a.mime, a.size, a.sha256, a.created_at
 FROM attachments a LEFT JOIN strings ts ON ts.n = a.thread`

func scanAttachment(sc scanner) (*core.Attachment, error) {
	var a core.Attachment
	var thread sql.NullString
	var created int64
	if err := sc.Scan(&a.ID, &a.OwnerID, &thread, &a.Name, &a.MIME, &a.Size, &a.SHA256, &created); err != nil {
		return nil, err
	}
	a.ThreadID = thread.String
	a.CreatedAt = codec.DecTime(created)
	return &a, nil
}

func (x *tx) Attachment(id string) (*core.Attachment, error) {
	a, err := scanAttachment(x.queryRow("SELECT "+attachmentCols+" WHERE a.id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, core.Errorf(core.ENOTFOUND, "attachment %q not found", id)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get attachment: %w", err)
	}
	return a, nil
}

func (x *tx) Attachments(q core.AttachmentQuery) ([]*core.Attachment, error) {
	if q == (core.AttachmentQuery{}) {
		return nil, core.Errorf(core.EINVALID, "attachment query needs an owner, a thread or a sha256")
	}
	var b strings.Builder
	var args []any
	b.WriteString("SELECT " + attachmentCols + " WHERE 1")
	if q.ThreadID != "" {
		b.WriteString(" AND a.thread = (SELECT n FROM strings WHERE s = ?)")
		args = append(args, q.ThreadID)
	}
	if q.SHA256 != "" {
		b.WriteString(" AND a.sha256 = +?")
		args = append(args, q.SHA256)
	}
	if q.OwnerID != "" {
		b.WriteString(" AND a.owner_id = +?")
		args = append(args, q.OwnerID)
	}
	b.WriteString(" ORDER BY a.created_at, a.id")
	rows, err := x.query("list attachments", b.String(), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*core.Attachment
	for rows.Next() {
		a, err := scanAttachment(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list attachments: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list attachments: %w", err)
	}
	return out, nil
}

func (x *tx) PutAttachment(a *core.Attachment) error {
	if err := x.writable("put attachment"); err != nil {
		return err
	}
	created, err := codec.EncodeAttachment(a)
	if err != nil {
		return err
	}
	var thread any // NULL: no thread yet
	if a.ThreadID != "" {
		if thread, err = x.mustFind("thread", a.ThreadID); err != nil {
			return err
		}
	}
	_, err = x.tx.ExecContext(x.ctx, `INSERT INTO attachments (id, owner_id, thread, name, mime, size, sha256, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET owner_id = excluded.owner_id, thread = excluded.thread, name = excluded.name,
 mime = excluded.mime, size = excluded.size, sha256 = excluded.sha256, created_at = excluded.created_at`,
		a.ID, a.OwnerID, thread, a.Name, a.MIME, a.Size, a.SHA256, created)
	if isForeignKey(err) {
		return core.Errorf(core.ENOTFOUND, "attachment %q: thread %q not found", a.ID, a.ThreadID)
	}
	if err != nil {
		return fmt.Errorf("sqlite: put attachment: %w", err)
	}
	return nil
}

func (x *tx) DeleteAttachment(id string) error {
	if err := x.writable("delete attachment"); err != nil {
		return err
	}
	res, err := x.exec("delete attachment", "DELETE FROM attachments WHERE id = ?", id)
	if err != nil {
		return err
	}
	if k, _ := res.RowsAffected(); k == 0 {
		return core.Errorf(core.ENOTFOUND, "attachment %q not found", id)
	}
	return nil
}

// ---- virtual files

// fileCols are a version's columns without its data, which comes last
// when asked for.
const fileCols = "f.path, f.seq, f.size, rs.s, f.deleted, f.updated_at"

func scanFile(sc scanner, threadID string, withData bool) (*core.File, error) {
	f := &core.File{ThreadID: threadID}
	var run sql.NullString
	var updated int64
	dest := []any{&f.Path, &f.Seq, &f.Size, &run, &f.Deleted, &updated}
	if withData {
		dest = append(dest, &f.Data)
	}
	if err := sc.Scan(dest...); err != nil {
		return nil, err
	}
	f.RunID = run.String
	f.UpdatedAt = codec.DecTime(updated)
	return f, nil
}

func (x *tx) File(threadID, path string) (*core.File, error) {
	f, err := scanFile(x.queryRow("SELECT "+fileCols+", f.data FROM files f LEFT JOIN strings rs ON rs.n = f.run"+
		" WHERE f.thread = (SELECT n FROM strings WHERE s = ?) AND f.path = ? ORDER BY f.seq DESC LIMIT 1",
		threadID, path), threadID, true)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && f.Deleted) {
		return nil, core.Errorf(core.ENOTFOUND, "file %q of thread %q not found", path, threadID)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get file: %w", err)
	}
	return f, nil
}

// Files finds, for each path of the thread, the highest seq up to upTo in
// one pass over the (thread, path, seq) index, then reads those versions
// and drops deletions. Without data it reads no overflow pages. The rows
// are sorted here, not by an ORDER BY: SQLite does not know the grouped
// paths come in order and would copy every row, data and all, into a
// temporary b-tree (Go compares strings bytewise, as SQLite's BINARY
// collation does).
func (x *tx) Files(threadID string, upTo int, withData bool) ([]*core.File, error) {
	cols := fileCols
	if withData {
		cols += ", f.data"
	}
	rows, err := x.query("list files", "SELECT "+cols+` FROM
 (SELECT thread, path, max(seq) AS seq FROM files
  WHERE thread = (SELECT n FROM strings WHERE s = ?1) AND (?2 < 0 OR seq <= ?2) GROUP BY path) v
 CROSS JOIN files f ON f.thread = v.thread AND f.path = v.path AND f.seq = v.seq
 LEFT JOIN strings rs ON rs.n = f.run
WHERE NOT f.deleted`, threadID, upTo)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*core.File
	for rows.Next() {
		f, err := scanFile(rows, threadID, withData)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list files: %w", err)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list files: %w", err)
	}
	slices.SortFunc(out, func(a, b *core.File) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

func (x *tx) FileVersions(threadID string, upTo int) ([]*core.File, error) {
	rows, err := x.query("list file versions", "SELECT "+fileCols+`, f.data FROM files f
 LEFT JOIN strings rs ON rs.n = f.run
WHERE f.thread = (SELECT n FROM strings WHERE s = ?) AND f.seq <= ? ORDER BY f.path, f.seq`, threadID, upTo)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*core.File
	for rows.Next() {
		f, err := scanFile(rows, threadID, true)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list file versions: %w", err)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list file versions: %w", err)
	}
	return out, nil
}

func (x *tx) PutFile(f *core.File) error {
	if err := x.writable("put file"); err != nil {
		return err
	}
	updated, err := codec.EncodeFile(f)
	if err != nil {
		return err
	}
	thread, err := x.mustFind("thread", f.ThreadID)
	if err != nil {
		return err
	}
	run, err := x.internOpt(f.RunID)
	if err != nil {
		return err
	}
	_, err = x.tx.ExecContext(x.ctx, `INSERT INTO files (thread, path, seq, size, run, deleted, updated_at, data)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (thread, path, seq) DO UPDATE SET size = excluded.size, run = excluded.run,
 deleted = excluded.deleted, updated_at = excluded.updated_at, data = excluded.data`,
		thread, f.Path, f.Seq, f.Size, run, f.Deleted, updated, f.Data)
	if isForeignKey(err) {
		return core.Errorf(core.ENOTFOUND, "file %q: thread %q not found", f.Path, f.ThreadID)
	}
	if err != nil {
		return fmt.Errorf("sqlite: put file: %w", err)
	}
	return nil
}
