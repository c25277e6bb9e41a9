package sqlite

import (
	"database/sql"
	"errors"
	"fmt"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/internal/codec"
)

const folderCols = "id, owner_id, name, position, created_at, updated_at"

func scanFolder(sc scanner) (*core.Folder, error) {
	var f core.Folder
	var created, updated int64
	if err := sc.Scan(&f.ID, &f.OwnerID, &f.Name, &f.Position, &created, &updated); err != nil {
		return nil, err
	}
	f.CreatedAt = codec.DecTime(created)
	f.UpdatedAt = codec.DecTime(updated)
	return &f, nil
}

func (x *tx) Folder(id string) (*core.Folder, error) {
	f, err := scanFolder(x.queryRow("SELECT "+folderCols+" FROM folders WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, core.Errorf(core.ENOTFOUND, "folder %q not found", id)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get folder: %w", err)
	}
	return f, nil
}

func (x *tx) Folders(ownerID string) ([]*core.Folder, error) {
	rows, err := x.query("list folders", "SELECT "+folderCols+" FROM folders WHERE owner_id = +? ORDER BY position, name, id", ownerID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*core.Folder
	for rows.Next() {
		f, err := scanFolder(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list folders: %w", err)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list folders: %w", err)
	}
	return out, nil
}

func (x *tx) PutFolder(f *core.Folder) error {
	if err := x.writable("put folder"); err != nil {
		return err
	}
	created, updated, err := codec.EncodeFolder(f)
	if err != nil {
		return err
	}
	_, err = x.exec("put folder", `INSERT INTO folders (`+folderCols+`) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET owner_id = excluded.owner_id, name = excluded.name,
 position = excluded.position, created_at = excluded.created_at, updated_at = excluded.updated_at`,
		f.ID, f.OwnerID, f.Name, f.Position, created, updated)
	return err
}

func (x *tx) DeleteFolder(id string) error {
	if err := x.writable("delete folder"); err != nil {
		return err
	}
	// Threads move to no folder by ON DELETE SET NULL.
	res, err := x.exec("delete folder", "DELETE FROM folders WHERE id = ?", id)
	if err != nil {
		return err
	}
	if k, _ := res.RowsAffected(); k == 0 {
		return core.Errorf(core.ENOTFOUND, "folder %q not found", id)
	}
	return nil
}
