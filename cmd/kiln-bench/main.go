// Command kiln-bench runs Kiln's benchmarks and prints the figures the
// issues ask for as one table, next to their targets. When Node is present
// it also runs the LangGraph JS peer benchmark on the same workload, in the
// same run, and prints the ratio.
//
//	go run ./cmd/kiln-bench [-count 3] [-langgraph DIR] [-no-langgraph]
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// bench is one `go test -bench` invocation.
type bench struct {
	pkg, pattern, benchtime string
}

var benches = []bench{
	{"./core/sqlite", "^BenchmarkEngine", "1x"},
	{"./core/sqlite", "^BenchmarkRecovery", "1x"},
	{"./web", "^BenchmarkSSELatency", "1x"},
	{"./web", "^BenchmarkList100k", "1x"},
}

// metrics maps "BenchmarkName/sub unit" to the values of each -count run.
type metrics map[string][]float64

var lineRE = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)

func runGoBench(b bench, count int, m metrics) error {
	args := []string{"test", "-run", "^$", "-bench", b.pattern, "-benchtime", b.benchtime, "-count", strconv.Itoa(count), "-timeout", "30m", b.pkg}
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
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	work := filepath.Join(cache, "kiln-bench", "langgraph")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, err
	}
	for _, f := range []string{"bench.mjs", "package.json", "package-lock.json"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return nil, err
		}
		old, _ := os.ReadFile(filepath.Join(work, f))
		if !bytes.Equal(old, b) {
			if err := os.WriteFile(filepath.Join(work, f), b, 0o644); err != nil {
				return nil, err
			}
			os.RemoveAll(filepath.Join(work, "node_modules"))
		}
	}
	if _, err := os.Stat(filepath.Join(work, "node_modules")); err != nil {
		fmt.Fprintln(os.Stderr, "npm ci (LangGraph benchmark; compiles better-sqlite3, about two minutes the first time)")
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir, cmd.Stdout, cmd.Stderr = work, os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("npm ci: %w", err)
		}
	}
	cmd := exec.Command("node", "bench.mjs")
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "VARIANTS=sqlite,sqlite_conc", "DB="+filepath.Join(work, "ck.sqlite"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("node bench.mjs: %w", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.HasPrefix(line, "JSON ") {
			continue
		}
		var res struct {
			Results map[string]map[string]any `json:"results"`
		}
		if err := json.Unmarshal([]byte(line[5:]), &res); err != nil {
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
	return nil, fmt.Errorf("no JSON line in LangGraph output")
}

// idleRSS starts the built server on a free port and reads its resident
// memory after it has settled.
func idleRSS(bin string) (float64, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	addr := l.Addr().String()
	l.Close()
	data, err := os.MkdirTemp("", "kiln-bench-rss")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(data)
	cmd := exec.Command(bin, "serve", "--addr", addr, "--data", data)
	cmd.Env = append(os.Environ(), "KILN_API_TOKEN=", "KILN_ALLOWED_ORIGINS=")
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			break
		}
		if ctx.Err() != nil {
			return 0, fmt.Errorf("server did not come up: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(3 * time.Second)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
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

type row struct{ figure, value, target, verdict string }

func main() {
	count := flag.Int("count", 3, "runs of each benchmark; the table shows medians")
	lgDir := flag.String("langgraph", "../shared/bench/langgraph", "LangGraph JS benchmark directory")
	noLG := flag.Bool("no-langgraph", false, "skip the LangGraph JS benchmark")
	bin := flag.String("bin", "bin/kiln", "kiln binary for the idle-memory figure")
	flag.Parse()

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

	var rows []row
	add := func(figure string, v float64, unit, target string, ok bool) {
		verdict := "ok"
		switch {
		case target == "" || target == "peer":
			verdict = ""
		case !ok:
			verdict = "MISSED"
		}
		if v < 0 {
			rows = append(rows, row{figure, "n/a", target, "not measured"})
			return
		}
		rows = append(rows, row{figure, fmt.Sprintf("%.4g %s", v, unit), target, verdict})
	}
	seq := get("BenchmarkEngine/sequential steps/s")
	conc := get("BenchmarkEngine/concurrent-8 steps/s")
	add("engine, sequential (200 runs x 21 steps, SQLite)", seq, "steps/s", ">= 3000", seq >= 3000)
	add("engine, 8 runs at once", conc, "steps/s", ">= 3000", conc >= 3000)
	bytesRun := get("BenchmarkEngine/sequential db-B/run")
	add("database per run (checkpoints, messages, events, runs, threads)", bytesRun, "B", "<= 1/10 of LangGraph", true)
	if lgErr == nil {
		lgSeq, lgConc, lgBytes := lg["sqlite"]["superStepsPerSec"], lg["sqlite_conc"]["superStepsPerSec"], lg["sqlite"]["bytesPerRun"]
		add("LangGraph JS SqliteSaver, sequential", lgSeq, "steps/s", "peer", true)
		add("LangGraph JS SqliteSaver, 8 at once", lgConc, "steps/s", "peer", true)
		add("LangGraph JS checkpoint bytes per run", lgBytes, "B", "peer", true)
		add("ratio Kiln / LangGraph, sequential", seq/lgSeq, "x", ">= 6x", seq/lgSeq >= 6)
		add("ratio Kiln / LangGraph, 8 at once", conc/lgConc, "x", ">= 6x", conc/lgConc >= 6)
		add("footprint LangGraph checkpoints / Kiln database", lgBytes/bytesRun, "x", ">= 10x", lgBytes/bytesRun >= 10)
	} else {
		rows = append(rows, row{"LangGraph JS peer", "n/a", "", "not run: " + lgErr.Error()})
	}
	p50, p99 := get("BenchmarkSSELatency p50-ms"), get("BenchmarkSSELatency p99-ms")
	add("commit to SSE client over HTTP, p50", p50, "ms", "", true)
	add("commit to SSE client over HTTP, p99", p99, "ms", "< 5 ms", p99 >= 0 && p99 < 5)
	rec := get("BenchmarkRecovery recovery-ms")
	add("recovery: 1,000 crashed runs running again", rec, "ms", "< 3000 ms", rec >= 0 && rec < 3000)
	for _, k := range []struct{ key, label string }{
		{"BenchmarkList100k/threads", "thread list, 100,000 threads"},
		{"BenchmarkList100k/inbox-unread", "Unread inbox, 100,000 threads"},
		{"BenchmarkList100k/inbox-action", "Action inbox, 100,000 threads"},
	} {
		v := get(k.key + " p50-ms")
		add(k.label+", p50 (HTTP)", v, "ms", "< 10 ms", v >= 0 && v < 10)
	}
	if rssErr == nil {
		add("idle server resident memory", rss, "MiB", "< 60 MiB", rss < 60)
	} else {
		rows = append(rows, row{"idle server resident memory", "n/a", "< 60 MiB", "not measured: " + rssErr.Error()})
	}

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
	fmt.Printf("\nmedians of %d runs; machine: %d CPUs, %s\n", *count, numCPU(), time.Now().Format("2006-01-02"))
	if missed > 0 {
		fmt.Printf("%d target(s) missed\n", missed)
	}
}

func numCPU() int {
	out, err := exec.Command("nproc").Output()
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	return n
}
