package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"
	"time"

	"github.com/kilnhq/kiln/sdk/client"
)

// The start-up workload: startWASM WASM and startProcess process copies of
// the calc example, each a distinct module or binary, installed and
// enabled in one data directory.
const (
	startWASM    = 5
	startProcess = 5
)

// startupRows measures the time from starting the built server to its
// first answer on /healthz, with no plugins and with the start-up
// workload installed (after one start that compiled and described the
// WASM ones, as after any restart), max(count, 5) starts each, plus the
// same with registry.Open alone (BenchmarkStartup), and a WASM plugin
// disabled and enabled again in one server (BenchmarkReenable).
func startupRows(bin string, count int, add func(figure string, v float64, unit, target string, ok bool), note func(figure, why string)) {
	const figure = "server start to healthy"
	runs := max(count, 5) // a start is short; more of them steady the median
	empty, err := os.MkdirTemp("", "kiln-bench-start-empty")
	if err != nil {
		note(figure, err.Error())
		return
	}
	defer os.RemoveAll(empty)
	none, err := startTimes(bin, empty, runs)
	if err != nil {
		note(figure+", no plugins", err.Error())
		return
	}
	add(fmt.Sprintf("%s, no plugins (median of %d, %s)", figure, runs, spread(none)), median(none), "ms", "", true)

	data, err := os.MkdirTemp("", "kiln-bench-start")
	if err != nil {
		note(figure, err.Error())
		return
	}
	defer os.RemoveAll(data)
	if err := installStartupPlugins(bin, data); err != nil {
		note(figure+", 10 plugins", err.Error())
		return
	}
	ten, err := startTimes(bin, data, runs)
	if err != nil {
		note(figure+", 10 plugins", err.Error())
		return
	}
	add(fmt.Sprintf("%s, %d WASM + %d process plugins (median of %d, %s)", figure, startWASM, startProcess, runs, spread(ten)),
		median(ten), "ms", "< 300 ms", median(ten) < 300)

	m := metrics{}
	if err := runGoBench(bench{"./plugins/registry", "^BenchmarkStartup/10-plugins$", "20x"}, count, m); err != nil {
		note("  of which registry.Open", err.Error())
		return
	}
	add("  of which registry.Open with the same 10 plugins (BenchmarkStartup, p50)", median(m["BenchmarkStartup/10-plugins p50-ms"]), "ms", "", true)
	add("  and then one call on each of the 10 at once (the deferred compiles)", median(m["BenchmarkStartup/10-plugins first-call-ms"]), "ms", "", true)
	if err := runGoBench(bench{"./plugins/registry", "^BenchmarkReenable$", "50x"}, count, m); err != nil {
		note("plugin enabled again + first call, WASM, same server", err.Error())
		return
	}
	v := median(m["BenchmarkReenable/wasm ns/op"]) / 1e6
	add("plugin enabled again + first call, WASM, same server (BenchmarkReenable)", v, "ms", "< 20 ms", v < 20)
}

// spread says the range of v, in ms.
func spread(v []float64) string {
	return fmt.Sprintf("%.0f-%.0f ms", slices.Min(v), slices.Max(v))
}

// startTimes starts the server on data n times and returns, in ms, how
// long each took from exec to a 200 from /healthz. Every enabled plugin
// must be enabled after each start.
func startTimes(bin, data string, n int) ([]float64, error) {
	var out []float64
	for range n {
		d, err := startOnce(bin, data)
		if err != nil {
			return nil, err
		}
		out = append(out, float64(d.Microseconds())/1000)
		time.Sleep(200 * time.Millisecond) // let the last server's plugins exit
	}
	return out, nil
}

// startOnce starts the server on data, waits for /healthz, checks its
// plugins, and stops it gracefully.
func startOnce(bin, data string) (time.Duration, error) {
	addr, err := freeAddr()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(bin, "serve", "--addr", addr, "--data", data)
	cmd.Env = append(os.Environ(), "KILN_API_TOKEN=", "KILN_ALLOWED_ORIGINS=")
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGINT)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The server binds its address before it loads anything and serves
	// after: a request that connects waits for that.
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/healthz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
			err = fmt.Errorf("/healthz: %s", resp.Status)
		}
		if ctx.Err() != nil {
			return 0, fmt.Errorf("server did not come up: %w", err)
		}
		time.Sleep(time.Millisecond)
	}
	took := time.Since(start)
	c, err := client.New("http://" + addr)
	if err != nil {
		return 0, err
	}
	list, err := c.Plugins(ctx)
	if err != nil {
		return 0, err
	}
	for _, p := range list {
		if p.Enabled && p.Status != "enabled" {
			return 0, fmt.Errorf("plugin %s is %s after the start: %s", p.ID, p.Status, p.Error)
		}
	}
	return took, nil
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// installStartupPlugins builds the calc example for both runtimes and
// installs the start-up workload into data through a running server,
// which compiles and describes the WASM copies as it enables them.
func installStartupPlugins(bin, data string) error {
	src, err := os.MkdirTemp("", "kiln-bench-plugins")
	if err != nil {
		return err
	}
	defer os.RemoveAll(src)
	const pkg = "github.com/kilnhq/kiln/sdk/plugin/examples/calc"
	wasm, err := goBuild(src, pkg, "calc.wasm", "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if err != nil {
		return err
	}
	native, err := goBuild(src, pkg, "calc")
	if err != nil {
		return err
	}
	var dirs []string
	for i := range startWASM + startProcess {
		rt, entry, code := "wasm", "calc.wasm", wasm
		if i >= startWASM {
			rt, entry, code = "process", "calc", native
		}
		id := fmt.Sprintf("calc-%s-%d", rt, i)
		dir := filepath.Join(src, id)
		if err := writePlugin(dir, id, rt, entry, distinct(rt, code, id)); err != nil {
			return err
		}
		dirs = append(dirs, dir)
	}
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, "serve", "--addr", addr, "--data", data)
	cmd.Env = append(os.Environ(), "KILN_API_TOKEN=", "KILN_ALLOWED_ORIGINS=")
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { cmd.Process.Signal(syscall.SIGINT); cmd.Wait() }()
	c, err := client.New("http://" + addr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for {
		if _, err := c.Plugins(ctx); err == nil {
			break
		} else if ctx.Err() != nil {
			return fmt.Errorf("server did not come up: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Fprintf(os.Stderr, "installing %d plugins (compiles %d WASM modules, a second or two each)\n", len(dirs), startWASM)
	for _, dir := range dirs {
		in, err := c.InstallPlugin(ctx, client.InstallPluginRequest{Path: dir, Consent: true})
		if err != nil {
			return fmt.Errorf("install %s: %w", filepath.Base(dir), err)
		}
		if in.Status != "enabled" {
			return fmt.Errorf("install %s: %s: %s", in.ID, in.Status, in.Error)
		}
	}
	return nil
}

// goBuild builds pkg into dir/name with extra environment, and returns
// the file's bytes; a wasip1 build is a reactor (c-shared).
func goBuild(dir, pkg, name string, env ...string) ([]byte, error) {
	out := filepath.Join(dir, name)
	args := []string{"build", "-o", out}
	if len(env) > 0 {
		args = append(args, "-buildmode=c-shared")
	}
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), append(args, pkg)...)
	cmd.Env = append(os.Environ(), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go %v: %v\n%s", cmd.Args[1:], err, b)
	}
	return os.ReadFile(out)
}

// writePlugin lays out a plugin folder: code at entry and its manifest.
func writePlugin(dir, id, rt, entry string, code []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, entry), code, 0o755); err != nil {
		return err
	}
	sum := sha256.Sum256(code)
	mf, err := json.Marshal(map[string]any{
		"apiVersion": "kiln.dev/v1", "id": id, "version": "1.0.0",
		"description": "calc, for the start-up benchmark.", "provides": []string{"toolset"},
		"runtime": rt, "entry": entry, "sha256": hex.EncodeToString(sum[:]),
	})
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "kiln-plugin.json"), mf, 0o644)
}

// distinct returns code made unique by tag without changing what it does:
// a WASM custom section, or bytes after the end of an executable (as
// plugins/registry's distinctCode).
func distinct(rt string, code []byte, tag string) []byte {
	out := slices.Clip(code)
	if rt != "wasm" {
		return append(out, "\x00kiln-bench:"+tag...)
	}
	name := "kiln-bench"
	body := append(append([]byte{byte(len(name))}, name...), tag...)
	if len(body) > 127 {
		panic(errors.New("distinct: tag too long for a one-byte section size"))
	}
	out = append(out, 0, byte(len(body)))
	return append(out, body...)
}
