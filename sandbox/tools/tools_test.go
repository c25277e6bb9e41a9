package tools_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/sqlite"
	"github.com/kilnhq/kiln/sandbox/js"
	"github.com/kilnhq/kiln/sandbox/service"
	"github.com/kilnhq/kiln/sandbox/tools"
	"github.com/kilnhq/kiln/sandbox/wasm"
)

// setup returns the sandbox service over a real store with the wasm
// runtime (and js when withJS), and a thread of the owner's with a call
// context for it.
func setup(t *testing.T, withJS bool) (*service.Service, context.Context) {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(filepath.Join(dir, "kiln.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	s, err := service.New(service.Config{Store: st, Key: bytes.Repeat([]byte("k"), 32), Preferred: []string{"wasm"}, SkillsDir: filepath.Join(dir, "skills")})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wasm.New(wasm.Options{Dir: filepath.Join(dir, "wasm")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close(context.Background()) })
	if err := s.AddRuntime("wasm", w); err != nil {
		t.Fatal(err)
	}
	if withJS {
		j, err := js.New(js.Options{Dir: filepath.Join(dir, "js"), CacheDir: filepath.Join(dir, "cache")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { j.Close(context.Background()) })
		if err := s.AddRuntime("js", j); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	_, err = st.Update(context.Background(), func(tx core.Tx) error {
		return tx.PutThread(&core.Thread{ID: "thr_1", Title: "t", Source: core.SourceUser, OwnerID: "alice", Status: core.ThreadIdle, CreatedAt: now, UpdatedAt: now})
	})
	if err != nil {
		t.Fatal(err)
	}
	return s, core.WithCallEnv(context.Background(), &core.CallEnv{RunID: "run_1", ThreadID: "thr_1", OwnerID: "alice"})
}

func byName(ts []core.Tool) map[string]core.Tool {
	m := map[string]core.Tool{}
	for _, t := range ts {
		m[t.Spec().Name] = t
	}
	return m
}

func call(t *testing.T, ctx context.Context, tool core.Tool, args string) core.ToolResult {
	t.Helper()
	if err := core.CheckArgs(tool.Spec(), json.RawMessage(args)); err != nil {
		t.Fatalf("%s %s: the schema refuses it: %v", tool.Spec().Name, args, err)
	}
	res, err := tool.Call(ctx, json.RawMessage(args))
	if err != nil {
		t.Fatalf("%s %s: %v", tool.Spec().Name, args, err)
	}
	return res
}

func TestSandboxTools(t *testing.T) {
	s, ctx := setup(t, false)
	ts := byName(tools.Sandbox(s, nil))
	exec, read, write := ts["exec"], ts["read_file"], ts["write_file"]
	if exec.Spec().Idempotent || !read.Spec().Idempotent || !write.Spec().Idempotent {
		t.Fatal("exec must not be idempotent; the file tools must")
	}

	res := call(t, ctx, exec, `{"command":"echo hello; echo oops >&2"}`)
	if res.IsError || res.Text() != "hello\noops\n[exit code 0]" {
		t.Fatalf("echo: %+v", res)
	}
	if res := call(t, ctx, exec, `{"command":"false"}`); res.IsError || !strings.HasSuffix(res.Text(), "[exit code 1]") {
		t.Fatalf("false: %+v", res)
	}
	if res := call(t, ctx, exec, `{"command":"nosuchprogram"}`); !strings.HasSuffix(res.Text(), "[exit code 127]") {
		t.Fatalf("missing program: %+v", res)
	}

	// Files persist between calls of the thread, through both tools.
	if res := call(t, ctx, write, `{"path":"/work/notes.txt","content":"línea 1\n"}`); res.IsError || res.Text() != "wrote 9 bytes to /work/notes.txt" {
		t.Fatalf("write: %+v", res)
	}
	if res := call(t, ctx, exec, `{"command":"cat notes.txt","cwd":"/work"}`); res.Text() != "línea 1\n[exit code 0]" {
		t.Fatalf("cat in cwd: %+v", res)
	}
	if res := call(t, ctx, read, `{"path":"/work/notes.txt"}`); res.IsError || res.Text() != "línea 1\n" {
		t.Fatalf("read: %+v", res)
	}
	if res := call(t, ctx, read, `{"path":"/work/notes.txt","offset":1,"limit":3}`); res.Text() != "ín\n[3 of 9 bytes shown; read on with offset 4]" {
		t.Fatalf("read a range: %q", res.Text())
	}

	// The tool's own failures, each saying why.
	for _, c := range []struct {
		tool       core.Tool
		args, want string
	}{
		{read, `{"path":"/work/missing"}`, "no such file"},
		{read, `{"path":"/work"}`, "is a folder"},
		{read, `{"path":"work/notes.txt"}`, "absolute path"},
		{write, `{"path":"/","content":"x"}`, "is a folder"},
		{exec, `{"command":"pwd","cwd":"/nowhere"}`, "not a folder"},
		{exec, `{"command":"sleep 5","timeout_s":1}`, "killed after 1s"},
	} {
		res := call(t, ctx, c.tool, c.args)
		if !res.IsError || !strings.Contains(res.Text(), c.want) {
			t.Errorf("%s %s: %+v, want a failure saying %q", c.tool.Spec().Name, c.args, res, c.want)
		}
	}
	if err := core.CheckArgs(exec.Spec(), json.RawMessage(`{"command":"ls","shell":"bash"}`)); err == nil {
		t.Error("an unknown argument passed the schema")
	}

	// Binary files are refused, not mangled.
	rec, r, h, err := s.ForThread(ctx, "alice", "thr_1", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.WriteFile(ctx, h, "/bin.dat", bytes.NewReader([]byte{0xff, 0xfe, 0, 1}), 0); err != nil {
		t.Fatal(err)
	}
	if res := call(t, ctx, read, `{"path":"/bin.dat"}`); !res.IsError || !strings.Contains(res.Text(), "not text") {
		t.Fatalf("binary read: %+v", res)
	}

	// Every call used the thread's one sandbox.
	page, err := s.List(ctx, "alice", service.ListQuery{})
	if err != nil || page.TotalItems != 1 || page.Items[0].ID != rec.ID || page.Items[0].Metadata[service.MetaThread] != "thr_1" {
		t.Fatalf("sandboxes: %+v, %v; want the thread's one", page, err)
	}

	// Outside a thread's run the tools refuse.
	if res, err := exec.Call(context.Background(), json.RawMessage(`{"command":"true"}`)); err != nil || !res.IsError {
		t.Fatalf("exec without a run: %+v, %v", res, err)
	}
}

// TestReadFileSmallResultCap: with a server that keeps less of a result
// than MaxRead, sandbox.read_file's pages and notes fit in it, so the
// engine cuts nothing, and reading on from each note's offset gives the
// file back byte for byte.
func TestReadFileSmallResultCap(t *testing.T) {
	s, _ := setup(t, false)
	env := &core.CallEnv{RunID: "run_1", ThreadID: "thr_1", OwnerID: "alice", MaxResult: 4 << 10}
	ctx := core.WithCallEnv(context.Background(), env)
	read, write := byName(tools.Sandbox(s, nil))["read_file"], byName(tools.Sandbox(s, nil))["write_file"]
	var b strings.Builder
	for i := 0; b.Len() < 20000; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	if res := call(t, ctx, write, fmt.Sprintf(`{"path":"/work/big.txt","content":%q}`, b.String())); res.IsError {
		t.Fatalf("write: %+v", res)
	}
	note := regexp.MustCompile(`\n\[\d+ of \d+ bytes shown; read on with offset (\d+)\]$`)
	var got strings.Builder
	pages := 0
	for offset := 0; ; pages++ {
		res := call(t, ctx, read, fmt.Sprintf(`{"path":"/work/big.txt","offset":%d}`, offset))
		out := res.Text()
		if res.IsError || len(out) > env.MaxResult || core.CapText(out, env.MaxResult) != out {
			t.Fatalf("page at offset %d: %d bytes, over the %d the engine keeps (error %v)", offset, len(out), env.MaxResult, res.IsError)
		}
		m := note.FindStringSubmatch(out)
		got.WriteString(note.ReplaceAllString(out, ""))
		if m == nil {
			break
		}
		offset, _ = strconv.Atoi(m[1])
	}
	if got.String() != b.String() || pages < 5 {
		t.Errorf("read %d bytes in %d pages, want the file's %d bytes back in many", got.Len(), pages, b.Len())
	}
}

func TestExecOutput(t *testing.T) {
	s, ctx := setup(t, false)
	exec := byName(tools.Sandbox(s, nil))["exec"]

	// Long output keeps its head and its tail.
	_, r, h, err := s.ForThread(ctx, "alice", "thr_1", "")
	if err != nil {
		t.Fatal(err)
	}
	big := "BEGIN" + strings.Repeat("x", 3*tools.MaxOutput) + "END"
	if err := r.WriteFile(ctx, h, "/big.txt", strings.NewReader(big), 0); err != nil {
		t.Fatal(err)
	}
	res := call(t, ctx, exec, `{"command":"cat /big.txt"}`)
	text := res.Text()
	if !strings.HasPrefix(text, "BEGIN") || !strings.Contains(text, "END\n[exit code 0]") ||
		!strings.Contains(text, "bytes of output left out") || len(text) > tools.MaxOutput+200 {
		t.Fatalf("big output: %d bytes, head %q, tail %q", len(text), text[:20], text[len(text)-40:])
	}

	// A run that ends stops the command.
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := exec.Call(cctx, json.RawMessage(`{"command":"sleep 30"}`)); err == nil {
		t.Fatal("a cancelled call returned no error")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the command ran on for %s after its run ended", d)
	}
}

func TestJSEval(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the JavaScript guest")
	}
	s, ctx := setup(t, true)
	eval := byName(tools.JS(s))["eval"]
	if eval.Spec().Idempotent {
		t.Fatal("eval must not be idempotent")
	}
	for _, c := range []struct{ code, want string }{
		{`console.log("hi"); 6 * 7`, "hi\n42\n[exit code 0]"},
		{`const o = {a: [1, 2]}; o`, "{ a: [ 1, 2 ] }\n[exit code 0]"},
		{`Promise.resolve("later")`, "later\n[exit code 0]"},
		{`require('fs').writeFileSync('/kept.txt', 'kept'); undefined`, "[exit code 0]"},
		{`require('fs').readFileSync('/kept.txt', 'utf8')`, "kept\n[exit code 0]"},
	} {
		args, _ := json.Marshal(map[string]string{"code": c.code})
		if res := call(t, ctx, eval, string(args)); res.IsError || res.Text() != c.want {
			t.Errorf("eval %s = %q, want %q", c.code, res.Text(), c.want)
		}
	}
	res := call(t, ctx, eval, `{"code":"throw new Error('boom')"}`)
	if !strings.Contains(res.Text(), "boom") || !strings.HasSuffix(res.Text(), "[exit code 1]") {
		t.Errorf("throw: %q", res.Text())
	}
	res = call(t, ctx, eval, `{"code":"while (true) {}","timeout_s":2}`)
	if !res.IsError || !strings.Contains(res.Text(), "killed after 2s") {
		t.Errorf("infinite loop: %+v", res)
	}
	// The js sandbox is the thread's, beside its default one.
	page, _ := s.List(ctx, "alice", service.ListQuery{})
	if page.TotalItems != 1 || page.Items[0].Runtime != "js" {
		t.Fatalf("sandboxes: %+v", page.Items)
	}
}

// TestSkillSubagentCalls: a skill's subagent's commands keep to its
// command patterns, and its calls stage the skill's folder first, read-only
// at /skills/<name>/ in the thread's wasm sandbox.
func TestSkillSubagentCalls(t *testing.T) {
	s, _ := setup(t, false)
	skill := fstest.MapFS{"SKILL.md": {Data: []byte("---\nname: tally\n---\n")}, "scripts/run.sh": {Data: []byte("echo tally ran\n")}}
	ts := byName(tools.Sandbox(s, func(name string) (fs.FS, bool) { return skill, name == "tally" }))
	exec, read, write := ts["exec"], ts["read_file"], ts["write_file"]
	in := func(skill string, commands ...string) context.Context {
		return core.WithCallEnv(context.Background(), &core.CallEnv{RunID: "run_2", ThreadID: "thr_1", OwnerID: "alice", Skill: skill, Commands: commands})
	}
	refused := "sandbox.exec: the tally skill allows only commands matching sh *, true (its allowed-tools); this one is not (a command with ; & | ` $( or a line break matches none)"
	for _, cmd := range []string{"cat /x", "sh a; cat /x", "sh $(cat /x)", "true && cat /x"} {
		args, _ := json.Marshal(map[string]string{"command": cmd})
		if res := call(t, in("tally", "sh *", "true"), exec, string(args)); !res.IsError || res.Text() != refused {
			t.Errorf("%q: %+v", cmd, res)
		}
	}
	if res := call(t, in("tally", "sh *"), exec, `{"command":"sh /skills/tally/scripts/run.sh"}`); res.IsError || res.Text() != "tally ran\n[exit code 0]" {
		t.Errorf("the skill's script: %+v", res)
	}
	if res := call(t, in("tally"), read, `{"path":"/skills/tally/SKILL.md"}`); res.IsError || !strings.HasPrefix(res.Text(), "---\nname: tally") {
		t.Errorf("sandbox.read_file of the skill: %+v", res)
	}
	if res := call(t, in("tally"), write, `{"path":"/skills/tally/scripts/run.sh","content":"echo changed"}`); !res.IsError || !strings.Contains(res.Text(), "read-only file system") {
		t.Errorf("sandbox.write_file into the skill: %+v", res)
	}
	if res := call(t, in("tally"), exec, `{"command":"echo x > /skills/tally/new.txt"}`); res.IsError || !strings.Contains(res.Text(), "Read-only file system") {
		t.Errorf("a command's write into the skill: %+v", res)
	}
	// A skill the catalog no longer has, and a root run, run as before.
	for _, ctx := range []context.Context{in("gone"), in("")} {
		if res := call(t, ctx, exec, `{"command":"echo hi"}`); res.IsError || res.Text() != "hi\n[exit code 0]" {
			t.Errorf("exec: %+v", res)
		}
	}
}
