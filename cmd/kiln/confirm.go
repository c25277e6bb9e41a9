package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"
)

// stdinIsTerminal reports whether r, the command's standard input, is a
// terminal a question can be asked on. Tests replace it.
var stdinIsTerminal = func(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// confirm asks question on w and reads the answer from cmd's standard
// input: true for y or yes, false for anything else (Enter alone
// included). When standard input is not a terminal it asks nothing and
// returns refusal as the error.
func confirm(cmd *cobra.Command, w io.Writer, question, refusal string) (bool, error) {
	in := cmd.InOrStdin()
	if !stdinIsTerminal(in) {
		return false, errors.New(refusal)
	}
	fmt.Fprintf(w, "%s [y/N] ", question)
	answer, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return true, nil
	}
	return false, nil
}

// destructive describes what a command that deletes something asks
// before it does.
type destructive struct {
	// action names what is done, for the refusal when nobody can be
	// asked: "deleting thread thr_123".
	action string
	// question returns the question to ask on a terminal, "Delete thread
	// thr_123 with its runs and messages?". It may ask the server first; ""
	// means there is nothing to lose and nothing to ask.
	question func() (string, error)
	// declined is printed when the answer is no: "Not deleted."
	declined string
}

// addYesFlag adds the --yes (-y) flag of a destructive command.
func addYesFlag(cmd *cobra.Command, yes *bool) {
	cmd.Flags().BoolVarP(yes, "yes", "y", false, "do it without asking (needed when standard input is not a terminal)")
}

// confirmDestructive guards a destructive command whose --yes flag is
// yes. With --yes it returns nil at once. Otherwise, when standard input
// is a terminal it asks d's question on standard error (so that standard
// output keeps only the command's result) and returns nil on y or yes;
// when it is not (a pipe, a script, a cron job) nobody can answer, and it
// returns an error saying to rerun with --yes, without asking the server
// anything. A declined question prints d.declined on standard error and
// returns an exitError with status 1.
func confirmDestructive(cmd *cobra.Command, yes bool, d destructive) error {
	if yes {
		return nil
	}
	errw := cmd.ErrOrStderr()
	if !stdinIsTerminal(cmd.InOrStdin()) {
		return fmt.Errorf("%s needs confirmation, and standard input is not a terminal to ask on: rerun with --yes", d.action)
	}
	question, err := d.question()
	if err != nil || question == "" {
		return err
	}
	ok, err := confirm(cmd, errw, question, "")
	if err != nil {
		return err
	}
	if !ok {
		fmt.Fprintln(errw, d.declined)
		return &exitError{code: exitFailure}
	}
	return nil
}
