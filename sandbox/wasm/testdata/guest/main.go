// Command guest is the test programs of the wasm sandbox runtime, one
// WASI module built by the tests (GOOS=wasip1 GOARCH=wasm): its first
// argument picks what it does.
package main

import (
	"fmt"
	"io"
	"os"
	"strings"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "guest: want a mode")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "args": // prints its arguments, $GUEST_VAR and its working folder, and exits 3
		wd, _ := os.Getwd()
		fmt.Printf("args=%s var=%s pwd=%s\n", strings.Join(os.Args[2:], ","), os.Getenv("GUEST_VAR"), wd)
		fmt.Fprintln(os.Stderr, "to stderr")
		os.Exit(3)
	case "cat": // copies stdin to stdout
		io.Copy(os.Stdout, os.Stdin)
	case "escape": // tries to read the host file os.Args[3] (relative to / as os.Args[2]) out of the sandbox
		rel, host := os.Args[2], os.Args[3]
		if err := os.Symlink(rel, "/link"); err != nil {
			fmt.Println("symlink:", err)
		}
		for _, p := range []string{"/link", "/" + rel, "/../" + rel, host} {
			if data, err := os.ReadFile(p); err == nil {
				fmt.Printf("read %s: %q\n", p, data)
			} else {
				fmt.Printf("read %s failed\n", p)
			}
		}
	case "bomb": // allocates until it is stopped
		var keep [][]byte
		for i := 0; ; i++ {
			b := make([]byte, 1<<20)
			for j := range b {
				b[j] = byte(i + j)
			}
			keep = append(keep, b)
			if i%64 == 0 {
				fmt.Println(len(keep), "MiB")
			}
		}
	case "loop": // spins without a call
		fmt.Println("looping")
		n := 0
		for {
			n++
		}
	default:
		fmt.Fprintln(os.Stderr, "guest: no mode", os.Args[1])
		os.Exit(2)
	}
}
