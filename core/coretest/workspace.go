package coretest

import (
	"context"
	"fmt"
	"testing"

	"github.com/kilnhq/kiln/core"
)

func testGrants(t *testing.T, s core.Store) {
	work := &core.Grant{ID: "grt_work", Name: "work", Path: "/home/alice/work ✓", Writable: true, DataRoot: true,
		OwnerID: alice, CreatedAt: at(1)}
	alpha := newGrant("grt_alpha", alice, "alpha", at(2))
	music := newGrant("grt_music", alice, "music", at(0))
	bare := &core.Grant{ID: "grt_bare", Name: "bare", OwnerID: bob}
	bobAlpha := newGrant("grt_bob_alpha", bob, "alpha", at(3)) // names are per owner
	put(t, s, work, alpha, music, bare, bobAlpha)
	view(t, s, func(tx core.ReadTx) error {
		for _, want := range []*core.Grant{work, alpha, bare} {
			got, err := tx.Grant(want.ID)
			mustNil(t, "Grant", err)
			same(t, "grant "+want.ID, got, want)
		}
		list, err := tx.Grants(alice)
		mustNil(t, "Grants", err)
		same(t, "Grants(alice)", list, []*core.Grant{alpha, music, work})
		list, err = tx.Grants(bob)
		mustNil(t, "Grants", err)
		same(t, "Grants(bob)", list, []*core.Grant{bobAlpha, bare})
		list, err = tx.Grants("usr_nobody")
		mustNil(t, "Grants", err)
		if len(list) != 0 {
			t.Errorf("Grants(nobody) = %q", grantIDs(list))
		}
		_, err = tx.Grant("grt_nope")
		wantCode(t, "Grant of an unknown ID", err, core.ENOTFOUND)
		return nil
	})

	// Put replaces the whole grant, its name too.
	renamed := &core.Grant{ID: work.ID, Name: "aardvark", Path: "/elsewhere", OwnerID: alice, CreatedAt: at(1)}
	put(t, s, renamed)
	view(t, s, func(tx core.ReadTx) error {
		got, err := tx.Grant(work.ID)
		mustNil(t, "Grant", err)
		same(t, "replaced grant", got, renamed)
		list, err := tx.Grants(alice)
		mustNil(t, "Grants", err)
		sameStrings(t, "Grants(alice) after the rename", grantIDs(list), []string{"grt_work", "grt_alpha", "grt_music"})
		return nil
	})

	// A name is its owner's once: a second grant or a rename onto it is a
	// conflict, and the failed Update keeps nothing.
	ctx := context.Background()
	_, err := s.Update(ctx, func(tx core.Tx) error {
		return tx.PutGrant(newGrant("grt_alpha2", alice, "alpha", at(4)))
	})
	wantCode(t, "PutGrant of a taken name", err, core.ECONFLICT)
	_, err = s.Update(ctx, func(tx core.Tx) error {
		if err := tx.PutGrant(newGrant("grt_new", alice, "new", at(4))); err != nil {
			return err
		}
		return tx.PutGrant(newGrant(alpha.ID, alice, "music", at(2)))
	})
	wantCode(t, "PutGrant renaming onto a taken name", err, core.ECONFLICT)
	view(t, s, func(tx core.ReadTx) error {
		list, err := tx.Grants(alice)
		mustNil(t, "Grants", err)
		same(t, "Grants(alice) after the conflicts", list, []*core.Grant{renamed, alpha, music})
		return nil
	})

	update(t, s, func(tx core.Tx) error { return tx.DeleteGrant(music.ID) })
	view(t, s, func(tx core.ReadTx) error {
		_, err := tx.Grant(music.ID)
		wantCode(t, "deleted Grant", err, core.ENOTFOUND)
		list, err := tx.Grants(alice)
		mustNil(t, "Grants", err)
		sameStrings(t, "Grants(alice) after the delete", grantIDs(list), []string{"grt_work", "grt_alpha"})
		return nil
	})
	_, err = s.Update(ctx, func(tx core.Tx) error { return tx.DeleteGrant(music.ID) })
	wantCode(t, "DeleteGrant of a deleted grant", err, core.ENOTFOUND)
	_, err = s.Update(ctx, func(tx core.Tx) error { return tx.DeleteGrant("grt_nope") })
	wantCode(t, "DeleteGrant of an unknown ID", err, core.ENOTFOUND)
	// The deleted grant's name is free again.
	again := newGrant("grt_music2", alice, "music", at(5))
	put(t, s, again)
	view(t, s, func(tx core.ReadTx) error {
		list, err := tx.Grants(alice)
		mustNil(t, "Grants", err)
		same(t, "Grants(alice) with the name reused", list, []*core.Grant{renamed, alpha, again})
		return nil
	})
}

func testSettings(t *testing.T, s core.Store) {
	view(t, s, func(tx core.ReadTx) error {
		_, err := tx.Settings(alice)
		wantCode(t, "Settings never stored", err, core.ENOTFOUND)
		return nil
	})
	full := &core.Settings{OwnerID: alice, PromptAddendum: "Answer in French. ✓\nBe brief.",
		Limits: core.Limits{MaxSteps: 12, MaxToolCalls: 30}, Memory: true, Theme: core.ThemeDark, SandboxRuntime: "bwrap", UpdatedAt: at(1)}
	put(t, s, full)
	view(t, s, func(tx core.ReadTx) error {
		got, err := tx.Settings(alice)
		mustNil(t, "Settings", err)
		same(t, "settings", got, full)
		_, err = tx.Settings(bob)
		wantCode(t, "Settings of another owner", err, core.ENOTFOUND)
		return nil
	})

	// Put replaces the whole settings; each owner has their own.
	def := core.DefaultSettings(alice)
	bobs := &core.Settings{OwnerID: bob, Theme: core.ThemeLight, Limits: core.Limits{MaxSteps: 3}, UpdatedAt: at(2)}
	put(t, s, def, bobs)
	view(t, s, func(tx core.ReadTx) error {
		got, err := tx.Settings(alice)
		mustNil(t, "Settings", err)
		same(t, "replaced settings", got, def)
		got, err = tx.Settings(bob)
		mustNil(t, "Settings", err)
		same(t, "bob's settings", got, bobs)
		return nil
	})
}

func testAttachments(t *testing.T, s core.Store) {
	t1 := newThread("thr_1", alice, at(0))
	t2 := newThread("thr_2", alice, at(0))
	tb := newThread("thr_b", bob, at(0))
	a0 := newAttachment("att_0", alice, "", "sha_3", at(2))
	a1 := newAttachment("att_1", alice, "", "sha_1", at(3))
	a2 := newAttachment("att_2", alice, t1.ID, "sha_1", at(1))
	a3 := newAttachment("att_3", alice, t1.ID, "sha_2", at(2)) // ties att_0 and att_4 on CreatedAt
	a4 := newAttachment("att_4", alice, t2.ID, "sha_2", at(2))
	ab := newAttachment("att_b", bob, tb.ID, "sha_1", at(0))
	bare := &core.Attachment{ID: "att_bare", OwnerID: bob}
	a2.Name, a2.MIME, a2.Size = "Rapport d'été.pdf", "application/pdf", 1<<40
	put(t, s, t1, t2, tb, a4, a3, a2, a1, a0, ab, bare)

	cases := []struct {
		name string
		q    core.AttachmentQuery
		want []string
	}{
		{"owner", core.AttachmentQuery{OwnerID: alice}, []string{"att_2", "att_0", "att_3", "att_4", "att_1"}},
		{"other owner", core.AttachmentQuery{OwnerID: bob}, []string{"att_bare", "att_b"}},
		{"thread", core.AttachmentQuery{ThreadID: t1.ID}, []string{"att_2", "att_3"}},
		{"sha256", core.AttachmentQuery{SHA256: "sha_1"}, []string{"att_b", "att_2", "att_1"}},
		{"sha256 and owner", core.AttachmentQuery{SHA256: "sha_1", OwnerID: alice}, []string{"att_2", "att_1"}},
		{"thread and sha256", core.AttachmentQuery{ThreadID: t1.ID, SHA256: "sha_2"}, []string{"att_3"}},
		{"thread of other owner", core.AttachmentQuery{ThreadID: tb.ID, OwnerID: alice}, nil},
		{"unknown thread", core.AttachmentQuery{ThreadID: "thr_nope"}, nil},
		{"unknown sha256", core.AttachmentQuery{SHA256: "sha_nope"}, nil},
		{"unknown owner", core.AttachmentQuery{OwnerID: "usr_nobody"}, nil},
	}
	check := func(when string) {
		view(t, s, func(tx core.ReadTx) error {
			for _, c := range cases {
				list, err := tx.Attachments(c.q)
				if err != nil {
					t.Errorf("%sAttachments(%s): %v", when, c.name, err)
					continue
				}
				sameStrings(t, when+"Attachments("+c.name+")", attachmentIDs(list), c.want)
			}
			return nil
		})
	}
	check("")
	view(t, s, func(tx core.ReadTx) error {
		for _, want := range []*core.Attachment{a0, a2, ab, bare} {
			got, err := tx.Attachment(want.ID)
			mustNil(t, "Attachment", err)
			same(t, "attachment "+want.ID, got, want)
		}
		list, err := tx.Attachments(core.AttachmentQuery{ThreadID: t2.ID})
		mustNil(t, "Attachments", err)
		same(t, "Attachments(thread 2) objects", list, []*core.Attachment{a4})
		_, err = tx.Attachment("att_nope")
		wantCode(t, "Attachment of an unknown ID", err, core.ENOTFOUND)
		_, err = tx.Attachments(core.AttachmentQuery{})
		wantCode(t, "Attachments with an empty query", err, core.EINVALID)
		return nil
	})

	// A run's input takes att_1: Put replaces the record with its thread.
	used := *a1
	used.ThreadID = t2.ID
	put(t, s, &used)
	cases = append(cases, struct {
		name string
		q    core.AttachmentQuery
		want []string
	}{"thread after use", core.AttachmentQuery{ThreadID: t2.ID}, []string{"att_4", "att_1"}})
	check("after use: ")
	view(t, s, func(tx core.ReadTx) error {
		got, err := tx.Attachment(a1.ID)
		mustNil(t, "Attachment", err)
		same(t, "used attachment", got, &used)
		return nil
	})
	ctx := context.Background()
	_, err := s.Update(ctx, func(tx core.Tx) error {
		return tx.PutAttachment(newAttachment("att_x", alice, "thr_nope", "sha_1", at(9)))
	})
	wantCode(t, "PutAttachment on an unknown thread", err, core.ENOTFOUND)

	update(t, s, func(tx core.Tx) error { return tx.DeleteAttachment(a3.ID) })
	view(t, s, func(tx core.ReadTx) error {
		_, err := tx.Attachment(a3.ID)
		wantCode(t, "deleted Attachment", err, core.ENOTFOUND)
		list, err := tx.Attachments(core.AttachmentQuery{ThreadID: t1.ID})
		mustNil(t, "Attachments", err)
		sameStrings(t, "Attachments(thread) after the delete", attachmentIDs(list), []string{"att_2"})
		list, err = tx.Attachments(core.AttachmentQuery{SHA256: "sha_2"})
		mustNil(t, "Attachments", err)
		sameStrings(t, "Attachments(sha256) after the delete", attachmentIDs(list), []string{"att_4"})
		return nil
	})
	_, err = s.Update(ctx, func(tx core.Tx) error { return tx.DeleteAttachment(a3.ID) })
	wantCode(t, "DeleteAttachment of a deleted attachment", err, core.ENOTFOUND)
	_, err = s.Update(ctx, func(tx core.Tx) error { return tx.DeleteAttachment("att_nope") })
	wantCode(t, "DeleteAttachment of an unknown ID", err, core.ENOTFOUND)
}

func testFiles(t *testing.T, s core.Store) {
	t1 := newThread("thr_1", alice, at(0))
	t2 := newThread("thr_2", alice, at(0))
	r := newRun("run_1", t1.ID, alice, core.RunRunning, at(0))
	a1 := newFile(t1.ID, "/a.md", 1, "a at 1", at(1))
	a3 := newFile(t1.ID, "/a.md", 3, "a at 3, longer", at(3))
	a5 := newFile(t1.ID, "/a.md", 5, "a at 5 ✓", at(5))
	a5.RunID = r.ID
	b2 := newFile(t1.ID, "/b.md", 2, "b at 2", at(2))
	b4 := deletedFile(t1.ID, "/b.md", 4, at(4))
	d4 := newFile(t1.ID, "/c/d.txt", 4, "d at 4", at(4))
	d6 := deletedFile(t1.ID, "/c/d.txt", 6, at(6))
	d8 := newFile(t1.ID, "/c/d.txt", 8, "d again at 8", at(8))
	z0 := newFile(t1.ID, "/z.bin", 0, "\x00\xff\x00binary", at(0))
	other := newFile(t2.ID, "/a.md", 1, "another thread's a", at(1))
	// Put out of order: the latest version is the highest Seq, not the last put.
	put(t, s, t1, t2, r, d8, a5, z0, b4, a3, d6, other, b2, a1, d4)

	view(t, s, func(tx core.ReadTx) error {
		for _, want := range []*core.File{a5, d8, z0, other} {
			got, err := tx.File(want.ThreadID, want.Path)
			mustNil(t, "File", err)
			same(t, "File "+want.ThreadID+want.Path, got, want)
		}
		_, err := tx.File(t1.ID, "/b.md")
		wantCode(t, "File deleted by its latest version", err, core.ENOTFOUND)
		_, err = tx.File(t1.ID, "/nope")
		wantCode(t, "File of an unknown path", err, core.ENOTFOUND)
		_, err = tx.File(t2.ID, "/z.bin")
		wantCode(t, "File of another thread", err, core.ENOTFOUND)
		_, err = tx.File("thr_nope", "/a.md")
		wantCode(t, "File of an unknown thread", err, core.ENOTFOUND)

		// Files as of each number of messages: what a fork at that point sees.
		for _, c := range []struct {
			upTo int
			want []*core.File
		}{
			{-1, []*core.File{a5, d8, z0}},
			{0, []*core.File{z0}},
			{1, []*core.File{a1, z0}},
			{2, []*core.File{a1, b2, z0}},
			{3, []*core.File{a3, b2, z0}},
			{4, []*core.File{a3, d4, z0}},
			{5, []*core.File{a5, d4, z0}},
			{6, []*core.File{a5, z0}},
			{7, []*core.File{a5, z0}},
			{8, []*core.File{a5, d8, z0}},
			{1000, []*core.File{a5, d8, z0}},
		} {
			list, err := tx.Files(t1.ID, c.upTo, true)
			mustNil(t, "Files", err)
			same(t, fmt.Sprintf("Files(upTo %d)", c.upTo), list, c.want)
			list, err = tx.Files(t1.ID, c.upTo, false)
			mustNil(t, "Files", err)
			var bare []*core.File
			for _, f := range c.want {
				g := *f
				g.Data = nil
				bare = append(bare, &g)
			}
			same(t, fmt.Sprintf("Files(upTo %d) without data", c.upTo), list, bare)
		}
		// Every version up to a point, deletions included, by path then Seq.
		vs, err := tx.FileVersions(t1.ID, 4)
		mustNil(t, "FileVersions", err)
		same(t, "FileVersions(upTo 4)", vs, []*core.File{a1, a3, b2, b4, d4, z0})
		vs, err = tx.FileVersions(t2.ID, 1000)
		mustNil(t, "FileVersions", err)
		same(t, "FileVersions(thread 2)", vs, []*core.File{other})
		list, err := tx.Files(t2.ID, -1, true)
		mustNil(t, "Files", err)
		same(t, "Files(thread 2)", list, []*core.File{other})
		list, err = tx.Files("thr_nope", -1, true)
		if len(list) != 0 || (err != nil && !core.IsNotFound(err)) {
			t.Errorf("Files of an unknown thread = %q, %v; want none", filePaths(list), err)
		}
		return nil
	})

	// A version of the same path and Seq is replaced; the others stay.
	a5b := newFile(t1.ID, "/a.md", 5, "a at 5, rewritten in the same step", at(6))
	put(t, s, a5b)
	view(t, s, func(tx core.ReadTx) error {
		got, err := tx.File(t1.ID, "/a.md")
		mustNil(t, "File", err)
		same(t, "replaced version", got, a5b)
		list, err := tx.Files(t1.ID, 4, true)
		mustNil(t, "Files", err)
		same(t, "Files(upTo 4) after the replace", list, []*core.File{a3, d4, z0})
		return nil
	})

	// A failing Update keeps none of its versions.
	ctx := context.Background()
	_, err := s.Update(ctx, func(tx core.Tx) error {
		for _, f := range []*core.File{
			newFile(t1.ID, "/a.md", 9, "never", at(9)),
			deletedFile(t1.ID, "/z.bin", 9, at(9)),
			newFile(t1.ID, "/new.md", 9, "never", at(9)),
		} {
			if err := tx.PutFile(f); err != nil {
				return err
			}
		}
		return errBoom
	})
	if err != errBoom {
		t.Fatalf("failing Update returned %v, want fn's error", err)
	}
	view(t, s, func(tx core.ReadTx) error {
		list, err := tx.Files(t1.ID, -1, true)
		mustNil(t, "Files", err)
		same(t, "Files after a failed Update", list, []*core.File{a5b, d8, z0})
		return nil
	})

	_, err = s.Update(ctx, func(tx core.Tx) error { return tx.PutFile(newFile("thr_nope", "/a.md", 1, "x", at(1))) })
	wantCode(t, "PutFile on an unknown thread", err, core.ENOTFOUND)
}
