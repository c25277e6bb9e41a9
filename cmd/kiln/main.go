// Command kiln is the Kiln server and its command-line client.
//
// kiln serve runs the server. The other commands talk to a server over its
// HTTP API through the Go SDK (github.com/kilnhq/kiln/sdk/client): kiln run
// starts and follows runs, kiln inbox shows what finished and what waits
// for a decision, kiln approve, reject, edit and respond decide, kiln
// threads, runs, folders, events, logs and status inspect and organise,
// kiln grants, memories and settings shape the agent's workspace, and
// kiln sandbox creates sandboxes, runs commands and copies files in them.
// Every command prints a readable table by default and the API's JSON
// with -o json; see kiln --help.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kilnhq/kiln/sdk/client"
)

// version is the release version, set at build time with
// -ldflags "-X main.version=v1.2.3".
var version = "dev"

// Exit statuses.
const (
	exitOK          = 0
	exitFailure     = 1   // a failed command, or a run that failed or was cancelled
	exitWaiting     = 2   // a followed run is waiting for a decision
	exitInterrupted = 130 // stopped by Ctrl-C
)

// Environment variables read by the client commands.
const (
	envServer = "KILN_SERVER"
	envToken  = "KILN_API_TOKEN"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal cancels the command gracefully; a second one kills.
	context.AfterFunc(ctx, stop)
	code := execute(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// execute runs the kiln command line and returns the exit status.
func execute(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{}
	root := newRootCmd(a)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	return a.report(cmd, err, stderr)
}

// app holds the global flags and what the commands share.
type app struct {
	flags  *pflag.FlagSet // the root's persistent flags
	server string
	token  string
	output string
}

func newRootCmd(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:   "kiln",
		Short: "Kiln runs long-lived AI agents and brings you their results and questions",
		Long: `Kiln is a server for long-running AI agent runs, organised like an inbox.

You start a run on a thread with a message; the agent works on its own,
calling tools. When it finishes, the thread lands in the Unread queue. When
it wants to call a tool that needs a human (a policy decides which), the run
pauses and the call lands in the Action queue until you approve, edit,
reject or answer it. Runs survive server restarts.

Start a server with 'kiln serve'; every other command talks to one over its
HTTP API, at --server (or $KILN_SERVER) with --token (or $KILN_API_TOKEN,
or the file $KILN_API_TOKEN_FILE names).
With -o json commands print the API's JSON, for scripts.

Exit status: 0 on success, 1 on an error or a failed or cancelled run, 2
when a followed run waits for a decision, 130 when interrupted; kiln
sandbox exec exits with its command's status.`,
		Example: `  kiln serve
  kiln run "Summarise yesterday's logs" --follow
  kiln inbox
  kiln approve int_123 --follow
  kiln threads show thr_123`,
		Version:       version,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetVersionTemplate("kiln {{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	a.flags = root.PersistentFlags()
	a.flags.StringVar(&a.server, "server", client.DefaultURL, "Kiln server URL (env "+envServer+")")
	a.flags.StringVar(&a.token, "token", "", "API token of the server (env "+envToken+")")
	a.flags.StringVarP(&a.output, "output", "o", "table", "output format: table or json")
	_ = root.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"table", "json"}, cobra.ShellCompDirectiveNoFileComp))
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if a.output != "table" && a.output != "json" {
			return usageError{fmt.Errorf("--output must be table or json, not %q", a.output)}
		}
		return nil
	}

	root.AddGroup(
		&cobra.Group{ID: "runs", Title: "Runs and decisions:"},
		&cobra.Group{ID: "organise", Title: "Threads and folders:"},
		&cobra.Group{ID: "workspace", Title: "The agent's workspace:"},
		&cobra.Group{ID: "server", Title: "Server:"},
	)
	add := func(group string, cmds ...*cobra.Command) {
		for _, c := range cmds {
			c.GroupID = group
			root.AddCommand(c)
		}
	}
	add("runs", newRunCmd(a), newRunsCmd(a), newInboxCmd(a))
	add("runs", newDecisionCmds(a)...)
	add("organise", newThreadsCmd(a), newFoldersCmd(a), newTriggersCmd(a))
	add("workspace", newGrantsCmd(a), newMemoriesCmd(a), newSettingsCmd(a), newSkillsCmd(a), newMCPServersCmd(a), newSandboxCmd(a))
	add("server", newMCPCmd(a))
	add("server", newServeCmd(), newMigrateCmd(), newStatusCmd(a), newReadyCmd(a), newToolsCmd(a), newEventsCmd(a), newLogsCmd(a), newVersionCmd(a))
	add("server", newPluginCmd(a), newMarketplaceCmd(a))
	add("server", newProvidersCmd(a), newModelsCmd(a))
	root.AddCommand(newSelfPluginCmd())
	root.SetHelpCommandGroupID("server")
	root.SetCompletionCommandGroupID("server")
	return root
}

// serverURL returns --server, else $KILN_SERVER, else the default.
func (a *app) serverURL() string {
	if !a.flags.Changed("server") {
		if s := os.Getenv(envServer); s != "" {
			return s
		}
	}
	return a.server
}

// client returns a client for the configured server.
func (a *app) client() (*client.Client, error) {
	token := a.token
	if !a.flags.Changed("token") {
		token = os.Getenv(envToken)
	}
	if path := os.Getenv(envTokenFile); token == "" && path != "" {
		var err error
		if token, err = readTokenFile(path); err != nil {
			return nil, localError{err: err}
		}
	}
	return client.New(a.serverURL(), client.WithToken(token), client.WithUserAgent("kiln-cli/"+version))
}

// kilnCmd is the prefix of commands suggested to the user: it names the
// server when it was given with --server, as the environment may not hold it.
func (a *app) kilnCmd() string {
	if a.flags.Changed("server") {
		return "kiln --server " + shellQuote(a.server)
	}
	return "kiln"
}

// jsonOutput reports whether -o json was given.
func (a *app) jsonOutput() bool { return a.output == "json" }

// usageError is a command line the command cannot run with.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// localError is a failure of the command's own work, such as kiln serve
// not being able to listen, as opposed to one of reaching a server: report
// prints it as it is, with its hint, and never as a connection problem.
type localError struct {
	err  error
	hint string // what to do, on a line of its own; may be empty
}

func (e localError) Error() string { return e.err.Error() }
func (e localError) Unwrap() error { return e.err }

// hintError is an error, typically the server's, with what the user can
// do about it: report prints the hint on a line of its own.
type hintError struct {
	err  error
	hint string
}

func (e hintError) Error() string { return e.err.Error() }
func (e hintError) Unwrap() error { return e.err }

// exitError ends the process with a status. With a nil err the command has
// already said why.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// report prints err, if any, as "error: ..." with a hint, and returns the
// exit status.
func (a *app) report(cmd *cobra.Command, err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	code := exitFailure
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
		if ee.err == nil {
			return code
		}
	}
	if errors.Is(err, context.Canceled) {
		return exitInterrupted
	}
	msg, hint := a.describe(err)
	var ue usageError
	if errors.As(err, &ue) || strings.HasPrefix(msg, "unknown command") {
		hint = fmt.Sprintf("Run '%s --help' for usage.", cmd.CommandPath())
	}
	fmt.Fprintf(stderr, "error: %s\n", msg)
	if hint != "" {
		fmt.Fprintln(stderr, hint)
	}
	return code
}

// describe turns err into a message and an optional hint for the user.
func (a *app) describe(err error) (msg, hint string) {
	var le localError
	if errors.As(err, &le) {
		return le.Error(), le.hint
	}
	var he hintError
	if errors.As(err, &he) {
		msg, _ := a.describe(he.err)
		return msg, he.hint
	}
	server := a.serverURL()
	var opErr *net.OpError
	var dnsErr *net.DNSError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Sprintf("the Kiln server is not running at %s", server),
			"Start it with 'kiln serve', or point --server (or $" + envServer + ") at a running one."
	case errors.As(err, &dnsErr), errors.As(err, &opErr):
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // without the method and URL
		}
		return fmt.Sprintf("cannot reach the Kiln server at %s: %v", server, err), ""
	case client.IsUnauthorized(err):
		return err.Error(), "Pass the server's token with --token or $" + envToken + "."
	}
	return err.Error(), ""
}

func newVersionCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of this kiln binary",
		Long:  "Print the version of this kiln binary. 'kiln status' shows the server's.",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if a.jsonOutput() {
				return writeJSON(cmd.OutOrStdout(), map[string]string{
					"version": version, "go": runtime.Version(), "os": runtime.GOOS, "arch": runtime.GOARCH,
				})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "kiln %s (%s %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}
