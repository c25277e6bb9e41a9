// Command kiln-bench runs Kiln's benchmarks and prints the figures the
// issues ask for as one table, next to their targets. When Node is present
// it also runs the LangGraph JS peer benchmark on the same workload, in the
// same run, and prints the ratio. The web UI's figures are its gzipped
// JavaScript and CSS (computed here, from the UI embedded in the binary)
// and its first contentful paint on loopback, measured in headless Chromium
// by firstpaint.mjs when Node, Chromium and the UI's node_modules are there.
//
//	go run ./cmd/kiln-bench [-count 3] [-langgraph DIR] [-no-langgraph] [-no-paint] [-no-fanout] [-only fanout|startup|sandbox|postgres] [-runtimes docker,wasm,js]
package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	_ "embed"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kilnhq/kiln/web/ui"
)

// bench is one `go test -bench` invocation.
type bench struct {
	pkg, pattern, benchtime string
}

var benches = []bench{
	{"./core/sqlite", "^(BenchmarkEngine|BenchmarkBareStep)$", "1x"},
	{"./core/sqlite", "^BenchmarkRecovery", "1x"},
	{"./web", "^BenchmarkSSELatency", "1x"},
	{"./web", "^BenchmarkList100k", "1x"},
	{"./plugins/toolset/toolsettest", "^BenchmarkToolsetCall", "2000x"},
	{"./plugins/wasm", "^BenchmarkWASMColdStart", "5x"},
	{"./plugins/process", "^BenchmarkProcessStart", "10x"},
	{"./plugins/registry", "^BenchmarkEnable", "5x"},
	{"./plugins/mcp", "^BenchmarkToolCall", "200x"},
	{"./skills", "^BenchmarkCatalogLoad500", "5x"},
	{"./core/sqlite", "^BenchmarkTaskCall", "300x"},
	{"./core", "^BenchmarkSchedulerDispatch", "1x"},
	{"./web", "^BenchmarkWebhookLatency", "1x"},
	{"./marketplace", "^BenchmarkRefresh10k$", "5x"},
	{"./marketplace", "^BenchmarkSearch10k$", "20x"},
	{"./marketplace", "^BenchmarkInstall20MB$", "5x"},
}

// metrics maps "BenchmarkName/sub unit" to the values of each -count run.
type metrics map[string][]float64

var lineRE = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)

func runGoBench(b bench, count int, m metrics) error {
	args := []string{"test", "-tags", "sqlite_fts5", "-run", "^$", "-bench", b.pattern, "-benchtime", b.benchtime, "-count", strconv.Itoa(count), "-timeout", "30m", b.pkg}
	fmt.Fprintf(os.Stderr, "go %s\n", strings.Join(args, " "))
	cmd := exec.Command("go", args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("go test %s: %w\n%s", b.pkg, err, out)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		mm := lineRE.FindStringSubmatch(sc.Text())
		if mm == nil {
			continue
		}
		f := strings.Fields(mm[2])
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			key := mm[1] + " " + f[i+1]
			m[key] = append(m[key], v)
		}
	}
	return sc.Err()
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return -1
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// langGraph runs the peer benchmark in a writable copy of dir and returns
// its per-variant results.
func langGraph(dir string) (map[string]map[string]float64, error) {
	if _, err := exec.LookPath("node"); err != nil {
		return nil, fmt.Errorf("node not found")
	}
	if _, err := os.Stat(filepath.Join(dir, "bench.mjs")); err != nil {
		return nil, fmt.Errorf("no LangGraph benchmark at %s", dir)
	}
	work, err := npmWork(dir, "langgraph", "compiles better-sqlite3, about two minutes the first time")
	if err != nil {
		return nil, err
	}
	var res struct {
		Results map[string]map[string]any `json:"results"`
	}
	if err := nodeJSON(work, []string{"VARIANTS=sqlite,sqlite_conc", "DB=" + filepath.Join(work, "ck.sqlite")}, &res); err != nil {
		return nil, err
	}
	flat := map[string]map[string]float64{}
	for v, r := range res.Results {
		flat[v] = map[string]float64{}
		for k, x := range r {
			if f, ok := x.(float64); ok {
				flat[v][k] = f
			}
		}
	}
	return flat, nil
}

// npmWork copies the Node benchmark in dir (bench.mjs, package.json and
// package-lock.json) to a writable folder named name in the user's cache,
// runs npm ci there when its packages are missing or its lock changed
// (slow says how long that takes), and returns the folder.
func npmWork(dir, name, slow string) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	work := filepath.Join(cache, "kiln-bench", name)
	if err := os.MkdirAll(work, 0o755); err != nil {
		return "", err
	}
	for _, f := range []string{"bench.mjs", "package.json", "package-lock.json"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return "", err
		}
		old, _ := os.ReadFile(filepath.Join(work, f))
		if !bytes.Equal(old, b) {
			if err := os.WriteFile(filepath.Join(work, f), b, 0o644); err != nil {
				return "", err
			}
			os.RemoveAll(filepath.Join(work, "node_modules"))
		}
	}
	if _, err := os.Stat(filepath.Join(work, "node_modules")); err != nil {
		fmt.Fprintf(os.Stderr, "npm ci (%s benchmark; %s)\n", name, slow)
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir, cmd.Stdout, cmd.Stderr = work, os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("npm ci: %w", err)
		}
	}
	return work, nil
}

// nodeJSON runs node bench.mjs in work with env and returns the JSON line
// it prints last ("JSON {...}").
func nodeJSON(work string, env []string, out any) error {
	cmd := exec.Command("node", "bench.mjs")
	cmd.Dir = work
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	b, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("node bench.mjs: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "JSON "); ok {
			return json.Unmarshal([]byte(rest), out)
		}
	}
	return fmt.Errorf("no JSON line in the output of node bench.mjs")
}

// startServer starts the built server on a free loopback port with a
// temporary data directory and the given extra environment, and waits
// until it answers. stop kills it and removes the directory.
func startServer(bin string, env ...string) (addr string, pid int, stop func(), err error) {
	data, err := os.MkdirTemp("", "kiln-bench-serve")
	if err != nil {
		return "", 0, nil, err
	}
	addr, pid, kill, err := startServerPid(bin, data, env...)
	if err != nil {
		os.RemoveAll(data)
		return "", 0, nil, err
	}
	return addr, pid, func() { kill(); os.RemoveAll(data) }, nil
}

// startServerIn is startServer on the data directory data, which stop
// leaves in place.
func startServerIn(bin, data string, env ...string) (addr string, stop func(), err error) {
	addr, _, stop, err = startServerPid(bin, data, env...)
	return addr, stop, err
}

func startServerPid(bin, data string, env ...string) (addr string, pid int, stop func(), err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", 0, nil, err
	}
	addr = l.Addr().String()
	l.Close()
	cmd := exec.Command(bin, "serve", "--addr", addr, "--data", data)
	cmd.Env = append(append(os.Environ(), "KILN_API_TOKEN=", "KILN_ALLOWED_ORIGINS="), env...)
	if err := cmd.Start(); err != nil {
		return "", 0, nil, err
	}
	stop = func() { cmd.Process.Kill(); cmd.Wait() }
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			return addr, cmd.Process.Pid, stop, nil
		}
		if ctx.Err() != nil {
			stop()
			return "", 0, nil, fmt.Errorf("server did not come up: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// idleRSS starts the built server and reads its resident memory after it
// has settled.
func idleRSS(bin string) (float64, error) {
	_, pid, stop, err := startServer(bin)
	if err != nil {
		return 0, err
	}
	defer stop()
	time.Sleep(3 * time.Second)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseFloat(f[1], 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("no VmRSS")
}

// uiGzipSizes returns the total gzipped size, in KB (1,000 bytes), of the
// JavaScript and of the CSS files of the web UI embedded in the binary,
// compressed as the server compresses them.
func uiGzipSizes() (js, css float64, err error) {
	fsys := ui.FS()
	err = fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		var total *float64
		switch path.Ext(name) {
		case ".js", ".mjs":
			total = &js
		case ".css":
			total = &css
		default:
			return nil
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		zw.Write(b)
		zw.Close()
		*total += float64(buf.Len()) / 1000
		return nil
	})
	return js, css, err
}

//go:embed firstpaint.mjs
var firstPaintJS []byte

// firstPaint starts the built server and measures the first contentful
// paint of its UI page in headless Chromium, driven by firstpaint.mjs with
// playwright-core from uiDir/node_modules: the median over runs fresh
// loads, in milliseconds.
func firstPaint(bin, uiDir, chromium string, runs int) (float64, error) {
	if _, err := exec.LookPath("node"); err != nil {
		return 0, fmt.Errorf("node not found")
	}
	if _, err := os.Stat(chromium); err != nil {
		return 0, fmt.Errorf("no Chromium at %s (set -chromium)", chromium)
	}
	if _, err := os.Stat(filepath.Join(uiDir, "node_modules")); err != nil {
		return 0, fmt.Errorf("no %s/node_modules (make deps)", uiDir)
	}
	dir, err := os.MkdirTemp("", "kiln-bench-paint")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "firstpaint.mjs")
	if err := os.WriteFile(script, firstPaintJS, 0o644); err != nil {
		return 0, err
	}
	absUI, err := filepath.Abs(uiDir)
	if err != nil {
		return 0, err
	}
	addr, _, stop, err := startServer(bin)
	if err != nil {
		return 0, err
	}
	defer stop()
	fmt.Fprintf(os.Stderr, "node firstpaint.mjs (%d loads of the UI in %s)\n", runs, chromium)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script, "http://"+addr+"/", chromium, absUI, strconv.Itoa(runs))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("firstpaint.mjs: %v: %s", err, nodeError(stderr.String()))
	}
	var res struct {
		Median float64 `json:"median_ms"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(out), &res); err != nil {
		return 0, fmt.Errorf("firstpaint.mjs output %q: %w", out, err)
	}
	return res.Median, nil
}

// nodeError returns the line of a Node error output that says what went
// wrong (the first "...Error: ..." line, else the first line), clipped.
func nodeError(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	msg := lines[0]
	for _, l := range lines {
		if i := strings.Index(l, "Error: "); i >= 0 && !strings.HasPrefix(strings.TrimSpace(l), "at ") {
			msg = l
			break
		}
	}
	if msg = strings.TrimSpace(msg); len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	return msg
}

type row struct{ figure, value, target, verdict string }

func main() {
	count := flag.Int("count", 3, "runs of each benchmark; the table shows medians")
	lgDir := flag.String("langgraph", "../shared/bench/langgraph", "LangGraph JS benchmark directory")
	noLG := flag.Bool("no-langgraph", false, "skip the LangGraph JS benchmark")
	bin := flag.String("bin", "bin/kiln", "kiln binary for the idle-memory and first-paint figures")
	uiDir := flag.String("ui", "web/ui", "web UI directory, whose node_modules has playwright-core")
	chromium := flag.String("chromium", envOr("CHROMIUM", "/usr/bin/chromium"), "Chromium for the first-paint figure")
	paintRuns := flag.Int("paint-runs", 10, "page loads for the first-paint figure; the table shows the median")
	noPaint := flag.Bool("no-paint", false, "skip the first-paint figure")
	only := flag.String("only", "", "measure only this group of figures: fanout, startup, sandbox or postgres")
	runtimes := flag.String("runtimes", "docker,wasm,js", "the sandbox runtimes to measure, comma-separated")
	noFanout := flag.Bool("no-fanout", false, "skip the SSE fan-out figures (a few minutes)")
	settle := flag.Duration("settle", time.Minute, "how long after the SSE clients left the server's memory is read again")
	flag.Parse()

	if *only != "" {
		var rows []row
		add := func(figure string, v float64, unit, target string, ok bool) {
			rows = append(rows, row{figure, fmt.Sprintf("%.4g %s", v, unit), target, verdict(target, ok)})
		}
		note := func(figure, why string) { rows = append(rows, row{figure, "n/a", "", "not measured: " + why}) }
		switch *only {
		case "fanout":
			fanoutRows(*bin, *count, *settle, add, note)
		case "startup":
			startupRows(*bin, *count, add, note)
		case "sandbox":
			sandboxRows(*bin, strings.Split(*runtimes, ","), add, note)
		case "postgres":
			postgresRows(*bin, *count, add, note)
		default:
			fmt.Fprintf(os.Stderr, "-only %q: want fanout, startup, sandbox or postgres\n", *only)
			os.Exit(2)
		}
		printRows(rows, *count)
		return
	}

	m := metrics{}
	for _, b := range benches {
		if err := runGoBench(b, *count, m); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	get := func(key string) float64 { return median(m[key]) }

	var lg map[string]map[string]float64
	var lgErr error
	if *noLG {
		lgErr = fmt.Errorf("skipped")
	} else {
		lg, lgErr = langGraph(*lgDir)
	}
	rss, rssErr := idleRSS(*bin)
	jsKB, cssKB, sizeErr := uiGzipSizes()
	paint, paintErr := -1.0, fmt.Errorf("skipped")
	if !*noPaint {
		paint, paintErr = firstPaint(*bin, *uiDir, *chromium, *paintRuns)
	}

	var rows []row
	add := func(figure string, v float64, unit, target string, ok bool) {
		if v < 0 {
			rows = append(rows, row{figure, "n/a", target, "not measured"})
			return
		}
		rows = append(rows, row{figure, fmt.Sprintf("%.4g %s", v, unit), target, verdict(target, ok)})
	}
	seq := get("BenchmarkEngine/sequential steps/s")
	conc := get("BenchmarkEngine/concurrent-8 steps/s")
	conc64 := get("BenchmarkEngine/concurrent-64 steps/s")
	add("engine, sequential (200 runs x 21 steps, SQLite)", seq, "steps/s", ">= 10000", seq >= 10000)
	add("engine, 8 runs at once", conc, "steps/s", ">= 25000", conc >= 25000)
	add("engine, 64 runs at once", conc64, "steps/s", ">= 25000", conc64 >= 25000)
	stepUS, bareUS := get("BenchmarkEngine/sequential us/step"), get("BenchmarkBareStep/sequential us/step")
	add("bare transaction of a step's shape (database/sql, same run)", bareUS, "us/step", "", true)
	add("bare steps of 8 runs a transaction: the ceiling of 8 at once on this disk", get("BenchmarkBareStep/grouped-8 steps/s"), "steps/s", "", true)
	add("bare steps of 64 runs a transaction: the ceiling of 64 at once", get("BenchmarkBareStep/grouped-64 steps/s"), "steps/s", "", true)
	above := -1.0
	if stepUS >= 0 && bareUS > 0 {
		above = stepUS / bareUS
	}
	add("a step's cost above the bare transaction (engine sequential / bare)", above, "x", "<= 1.5x", above >= 0 && above <= 1.5)
	bytesRun := get("BenchmarkEngine/sequential db-B/run")
	add("database per run (checkpoints, messages, events, runs, threads)", bytesRun, "B", "no worse than 9,385 B", bytesRun >= 0 && bytesRun <= 9385)
	if lgErr == nil {
		lgSeq, lgConc, lgBytes := lg["sqlite"]["superStepsPerSec"], lg["sqlite_conc"]["superStepsPerSec"], lg["sqlite"]["bytesPerRun"]
		add("LangGraph JS SqliteSaver, sequential", lgSeq, "steps/s", "peer", true)
		add("LangGraph JS SqliteSaver, 8 at once", lgConc, "steps/s", "peer", true)
		add("LangGraph JS checkpoint bytes per run", lgBytes, "B", "peer", true)
		add("ratio Kiln / LangGraph, sequential", seq/lgSeq, "x", ">= 10x", seq/lgSeq >= 10)
		add("ratio Kiln / LangGraph, 8 at once", conc/lgConc, "x", ">= 10x", conc/lgConc >= 10)
		add("footprint LangGraph checkpoints / Kiln database", lgBytes/bytesRun, "x", ">= 10x", lgBytes/bytesRun >= 10)
	} else {
		rows = append(rows, row{"LangGraph JS peer", "n/a", "", "not run: " + lgErr.Error()})
	}
	p50, p99 := get("BenchmarkSSELatency p50-ms"), get("BenchmarkSSELatency p99-ms")
	add("commit to SSE client over HTTP, p50", p50, "ms", "", true)
	add("commit to SSE client over HTTP, p99", p99, "ms", "< 5 ms", p99 >= 0 && p99 < 5)
	disp, fps := get("BenchmarkSchedulerDispatch dispatch-ms"), get("BenchmarkSchedulerDispatch fires/s")
	add("scheduler: 10,000 cron triggers due in one second, all dispatched into runs", disp, "ms", "< 1000 ms", disp >= 0 && disp < 1000)
	add("scheduler throughput (fires dispatched into durable runs)", fps, "fires/s", ">= 5000", fps >= 5000)
	wh50, wh99 := get("BenchmarkWebhookLatency p50-ms"), get("BenchmarkWebhookLatency p99-ms")
	add("webhook delivery to its 202 (signed, run started), p50", wh50, "ms", "", true)
	add("webhook delivery to its 202 (signed, run started), p99", wh99, "ms", "< 10 ms", wh99 >= 0 && wh99 < 10)
	rec := get("BenchmarkRecovery recovery-ms")
	add("recovery: 1,000 crashed runs running again (115 ms on 2026-12-04)", rec, "ms", "< 3000 ms", rec >= 0 && rec < 3000)
	for _, k := range []struct{ key, label string }{
		{"BenchmarkList100k/threads", "thread list, 100,000 threads"},
		{"BenchmarkList100k/inbox-unread", "Unread inbox, 100,000 threads"},
		{"BenchmarkList100k/inbox-action", "Action inbox, 100,000 threads"},
	} {
		v := get(k.key + " p50-ms")
		add(k.label+", p50 (HTTP)", v, "ms", "< 10 ms", v >= 0 && v < 10)
	}
	for _, k := range []struct{ key, label, target string }{
		{"BenchmarkList100k/search-matching", "search, a word in ~1,700 of 100,000 threads", "< 5 ms"},
		{"BenchmarkList100k/search-none", "search, a word in none of 100,000 threads", "< 5 ms"},
		{"BenchmarkList100k/search-two-words", "search, two words (a handful of threads)", ""},
		{"BenchmarkList100k/search-broad", "search, a 3-letter prefix (~1 thread in 10)", ""},
		{"BenchmarkList100k/search-unread", "search in Unread, a word in ~1,700 threads", ""},
		{"BenchmarkList100k/search-action", "search in Action, a word in ~1,700 threads", ""},
	} {
		v := get(k.key + " p50-ms")
		add(k.label+", p50 (HTTP)", v, "ms", k.target, k.target == "" || (v >= 0 && v < 5))
	}
	ms := func(key string) float64 {
		if v := get(key); v >= 0 {
			return v / 1e6
		}
		return -1
	}
	for _, c := range []struct {
		key, label, target string
		limit              float64
	}{
		{"BenchmarkToolsetCall/builtin", "plugin call, built-in (1 KiB JSON echo)", "", 0},
		{"BenchmarkToolsetCall/wasm", "plugin call, WASM, deadline enforced", "< 1 ms", 1},
		{"BenchmarkToolsetCall/process", "plugin call, process (gRPC, mTLS)", "< 0.5 ms", 0.5},
		{"BenchmarkEnable/builtin", "plugin enable + first call, built-in", "", 0},
		{"BenchmarkEnable/wasm-cold-cache", "plugin enable + first call, WASM, cold compile cache", "", 0},
		{"BenchmarkEnable/wasm-warm-cache", "plugin enable + first call, WASM, warm compile cache", "< 20 ms", 20},
		{"BenchmarkEnable/process", "plugin enable + first call, process", "< 25 ms", 25},
		{"BenchmarkWASMColdStart/warm-cache", "  of which WASM host load + first call, warm cache", "", 0},
		{"BenchmarkWASMColdStart/same-host", "  of which WASM host load + first call, compiled in this host", "", 0},
		{"BenchmarkWASMColdStart/small-guest-warm-cache", "  WASM host alone: 319-byte guest, new host, warm cache", "", 0},
		{"BenchmarkProcessStart", "  of which process host start + first call", "", 0},
		{"BenchmarkToolCallStdio", "MCP tool call round trip, stdio (server-everything)", "", 0},
		{"BenchmarkToolCallHTTP", "MCP tool call round trip, Streamable HTTP (server-everything, Node)", "", 0},
		{"BenchmarkToolCallHTTPGo", "MCP tool call round trip, Streamable HTTP (mcp-go server)", "", 0},
		{"BenchmarkCatalogLoad500", "skill catalog load, 500 skills", "< 100 ms", 100},
	} {
		v := ms(c.key + " ns/op")
		add(c.label, v, "ms", c.target, c.limit == 0 || (v >= 0 && v < c.limit))
	}
	refresh := get("BenchmarkRefresh10k ns/op") / 1e6
	add("marketplace: refresh and verify an index of 10,000 plugin versions", refresh, "ms", "< 200 ms", refresh >= 0 && refresh < 200)
	search := get("BenchmarkSearch10k p50-ms")
	add("marketplace: search 10,000 plugin versions, p50", search, "ms", "< 5 ms", search >= 0 && search < 5)
	install, cp := get("BenchmarkInstall20MB copy-x"), get("BenchmarkInstall20MB copy-ms")
	add("marketplace: install a 20 MB plugin from a local marketplace, over copying its archive", install, "x", "<= 2x", install >= 0 && install <= 2)
	add("marketplace: copying that archive (cp, then fsync)", cp, "ms", "", true)
	plain, task := get("BenchmarkTaskCall/plain ms/run"), get("BenchmarkTaskCall/task ms/run")
	add("run with one plain tool call (echo), SQLite", plain, "ms", "", true)
	add("run with one task call (a subagent that answers at once)", task, "ms", "", true)
	over := -1.0
	if plain >= 0 && task >= 0 {
		over = task - plain
	}
	add("  overhead of a task call over a plain tool call", over, "ms", "< 5 ms", over >= 0 && over < 5)
	if *noFanout {
		rows = append(rows, row{"SSE fan-out", "n/a", "", "not measured: -no-fanout"})
	} else {
		fanoutRows(*bin, *count, *settle, add, func(figure, why string) { rows = append(rows, row{figure, "n/a", "", "not measured: " + why}) })
	}
	startupRows(*bin, *count, add, func(figure, why string) { rows = append(rows, row{figure, "n/a", "", "not measured: " + why}) })
	postgresRows(*bin, *count, add, func(figure, why string) { rows = append(rows, row{figure, "n/a", "", "not measured: " + why}) })
	sandboxRows(*bin, strings.Split(*runtimes, ","), add, func(figure, why string) { rows = append(rows, row{figure, "n/a", "", "not measured: " + why}) })
	if rssErr == nil {
		add("idle server resident memory", rss, "MiB", "< 60 MiB", rss < 60)
	} else {
		rows = append(rows, row{"idle server resident memory", "n/a", "< 60 MiB", "not measured: " + rssErr.Error()})
	}
	if sizeErr == nil {
		add("web UI JavaScript, gzipped", jsKB, "KB", "< 150 KB", jsKB < 150)
		add("web UI CSS, gzipped", cssKB, "KB", "", true)
	} else {
		rows = append(rows, row{"web UI JavaScript and CSS, gzipped", "n/a", "< 150 KB", "not measured: " + sizeErr.Error()})
	}
	if paintErr == nil {
		add(fmt.Sprintf("web UI first contentful paint, loopback (median of %d)", *paintRuns), paint, "ms", "< 300 ms", paint < 300)
	} else {
		rows = append(rows, row{"web UI first contentful paint, loopback", "n/a", "< 300 ms", "not measured: " + paintErr.Error()})
	}

	printRows(rows, *count)
}

// verdict is "ok" or "MISSED" for a figure with a target, "" without one.
func verdict(target string, ok bool) string {
	switch {
	case target == "" || target == "peer":
		return ""
	case !ok:
		return "MISSED"
	}
	return "ok"
}

// printRows prints the table and how many targets were missed.
func printRows(rows []row, count int) {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "FIGURE\tVALUE\tTARGET\t")
	missed := 0
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", r.figure, r.value, r.target, r.verdict)
		if r.verdict == "MISSED" {
			missed++
		}
	}
	w.Flush()
	fmt.Printf("\nmedians of %d runs; machine: %d CPUs, %s\n", count, numCPU(), time.Now().Format("2006-01-02"))
	if missed > 0 {
		fmt.Printf("%d target(s) missed\n", missed)
	}
}

// envOr returns the environment variable key, or def when it is empty.
func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func numCPU() int {
	out, err := exec.Command("nproc").Output()
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	return n
}
