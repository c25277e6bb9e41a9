package core_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
)

// captureModel records every request and answers like listModel.
type captureModel struct {
	listModel
	mu   sync.Mutex
	reqs []core.ModelRequest
}

func (m *captureModel) Turn(ctx context.Context, req core.ModelRequest, delta func(string)) (core.ModelResponse, error) {
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	return m.listModel.Turn(ctx, req, delta)
}

func (m *captureModel) last() core.ModelRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reqs[len(m.reqs)-1]
}

// vfsTool writes {"path","text"} to the thread's virtual files, or reads
// {"path"}; a path under /grants/ makes the call non-local. block, when
// set, is waited on after the write.
type vfsTool struct {
	name  string
	block chan struct{}
	ran   chan struct{}
}

func (v vfsTool) Spec() core.ToolSpec {
	return core.ToolSpec{Name: v.name, Idempotent: false}
}

func (v vfsTool) Local(args json.RawMessage) bool {
	var a struct{ Path string }
	json.Unmarshal(args, &a)
	return !strings.HasPrefix(a.Path, "/grants/")
}

func (v vfsTool) Call(ctx context.Context, args json.RawMessage) (core.ToolResult, error) {
	var a struct{ Path, Text string }
	if err := json.Unmarshal(args, &a); err != nil {
		return core.ErrorResult(err.Error()), nil
	}
	env := core.CallEnvFrom(ctx)
	if env == nil {
		return core.ErrorResult("no call env"), nil
	}
	if a.Text == "" {
		f, err := env.Files.Read(a.Path)
		if err != nil {
			return core.ErrorResult(core.ErrorMessage(err)), nil
		}
		return core.TextResult(string(f.Data)), nil
	}
	if err := env.Files.Write(a.Path, []byte(a.Text)); err != nil {
		return core.ErrorResult(core.ErrorMessage(err)), nil
	}
	if v.ran != nil {
		v.ran <- struct{}{}
	}
	if v.block != nil {
		select {
		case <-v.block:
		case <-ctx.Done():
			return core.ToolResult{}, ctx.Err()
		}
	}
	return core.TextResult("wrote " + a.Path), nil
}

func files(t *testing.T, svc *core.Service, threadID string) map[string]string {
	t.Helper()
	list, err := svc.ThreadFiles(context.Background(), owner, threadID)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range list {
		got, err := svc.ThreadFile(context.Background(), owner, threadID, f.Path)
		if err != nil {
			t.Fatal(err)
		}
		out[f.Path] = string(got.Data)
	}
	return out
}

func TestVirtualFilesCommitWithTheirStep(t *testing.T) {
	w := vfsTool{name: "vwrite"}
	slow := vfsTool{name: "vslow", block: make(chan struct{}), ran: make(chan struct{}, 4)}
	e := newEnv(t, listModel{[]core.ModelResponse{
		calls(call("c1", "vwrite", `{"path":"/notes/a.md","text":"one"}`)),
		calls(call("c2", "vslow", `{"path":"/notes/b.md","text":"two"}`)),
		calls(call("c3", "vwrite", `{"path":"/notes/b.md"}`)),
	}}, w, slow)
	svc := e.service(func(c *core.Config) { c.DefaultPolicy = core.Policy{"v*": {Interrupt: true}} })
	th := e.thread(svc)
	r := start(t, svc, th.ID, core.RunRequest{})
	<-slow.ran
	crash(svc)

	// The first step's file is committed; the cut-off step's write is not.
	svc = e.service(nil)
	if got := files(t, svc, th.ID); len(got) != 1 || got["/notes/a.md"] != "one" {
		t.Fatalf("files after the crash: %v", got)
	}
	// A local call is re-run after a crash like an idempotent one (no
	// recovery interrupt) and, despite the policy, never held.
	<-slow.ran
	close(slow.block)
	waitRun(t, svc, r.ID, core.RunSucceeded)
	got := files(t, svc, th.ID)
	if got["/notes/a.md"] != "one" || got["/notes/b.md"] != "two" {
		t.Fatalf("files: %v", got)
	}
	if res := toolResults(messages(t, svc, th.ID)); res[2] != "two" {
		t.Fatalf("results: %q", res)
	}
	if n := len(actionItems(t, svc)); n != 0 {
		t.Fatalf("%d action items for local calls", n)
	}
}

func TestNonLocalCallIsHeld(t *testing.T) {
	e := newEnv(t, listModel{[]core.ModelResponse{
		calls(call("c1", "vwrite", `{"path":"/grants/x/a.md","text":"one"}`)),
	}}, vfsTool{name: "vwrite"})
	svc := e.service(func(c *core.Config) { c.DefaultPolicy = core.Policy{"vwrite": {Interrupt: true}} })
	th := e.thread(svc)
	r := start(t, svc, th.ID, core.RunRequest{})
	waitRun(t, svc, r.ID, core.RunInterrupted)
	if items := actionItems(t, svc); len(items) != 1 || items[0].Tool != "vwrite" {
		t.Fatalf("items %+v", items)
	}
}

func TestVirtualFileLimits(t *testing.T) {
	big := strings.Repeat("x", core.MaxFileSize+1)
	args, _ := json.Marshal(map[string]string{"path": "/big", "text": big})
	e := newEnv(t, listModel{[]core.ModelResponse{
		calls(core.ToolCall{ID: "c1", Name: "vwrite", Args: args}),
		calls(call("c2", "vwrite", `{"path":"/a/../b","text":"x"}`)),
	}}, vfsTool{name: "vwrite"})
	svc := e.service(nil)
	th := e.thread(svc)
	r := start(t, svc, th.ID, core.RunRequest{})
	waitRun(t, svc, r.ID, core.RunSucceeded)
	res := toolResults(messages(t, svc, th.ID))
	if !strings.Contains(res[0], "at most 1 MiB") || !strings.Contains(res[1], "not clean") {
		t.Fatalf("results %q", res)
	}
	if got := files(t, svc, th.ID); len(got) != 0 {
		t.Fatalf("files %v", got)
	}
}

// TestSystemPromptWithinARun: a run's turns share their system prompt
// while nothing it is made of changed, and the next turn has it made
// again when the minute (the prompt says the time) or the owner's
// settings changed.
func TestSystemPromptWithinARun(t *testing.T) {
	b := newBlocker("block", true)
	turn := calls(call("c", "block", `{}`))
	m := &captureModel{listModel: listModel{[]core.ModelResponse{turn, turn, turn, turn}}}
	e := newEnv(t, m, b)
	var mu sync.Mutex
	now := time.Date(2026, 12, 2, 9, 30, 5, 0, time.UTC)
	svc := e.service(func(c *core.Config) {
		c.Now = func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			return now
		}
	})
	ctx := context.Background()
	th := e.thread(svc)
	r := start(t, svc, th.ID, core.RunRequest{})
	started := func() { // the turn's tool call has started
		t.Helper()
		select {
		case <-b.started:
		case <-time.After(10 * time.Second):
			t.Fatal("no tool call")
		}
	}
	release := func() { b.release <- struct{}{} }
	started() // turn 1's
	mu.Lock()
	now = now.Add(20 * time.Second) // the same minute
	mu.Unlock()
	release()
	started() // turn 2's
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	release()
	started() // turn 3's
	add := "Answer in French."
	if _, err := svc.UpdateSettings(ctx, owner, core.SettingsPatch{PromptAddendum: &add}); err != nil {
		t.Fatal(err)
	}
	release()
	started() // turn 4's
	release()
	waitRun(t, svc, r.ID, core.RunSucceeded)
	m.mu.Lock()
	reqs := m.reqs
	m.mu.Unlock()
	if len(reqs) != 5 {
		t.Fatalf("%d turns, want 5", len(reqs))
	}
	if reqs[1].System != reqs[0].System || !strings.Contains(reqs[0].System, "09:30") {
		t.Errorf("turns 1 and 2, in one minute:\n%s\n%s", reqs[0].System, reqs[1].System)
	}
	if !strings.Contains(reqs[2].System, "09:31") || strings.Contains(reqs[2].System, add) {
		t.Errorf("turn 3, a minute later:\n%s", reqs[2].System)
	}
	if !strings.Contains(reqs[3].System, add) || !strings.Contains(reqs[4].System, add) {
		t.Errorf("turns 4 and 5, after the settings changed:\n%s\n%s", reqs[3].System, reqs[4].System)
	}
	if len(reqs[4].Tools) == 0 || reqs[4].Tools[0].Name != "block" {
		t.Errorf("turn 5 tools %+v", reqs[4].Tools)
	}
}

// TestWorkspaceOfANewThread: a run started on a new thread begins with
// the grants and settings another run of its owner read (nothing read
// again), unless they changed since: a grant added between two runs is
// in the second's prompt, and so is an attachment of its input.
func TestWorkspaceOfANewThread(t *testing.T) {
	m := &captureModel{}
	e := newEnv(t, m, vfsTool{name: "read_file"})
	svc := e.service(func(c *core.Config) { c.Blobs = core.DirBlobs{Dir: filepath.Join(t.TempDir(), "attachments")} })
	ctx := context.Background()
	run := func(req core.RunRequest) string {
		t.Helper()
		waitRun(t, svc, start(t, svc, e.thread(svc).ID, req).ID, core.RunSucceeded)
		return m.last().System
	}
	first := run(core.RunRequest{})
	if !strings.Contains(first, "no local folders") {
		t.Fatalf("first run's prompt:\n%s", first)
	}
	if again := run(core.RunRequest{}); again != first {
		t.Errorf("a second run, nothing changed:\n%s\nwant\n%s", again, first)
	}
	if _, err := svc.AddGrant(ctx, owner, core.GrantInput{Path: t.TempDir(), Name: "proj"}); err != nil {
		t.Fatal(err)
	}
	if sys := run(core.RunRequest{}); !strings.Contains(sys, "/grants/proj/ (read-only)") {
		t.Errorf("a run after a grant was added:\n%s", sys)
	}
	att, err := svc.AddAttachment(ctx, owner, core.AttachmentInput{Name: "data.csv", MIME: "text/csv"}, strings.NewReader("a,b\n"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	run(core.RunRequest{Input: core.RunInput{Text: "read it", Attachments: []string{att.ID}}})
	if msgs := m.last().Messages; len(msgs) == 0 || !strings.Contains(fmt.Sprint(msgs[0].Parts), "data.csv") {
		t.Errorf("a run with an attachment: first message %+v", msgs[0])
	}
}

func TestSystemPrompt(t *testing.T) {
	m := &captureModel{}
	dataRoot := t.TempDir()
	e := newEnv(t, m, vfsTool{name: "read_file"})
	now := time.Date(2026, 12, 2, 9, 30, 0, 0, time.UTC)
	svc := e.service(func(c *core.Config) { c.DataRoot = dataRoot; c.Now = func() time.Time { return now } })
	ctx := context.Background()
	dir := t.TempDir()
	g, err := svc.AddGrant(ctx, owner, core.GrantInput{Path: dir, Name: "proj", Writable: true})
	if err != nil {
		t.Fatal(err)
	}
	th := e.thread(svc)
	waitRun(t, svc, start(t, svc, th.ID, core.RunRequest{}).ID, core.RunSucceeded)
	sys := m.last().System
	for _, want := range []string{"Kiln", "Wednesday, 2 December 2026", "read_file", "/grants/proj/ (writable)"} {
		if !strings.Contains(sys, want) {
			t.Errorf("system prompt lacks %q:\n%s", want, sys)
		}
	}
	if strings.Contains(sys, "/memories/") {
		t.Errorf("memory is off but the prompt mentions it:\n%s", sys)
	}

	add := "Answer in French."
	on := true
	if _, err := svc.UpdateSettings(ctx, owner, core.SettingsPatch{PromptAddendum: &add, Memory: &on}); err != nil {
		t.Fatal(err)
	}
	r := start(t, svc, th.ID, core.RunRequest{System: "Be brief.", WorkingFolder: "proj"})
	waitRun(t, svc, r.ID, core.RunSucceeded)
	sys = m.last().System
	iAdd, iSys := strings.Index(sys, add), strings.Index(sys, "Be brief.")
	if iAdd < 0 || iSys < iAdd || !strings.Contains(sys, "/memories/") || !strings.Contains(sys, "working folder of this run is /grants/proj/") {
		t.Errorf("system prompt:\n%s", sys)
	}
	if got, _ := svc.GetRun(ctx, owner, r.ID); got.WorkingFolder != g.ID || got.System != "Be brief." {
		t.Errorf("run %+v", got)
	}
	if got, _ := svc.GetThread(ctx, owner, th.ID); got.WorkingFolder != g.ID {
		t.Errorf("thread working folder %q", got.WorkingFolder)
	}
	if _, err := svc.StartRun(ctx, owner, th.ID, core.RunRequest{Input: core.RunInput{Text: "x"}, WorkingFolder: "nope"}); core.ErrorCode(err) != core.EINVALID {
		t.Errorf("unknown working folder: %v", err)
	}
}

func TestSettings(t *testing.T) {
	e := newEnv(t, listModel{})
	svc := e.service(nil)
	ctx := context.Background()
	st, err := svc.Settings(ctx, owner)
	if err != nil || st.Memory || st.Theme != core.ThemeSystem {
		t.Fatalf("defaults %+v %v", st, err)
	}
	long := strings.Repeat("é", core.MaxPromptAddendum+1)
	bad := []core.SettingsPatch{
		{PromptAddendum: &long},
		{PromptAddendum: ptr("a\x00b")},
		{Theme: ptr("neon")},
		{Limits: &core.Limits{MaxSteps: -1}},
		{Limits: &core.Limits{MaxToolCalls: core.CapToolCalls + 1}},
	}
	for i, p := range bad {
		if _, err := svc.UpdateSettings(ctx, owner, p); core.ErrorCode(err) != core.EINVALID {
			t.Errorf("bad patch %d: %v", i, err)
		}
	}
	ok := strings.Repeat("é", core.MaxPromptAddendum)
	if _, err := svc.UpdateSettings(ctx, owner, core.SettingsPatch{PromptAddendum: &ok, Theme: ptr("dark"), Limits: &core.Limits{MaxSteps: 7}}); err != nil {
		t.Fatal(err)
	}
	st, _ = svc.Settings(ctx, owner)
	if st.PromptAddendum != ok || st.Theme != "dark" || st.Limits.MaxSteps != 7 {
		t.Fatalf("settings %+v", st)
	}
	// A run without limits of its own takes the settings'.
	th := e.thread(svc)
	if r := start(t, svc, th.ID, core.RunRequest{}); r.Limits.MaxSteps != 7 || r.Limits.MaxToolCalls != 500 {
		t.Fatalf("run limits %+v", r.Limits)
	}
}

// TestSettingsSandboxRuntime: sandbox_runtime takes an enabled runtime
// (Config.SandboxRuntimes, asked at each change) or "" for the server's
// default; any other name is refused with the enabled ones listed, and
// changes nothing.
func TestSettingsSandboxRuntime(t *testing.T) {
	e := newEnv(t, listModel{})
	enabled := []string{"bwrap", "wasm"}
	svc := e.service(func(c *core.Config) { c.SandboxRuntimes = func() []string { return enabled } })
	ctx := context.Background()
	if st, err := svc.UpdateSettings(ctx, owner, core.SettingsPatch{SandboxRuntime: ptr(" bwrap ")}); err != nil || st.SandboxRuntime != "bwrap" {
		t.Fatalf("set bwrap: %+v, %v", st, err)
	}
	_, err := svc.UpdateSettings(ctx, owner, core.SettingsPatch{SandboxRuntime: ptr("docker"), Memory: ptr(true)})
	if core.ErrorCode(err) != core.EINVALID || !strings.Contains(err.Error(), `sandbox_runtime "docker"`) || !strings.Contains(err.Error(), "bwrap, wasm") {
		t.Errorf("a runtime not enabled: %v; want EINVALID naming it and listing bwrap, wasm", err)
	}
	if st, _ := svc.Settings(ctx, owner); st.SandboxRuntime != "bwrap" || st.Memory {
		t.Errorf("after the refusal: %+v; want it unchanged", st)
	}
	enabled = nil
	_, err = svc.UpdateSettings(ctx, owner, core.SettingsPatch{SandboxRuntime: ptr("wasm")})
	if core.ErrorCode(err) != core.EINVALID || !strings.Contains(err.Error(), "no sandbox runtime is enabled") {
		t.Errorf("with none enabled: %v", err)
	}
	// The setting outlives its runtime's plugin, and "" goes back to the
	// server's default.
	if st, err := svc.UpdateSettings(ctx, owner, core.SettingsPatch{Theme: ptr("dark")}); err != nil || st.SandboxRuntime != "bwrap" {
		t.Errorf("another change with bwrap disabled: %+v, %v", st, err)
	}
	if st, err := svc.UpdateSettings(ctx, owner, core.SettingsPatch{SandboxRuntime: ptr("")}); err != nil || st.SandboxRuntime != "" {
		t.Errorf("back to the server's default: %+v, %v", st, err)
	}
}

func ptr[T any](v T) *T { return &v }

func TestGrantRules(t *testing.T) {
	dataRoot := t.TempDir()
	e := newEnv(t, listModel{})
	svc := e.service(func(c *core.Config) { c.DataRoot = dataRoot })
	ctx := context.Background()
	base := t.TempDir()
	proj := filepath.Join(base, "My Project")
	sub := filepath.Join(proj, "docs")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(base, "f.txt")
	os.WriteFile(file, []byte("x"), 0o644)
	link := filepath.Join(base, "link")
	if err := os.Symlink(proj, link); err != nil {
		t.Fatal(err)
	}

	g, err := svc.AddGrant(ctx, owner, core.GrantInput{Path: link})
	if err != nil {
		t.Fatal(err)
	}
	real, _ := filepath.EvalSymlinks(proj)
	if g.Path != real || g.Name != "my-project" || g.Writable {
		t.Fatalf("grant %+v (want the real path %s, the name my-project, read-only)", g, real)
	}
	cases := []struct {
		in   core.GrantInput
		code string
	}{
		{core.GrantInput{Path: file}, core.EINVALID},
		{core.GrantInput{Path: filepath.Join(base, "missing")}, core.EINVALID},
		{core.GrantInput{Path: ""}, core.EINVALID},
		{core.GrantInput{Path: proj}, core.ECONFLICT},                             // granted already
		{core.GrantInput{Path: base}, core.ECONFLICT},                             // read-only around a grant
		{core.GrantInput{Path: base, Name: "my-project"}, core.ECONFLICT},         // name in use
		{core.GrantInput{Path: sub, Name: "Bad Name"}, core.EINVALID},             // bad name
		{core.GrantInput{Path: dataRoot}, core.ECONFLICT},                         // the data root
		{core.GrantInput{Path: filepath.Dir(dataRoot)}, core.ECONFLICT},           // around the data root
		{core.GrantInput{Path: filepath.Join(base, "f.txt", "x")}, core.EINVALID}, // under a file
	}
	for _, c := range cases {
		if _, err := svc.AddGrant(ctx, owner, c.in); core.ErrorCode(err) != c.code {
			t.Errorf("AddGrant(%+v): %v, want %s", c.in, err, c.code)
		}
	}
	// A writable folder inside a read-only one is the one overlap allowed.
	w, err := svc.AddGrant(ctx, owner, core.GrantInput{Path: sub, Writable: true})
	if err != nil {
		t.Fatal(err)
	}
	if w.Name != "docs" {
		t.Errorf("name %q", w.Name)
	}
	os.MkdirAll(filepath.Join(dataRoot, "x"), 0o700)
	d, err := svc.AddGrant(ctx, owner, core.GrantInput{Path: filepath.Join(dataRoot, "x"), AcknowledgeDataRoot: true})
	if err != nil || !d.DataRoot {
		t.Fatalf("acknowledged data root grant %+v %v", d, err)
	}
	gs, _ := svc.ListGrants(ctx, owner)
	if len(gs) != 3 || gs[0].Name != "docs" || gs[1].Name != "my-project" || gs[2].Name != "x" {
		t.Fatalf("grants %+v", gs)
	}
	if err := svc.RemoveGrant(ctx, owner, g.ID); err != nil {
		t.Fatal(err)
	}
	if err := svc.RemoveGrant(ctx, owner, g.ID); core.ErrorCode(err) != core.ENOTFOUND {
		t.Errorf("second remove: %v", err)
	}
}

// envTool reports the names of the grants its CallEnv has.
type envTool struct{ started, release chan struct{} }

func (envTool) Spec() core.ToolSpec { return core.ToolSpec{Name: "env", Idempotent: true} }
func (t envTool) Call(ctx context.Context, _ json.RawMessage) (core.ToolResult, error) {
	if t.started != nil {
		t.started <- struct{}{}
		<-t.release
	}
	env := core.CallEnvFrom(ctx)
	var names []string
	for _, g := range env.Grants {
		names = append(names, g.Name)
	}
	wf := ""
	if env.WorkingFolder != nil {
		wf = env.WorkingFolder.Name
	}
	return core.TextResult(strings.Join(names, ",") + "|" + wf), nil
}

func TestRevokedGrantGoneForTheNextCall(t *testing.T) {
	gate := envTool{started: make(chan struct{}, 1), release: make(chan struct{})}
	e := newEnv(t, listModel{[]core.ModelResponse{
		calls(call("c1", "env", `{}`)),
		calls(call("c2", "envfree", `{}`)),
	}}, gate, renamed{envTool{}, "envfree"})
	svc := e.service(nil)
	ctx := context.Background()
	g, err := svc.AddGrant(ctx, owner, core.GrantInput{Path: t.TempDir(), Name: "proj"})
	if err != nil {
		t.Fatal(err)
	}
	th := e.thread(svc)
	r := start(t, svc, th.ID, core.RunRequest{WorkingFolder: "proj"})
	<-gate.started
	if err := svc.RemoveGrant(ctx, owner, g.ID); err != nil {
		t.Fatal(err)
	}
	close(gate.release)
	waitRun(t, svc, r.ID, core.RunSucceeded)
	// The call in flight saw the grant (its env was read when it started);
	// the next call does not.
	if res := toolResults(messages(t, svc, th.ID)); res[0] != "proj|proj" || res[1] != "|" {
		t.Fatalf("results %q", res)
	}
}

type renamed struct {
	core.Tool
	name string
}

func (r renamed) Spec() core.ToolSpec {
	s := r.Tool.Spec()
	s.Name = r.name
	return s
}

// png is a 1x1 PNG.
var png = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\xcf\xc0\xf0\x1f\x00\x05\x00\x01\xff\x89\x99=\x1d\x00\x00\x00\x00IEND\xaeB`\x82")

func TestAttachments(t *testing.T) {
	m := &captureModel{}
	dir := filepath.Join(t.TempDir(), "attachments")
	e := newEnv(t, m)
	svc := e.service(func(c *core.Config) { c.Blobs = core.DirBlobs{Dir: dir} })
	ctx := context.Background()
	img, err := svc.AddAttachment(ctx, owner, core.AttachmentInput{Name: "../../dot.png", MIME: "image/png"}, bytes.NewReader(png), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if img.Name != "dot.png" || img.Size != int64(len(png)) || img.ThreadID != "" {
		t.Fatalf("attachment %+v", img)
	}
	txt, err := svc.AddAttachment(ctx, owner, core.AttachmentInput{Name: "data.csv", MIME: "text/csv"}, strings.NewReader("a,b\n1,2\n"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.AddAttachment(ctx, owner, core.AttachmentInput{Name: "big.txt", MIME: "text/plain"}, strings.NewReader(strings.Repeat("x", 101)), 100); core.ErrorCode(err) != core.ELIMIT {
		t.Fatalf("oversized: %v", err)
	}
	if n := countFiles(t, dir); n != 2 {
		t.Fatalf("%d blobs after an oversized upload, want 2", n)
	}

	th := e.thread(svc)
	r := start(t, svc, th.ID, core.RunRequest{Input: core.RunInput{Text: "look", Attachments: []string{img.ID, txt.ID}}})
	waitRun(t, svc, r.ID, core.RunSucceeded)
	user := messages(t, svc, th.ID)[0]
	if len(user.Parts) != 3 || user.Parts[1].URI != core.AttachmentURI(img.ID) || user.Parts[1].Type != core.PartImage || user.Parts[1].Data != nil || user.Parts[2].Type != core.PartFile {
		t.Fatalf("user message parts %+v", user.Parts)
	}
	sent := m.last().Messages[0].Parts
	if !bytes.Equal(sent[1].Data, png) || sent[1].MIME != "image/png" || sent[2].Type != core.PartText || !strings.Contains(sent[2].Text, core.AttachmentPath(txt)) {
		t.Fatalf("parts the model got %+v", sent)
	}
	// Another thread cannot take them; a second use in the same thread can.
	other := e.thread(svc)
	if _, err := svc.StartRun(ctx, owner, other.ID, core.RunRequest{Input: core.RunInput{Text: "x", Attachments: []string{img.ID}}}); core.ErrorCode(err) != core.EINVALID {
		t.Errorf("attachment of another thread: %v", err)
	}
	if err := svc.DeleteAttachment(ctx, owner, img.ID); core.ErrorCode(err) != core.ECONFLICT {
		t.Errorf("delete a used attachment: %v", err)
	}
	// The same content uploaded again is stored once and survives the
	// first thread's deletion.
	dup, err := svc.AddAttachment(ctx, owner, core.AttachmentInput{Name: "again.png", MIME: "image/png"}, bytes.NewReader(png), 1<<20)
	if err != nil || dup.SHA256 != img.SHA256 {
		t.Fatal(err)
	}
	if err := svc.DeleteThread(ctx, owner, th.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.GetAttachment(ctx, owner, txt.ID); core.ErrorCode(err) != core.ENOTFOUND {
		t.Errorf("attachment after its thread's deletion: %v", err)
	}
	if n := countFiles(t, dir); n != 1 {
		t.Fatalf("%d blobs after deleting the thread, want the shared image only", n)
	}
	if err := svc.DeleteAttachment(ctx, owner, dup.ID); err != nil {
		t.Fatal(err)
	}
	if n := countFiles(t, dir); n != 0 {
		t.Fatalf("%d blobs left", n)
	}
}

func countFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return nil
	})
	return n
}

func TestMemories(t *testing.T) {
	root := t.TempDir()
	e := newEnv(t, listModel{})
	svc := e.service(func(c *core.Config) { c.DataRoot = root })
	ctx := context.Background()
	if _, err := svc.WriteMemory(ctx, owner, "prefs.md", []byte("# Prefs\nLikes tea.")); err != nil {
		t.Fatal(err)
	}
	ms, err := svc.Memories(ctx, owner)
	if err != nil || len(ms) != 1 || ms[0].Name != "prefs.md" || ms[0].Preview != "# Prefs Likes tea." || ms[0].Content != nil {
		t.Fatalf("memories %+v %v", ms, err)
	}
	m, err := svc.ReadMemory(ctx, owner, "prefs.md")
	if err != nil || *m.Content != "# Prefs\nLikes tea." {
		t.Fatalf("read %+v %v", m, err)
	}
	if _, err := os.Stat(filepath.Join(root, "memories", "prefs.md")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"../x.md", "x.txt", ".hidden.md", "a/b.md", ""} {
		if _, err := svc.WriteMemory(ctx, owner, name, []byte("x")); core.ErrorCode(err) != core.EINVALID {
			t.Errorf("name %q: %v", name, err)
		}
	}
	if _, err := svc.WriteMemory(ctx, owner, "big.md", bytes.Repeat([]byte("x"), core.MaxMemorySize+1)); core.ErrorCode(err) != core.EINVALID {
		t.Errorf("oversized memory: %v", err)
	}
	if err := svc.DeleteMemory(ctx, owner, "prefs.md"); err != nil {
		t.Fatal(err)
	}
	if err := svc.DeleteMemory(ctx, owner, "prefs.md"); core.ErrorCode(err) != core.ENOTFOUND {
		t.Errorf("second delete: %v", err)
	}
}

func TestFork(t *testing.T) {
	e := newEnv(t, listModel{[]core.ModelResponse{
		calls(call("c1", "vwrite", `{"path":"/a","text":"first"}`)),
		calls(call("c2", "vwrite", `{"path":"/a","text":"second"}`)),
	}}, vfsTool{name: "vwrite"})
	svc := e.service(nil)
	ctx := context.Background()
	th := e.thread(svc)
	r := start(t, svc, th.ID, core.RunRequest{})
	waitRun(t, svc, r.ID, core.RunSucceeded)
	msgs := messages(t, svc, th.ID)
	// user, assistant(c1), tool, assistant(c2), tool, assistant(final)
	if len(msgs) != 6 {
		t.Fatalf("%d messages", len(msgs))
	}
	for _, c := range []struct {
		at   *int
		code string
	}{{nil, core.EINVALID}, {ptr(0), core.ECONFLICT}, {ptr(2), core.ECONFLICT}, {ptr(6), core.EINVALID}, {ptr(-1), core.EINVALID}} {
		if _, err := svc.ForkThread(ctx, owner, th.ID, core.ForkInput{MessageIndex: c.at}); core.ErrorCode(err) != c.code {
			t.Errorf("fork at %v: %v, want %s", c.at, err, c.code)
		}
	}
	f, err := svc.ForkThread(ctx, owner, th.ID, core.ForkInput{MessageIndex: ptr(1)})
	if err != nil {
		t.Fatal(err)
	}
	if f.Source != core.SourceFork || f.ParentThreadID != th.ID || *f.ParentMessage != 1 || f.Model != "fake" || f.Title != "t (fork)" {
		t.Fatalf("fork %+v", f)
	}
	got := messages(t, svc, f.ID)
	if len(got) != 3 {
		t.Fatalf("fork has %d messages, want 3 (through the turn's result)", len(got))
	}
	for i, m := range got {
		if m.Role != msgs[i].Role || m.Text != msgs[i].Text || m.ToolCallID != msgs[i].ToolCallID {
			t.Errorf("message %d: %+v, parent's %+v", i, m, msgs[i])
		}
	}
	// The files as they were at the fork point.
	if fs := files(t, svc, f.ID); fs["/a"] != "first" {
		t.Errorf("fork files %v", fs)
	}
	if fs := files(t, svc, th.ID); fs["/a"] != "second" {
		t.Errorf("parent files %v", fs)
	}
	// A fork of a fork at an earlier turn sees the files as they were
	// then: the history up to the cut is copied, not only its end.
	late, err := svc.ForkThread(ctx, owner, th.ID, core.ForkInput{MessageIndex: ptr(3)})
	if err != nil {
		t.Fatal(err)
	}
	if fs := files(t, svc, late.ID); fs["/a"] != "second" {
		t.Errorf("fork at 3: files %v", fs)
	}
	early, err := svc.ForkThread(ctx, owner, late.ID, core.ForkInput{MessageIndex: ptr(1)})
	if err != nil {
		t.Fatal(err)
	}
	if fs := files(t, svc, early.ID); fs["/a"] != "first" {
		t.Errorf("fork of a fork at 1: files %v", fs)
	}
	// The fork runs on from there.
	r2 := start(t, svc, f.ID, core.RunRequest{})
	waitRun(t, svc, r2.ID, core.RunSucceeded)
}

func TestVirtualFilesRedacted(t *testing.T) {
	const secret = "sk-live-0123456789abcdefghijklmnop"
	red := core.NewRedactor()
	red.SetSecret("OPENAI_API_KEY", secret)
	args, _ := json.Marshal(map[string]string{"path": "/notes.md", "text": "key: " + secret})
	e := newEnv(t, listModel{[]core.ModelResponse{calls(core.ToolCall{ID: "c1", Name: "vwrite", Args: args})}}, vfsTool{name: "vwrite"})
	svc := e.service(func(c *core.Config) { c.Redactor = red })
	th := e.thread(svc)
	waitRun(t, svc, start(t, svc, th.ID, core.RunRequest{}).ID, core.RunSucceeded)
	if got := files(t, svc, th.ID)["/notes.md"]; strings.Contains(got, secret) || !strings.HasPrefix(got, "key: ") {
		t.Fatalf("stored file %q", got)
	}
}

func TestForkRefusedWhileRunning(t *testing.T) {
	b := newBlocker("block", true)
	e := newEnv(t, listModel{[]core.ModelResponse{calls(call("c1", "block", `{}`))}}, b)
	svc := e.service(nil)
	th := e.thread(svc)
	r := start(t, svc, th.ID, core.RunRequest{})
	<-b.started
	if _, err := svc.ForkThread(context.Background(), owner, th.ID, core.ForkInput{MessageIndex: ptr(1)}); core.ErrorCode(err) != core.ECONFLICT {
		t.Errorf("fork during a run: %v", err)
	}
	close(b.release)
	waitRun(t, svc, r.ID, core.RunSucceeded)
}
