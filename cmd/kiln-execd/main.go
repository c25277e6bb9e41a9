// Command kiln-execd serves OpenSandbox's execution API (execd) over the
// local operating system, inside a sandbox:
//
//	kiln-execd --listen unix:/kiln/run/execd.sock --token-file /kiln/run/token -- tail -f /dev/null
//
// --listen is unix:PATH (a socket of mode 0660; a stale file there is
// removed first) or tcp:HOST:PORT. The access token comes from
// --token-file or the environment variable KILN_EXECD_TOKEN; without one
// it refuses to start. A command after "--" is the sandbox's main
// process: kiln-execd forwards SIGTERM and SIGINT to it and exits with
// its status once it exits. Run as PID 1, kiln-execd also reaps the
// orphans that reparent to it, by running itself as its only child and
// reaping everything else. It logs to stderr and never the token.
//
// With --retire it also serves POST /kiln/retire (execapi.RetirePath), which
// ends every process of the sandbox's PID namespace but PID 1 and itself;
// only for a sandbox's own PID namespace, where that is the sandbox.
//
// With --egress-proxy HOST:PORT and --egress-socket PATH it also serves
// an HTTP proxy (CONNECT and absolute http:// requests) on HOST:PORT that
// sends every connection through the unix socket at PATH to Kiln, which
// allows or refuses it (sandbox/egress).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/kilnhq/kiln/sandbox/egress"
	"github.com/kilnhq/kiln/sandbox/execapi"
)

// childEnv marks the process that PID 1 started to do the work.
const childEnv = "KILN_EXECD_CHILD"

func main() {
	log.SetPrefix("kiln-execd: ")
	log.SetFlags(log.LstdFlags)
	if os.Getpid() == 1 && os.Getenv(childEnv) == "" {
		os.Exit(initProcess())
	}
	code, err := run(os.Args[1:])
	if err != nil {
		log.Print(err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// initProcess runs kiln-execd again as its child, forwards SIGTERM and
// SIGINT to it, reaps every process that ends, and returns the child's
// exit code.
func initProcess() int {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	cmd := exec.Command("/proc/self/exe", os.Args[1:]...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		log.Printf("start: %v", err)
		return 1
	}
	pid := cmd.Process.Pid
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			syscall.Kill(pid, sig.(syscall.Signal))
			continue
		}
		for {
			var ws syscall.WaitStatus
			p, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if p <= 0 || err != nil {
				break
			}
			if p == pid {
				if ws.Signaled() {
					return 128 + int(ws.Signal())
				}
				return ws.ExitStatus()
			}
		}
	}
	return 1
}

func run(args []string) (int, error) {
	fl := flag.NewFlagSet("kiln-execd", flag.ContinueOnError)
	listen := fl.String("listen", "", "where to serve: unix:PATH or tcp:HOST:PORT")
	tokenFile := fl.String("token-file", "", "file holding the access token (else $KILN_EXECD_TOKEN)")
	egressProxy := fl.String("egress-proxy", "", "serve the egress HTTP proxy on HOST:PORT (with --egress-socket)")
	egressSocket := fl.String("egress-socket", "", "Kiln's egress unix socket, which the proxy's connections go through")
	retire := fl.Bool("retire", false, "serve POST "+execapi.RetirePath+", which SIGKILLs every process of the PID namespace but PID 1 and kiln-execd (only in a sandbox's own PID namespace)")
	if err := fl.Parse(args); err != nil {
		return 2, err
	}
	token := os.Getenv("KILN_EXECD_TOKEN")
	os.Unsetenv("KILN_EXECD_TOKEN") // commands do not see it
	if *tokenFile != "" {
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			return 1, fmt.Errorf("read the token: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	if token == "" {
		return 2, errors.New("no access token: set KILN_EXECD_TOKEN or --token-file")
	}
	api, err := execapi.Handler(execapi.LocalBackend{}, token)
	if err != nil {
		return 1, err
	}
	h := &retirable{api: api, token: []byte(token)}
	var handler http.Handler = api
	if *retire {
		handler = h
	}
	if (*egressProxy == "") != (*egressSocket == "") {
		return 2, errors.New("--egress-proxy and --egress-socket go together")
	}
	ln, err := listenOn(*listen)
	if err != nil {
		return 2, err
	}
	if *egressProxy != "" {
		pln, err := net.Listen("tcp", *egressProxy)
		if err != nil {
			return 2, fmt.Errorf("egress proxy: %w", err)
		}
		go egress.Proxy(pln, *egressSocket)
		log.Printf("egress proxy on %s through %s", *egressProxy, *egressSocket)
	}
	srv := &http.Server{Handler: handler, ErrorLog: log.Default(), ReadHeaderTimeout: 30 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Printf("serving on %s", *listen)

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	if argv := fl.Args(); len(argv) > 0 {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			return 1, fmt.Errorf("start %s: %w", argv[0], err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		for {
			select {
			case sig := <-sigs:
				if h.retired.Load() {
					return 0, nil
				}
				cmd.Process.Signal(sig)
			case err := <-served:
				cmd.Process.Kill()
				return 1, fmt.Errorf("serve: %w", err)
			case err := <-done:
				if h.retired.Load() {
					// Retired: the container goes with kiln-execd, when Kiln removes it.
					done = nil
					continue
				}
				srv.Shutdown(context.Background())
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
						return 128 + int(ws.Signal()), nil
					}
					return ee.ExitCode(), nil
				}
				if err != nil {
					return 1, err
				}
				log.Printf("%s exited", argv[0])
				return 0, nil
			}
		}
	}
	select {
	case <-sigs:
		srv.Shutdown(context.Background())
		return 0, nil
	case err := <-served:
		return 1, fmt.Errorf("serve: %w", err)
	}
}

// listenOn opens "unix:PATH" (mode 0660, after removing a stale socket)
// or "tcp:HOST:PORT".
func listenOn(addr string) (net.Listener, error) {
	kind, where, _ := strings.Cut(addr, ":")
	switch kind {
	case "unix":
		if fi, err := os.Lstat(where); err == nil && fi.Mode()&os.ModeSocket != 0 {
			os.Remove(where)
		}
		ln, err := net.Listen("unix", where)
		if err != nil {
			return nil, err
		}
		if err := os.Chmod(where, 0o660); err != nil {
			ln.Close()
			return nil, err
		}
		return ln, nil
	case "tcp":
		return net.Listen("tcp", where)
	}
	return nil, fmt.Errorf("--listen %q: want unix:PATH or tcp:HOST:PORT", addr)
}
