package main

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kilnhq/kiln/sandbox/execapi"
)

// With --retire, a POST of execapi.RetirePath with the access token
// SIGKILLs every process of the sandbox's PID namespace but PID 1 and
// kiln-execd itself, and answers 204 once they have all ended. From then
// on kiln-execd serves nothing (410) and no longer ends with the main
// command: Kiln's docker runtime answers a delete as soon as the
// sandbox's processes are gone, and removes the container, which costs
// the engine far more, when it is quiet. Kiln's proxy never forwards
// this path. It refuses to kill anything outside a PID namespace of its
// own, where kill(-1) would reach the host's processes.

// retireWithin bounds how long a retire waits for the processes to end.
const retireWithin = 5 * time.Second

// retirable serves the execution API until a retire.
type retirable struct {
	api     http.Handler
	token   []byte
	retired atomic.Bool
}

func (rt *retirable) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == execapi.RetirePath && r.Method != http.MethodPost:
		w.Header().Set("Allow", http.MethodPost)
		writeErr(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", execapi.RetirePath+" takes POST")
	case r.URL.Path == execapi.RetirePath && subtle.ConstantTimeCompare([]byte(r.Header.Get(execapi.TokenHeader)), rt.token) != 1:
		writeErr(w, http.StatusUnauthorized, "UNAUTHORIZED", "missing or wrong "+execapi.TokenHeader)
	case r.URL.Path == execapi.RetirePath:
		if !inOwnPIDNamespace() {
			writeErr(w, http.StatusInternalServerError, "RUNTIME_ERROR", "kiln-execd is not in a PID namespace of its own, so it will not kill every process it can signal")
			return
		}
		rt.retired.Store(true)
		if err := killOthers(retireWithin); err != nil {
			writeErr(w, http.StatusInternalServerError, "RUNTIME_ERROR", err.Error())
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case rt.retired.Load():
		writeErr(w, http.StatusGone, "RETIRED", "this sandbox was destroyed")
	default:
		rt.api.ServeHTTP(w, r)
	}
}

func writeErr(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"code": code, "message": message})
}

// inOwnPIDNamespace reports whether this process is outside the host's
// initial PID namespace (whose /proc/self/ns/pid is always
// pid:[4026531836], the kernel's PROC_PID_INIT_INO), as in a container.
func inOwnPIDNamespace() bool {
	ns, err := os.Readlink("/proc/self/ns/pid")
	return err == nil && ns != "pid:[4026531836]"
}

// killOthers SIGKILLs every process it may signal but PID 1 and itself
// (kill(2) with pid -1: in a sandbox, every process of its PID
// namespace), again until none is left but zombies, for at most within.
func killOthers(within time.Duration) error {
	self := os.Getpid()
	deadline := time.Now().Add(within)
	for {
		if err := syscall.Kill(-1, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
			return fmt.Errorf("kill: %w", err)
		}
		left, err := othersAlive(self)
		if err != nil || len(left) == 0 {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v did not end within %v", left, within)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// othersAlive lists the processes in /proc other than PID 1 and self
// that have not ended (a zombie has: it only waits to be reaped).
func othersAlive(self int) ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var left []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == 1 || pid == self {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // ended meanwhile
		}
		// The state follows the command's closing parenthesis, which the
		// command itself may contain.
		if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X') {
			continue
		}
		left = append(left, pid)
	}
	return left, nil
}
