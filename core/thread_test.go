package core

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestSettle checks the rules of a thread's derived fields, one change at a time.
func TestSettle(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	run := func(id string, st RunStatus, msg string) *Run { return &Run{ID: id, Status: st, Error: msg} }
	idle := Thread{Status: ThreadIdle, LastMessage: "hello"}
	busy := Thread{Status: ThreadRunning, ActiveRunID: "r1", LastMessage: "do it"}
	waiting := Thread{Status: ThreadInterrupted, ActiveRunID: "r1", OpenActions: 2, LastMessage: "do it"}
	for _, tc := range []struct {
		name string
		from Thread
		c    threadChange
		want Thread
	}{
		{"a run starts", idle, threadChange{run: run("r1", RunRunning, ""), text: "do   it\nnow"},
			Thread{Status: ThreadRunning, ActiveRunID: "r1", LastMessage: "do it now"}},
		{"a run is queued behind the active one", busy, threadChange{},
			busy},
		{"a queued run is cancelled", busy, threadChange{run: run("r2", RunCancelled, "")},
			busy},
		{"the model says something", busy, threadChange{text: "Done."},
			Thread{Status: ThreadRunning, ActiveRunID: "r1", LastMessage: "Done."}},
		{"calls are held", busy, threadChange{run: run("r1", RunInterrupted, ""), actions: 2},
			waiting},
		{"one is decided", waiting, threadChange{actions: -1},
			Thread{Status: ThreadInterrupted, ActiveRunID: "r1", OpenActions: 1, LastMessage: "do it"}},
		{"the run resumes", Thread{Status: ThreadInterrupted, ActiveRunID: "r1", LastMessage: "do it"}, threadChange{run: run("r1", RunRunning, "")},
			busy},
		{"it succeeds", busy, threadChange{run: run("r1", RunSucceeded, "")},
			Thread{Status: ThreadIdle, UnreadRunID: "r1", Unread: true, LastMessage: "do it"}},
		{"it fails", busy, threadChange{run: run("r1", RunFailed, "model: rate limited")},
			Thread{Status: ThreadFailed, UnreadRunID: "r1", Unread: true, LastMessage: "Failed: model: rate limited"}},
		{"it is cancelled while waiting", waiting, threadChange{run: run("r1", RunCancelled, ""), actions: -2},
			Thread{Status: ThreadCancelled, LastMessage: "do it"}},
		{"actions never go negative", idle, threadChange{actions: -3},
			idle},
		{"it is read, and stays where it is in the lists", Thread{Status: ThreadIdle, UnreadRunID: "r1", Unread: true, LastMessage: "done", UpdatedAt: now.Add(-time.Hour)},
			threadChange{read: true}, Thread{Status: ThreadIdle, LastMessage: "done", UpdatedAt: now.Add(-time.Hour)}},
		{"it is read while another run holds it", Thread{Status: ThreadInterrupted, ActiveRunID: "r2", OpenActions: 1, UnreadRunID: "r1", Unread: true},
			threadChange{read: true}, Thread{Status: ThreadInterrupted, ActiveRunID: "r2", OpenActions: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.from
			settle(&got, tc.c, now)
			if !tc.c.read {
				tc.want.UpdatedAt = now
			}
			if got != tc.want {
				t.Errorf("settle(%+v, %+v)\n got %+v\nwant %+v", tc.from, tc.c, got, tc.want)
			}
		})
	}
}

// derivedFields are the fields of Thread that settle decides.
var derivedFields = map[string]bool{"Status": true, "ActiveRunID": true, "UnreadRunID": true, "Unread": true, "OpenActions": true, "LastMessage": true}

// derivedAllowed are the functions (file and name) that may assign a
// derived field besides settle and Derive, and the fields: the Store
// loading the stored value, and redactTx redacting the copy it stores.
var derivedAllowed = map[string][]string{
	"sqlite/threads.go scanThread": {"UnreadRunID"},
	"redacttx.go PutThread":        {"LastMessage"},
}

// TestDerivedOnlyBySettle reads core and core/sqlite and fails on any
// assignment to a thread's derived field (a Status set to a Thread*
// constant, or any other field of derivedFields) outside settle and
// Derive: a thread's derived state has one place.
func TestDerivedOnlyBySettle(t *testing.T) {
	fset := token.NewFileSet()
	var files []string
	for _, dir := range []string{".", "sqlite"} {
		m, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil || fn.Name.Name == "settle" || fn.Name.Name == "Derive" {
				continue
			}
			allowed := derivedAllowed[filepath.ToSlash(name)+" "+fn.Name.Name]
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				var lhs, rhs []ast.Expr
				switch n := n.(type) {
				case *ast.AssignStmt:
					lhs, rhs = n.Lhs, n.Rhs
				case *ast.IncDecStmt:
					lhs = []ast.Expr{n.X}
				default:
					return true
				}
				for i, e := range lhs {
					sel, ok := e.(*ast.SelectorExpr)
					if !ok || !derivedFields[sel.Sel.Name] || slices.Contains(allowed, sel.Sel.Name) {
						continue
					}
					if sel.Sel.Name == "Status" && !(len(rhs) == len(lhs) && threadConst(rhs[i])) {
						continue // a run's or an interrupt's status
					}
					t.Errorf("%s: %s sets a thread's %s by hand; settle decides it", fset.Position(sel.Pos()), fn.Name.Name, sel.Sel.Name)
				}
				return true
			})
		}
	}
	if checked < 20 {
		t.Fatalf("read %d files of core and core/sqlite; the test runs in core", checked)
	}
}

// threadConst reports whether e names a Thread* constant (ThreadIdle, ...).
func threadConst(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return strings.HasPrefix(e.Name, "Thread")
	case *ast.SelectorExpr:
		return strings.HasPrefix(e.Sel.Name, "Thread")
	}
	return false
}
