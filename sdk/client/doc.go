// Package client is the Go SDK for the HTTP API of a Kiln server.
//
// Kiln runs long-lived AI agent runs on threads. Finished runs land in the
// Unread queue of the inbox; runs that hold a tool call for a human land in
// the Action queue until someone decides it. The SDK speaks the server's
// wire format through the domain types of package
// github.com/kilnhq/kiln/core, which depends on the standard library only.
//
// Start a run and wait for it:
//
//	c, err := client.New(client.DefaultURL, client.WithToken(os.Getenv("KILN_API_TOKEN")))
//	if err != nil { ... }
//	thread, err := c.CreateThread(ctx, core.ThreadInput{Title: "Release notes"})
//	run, err := c.StartRun(ctx, thread.ID, core.RunRequest{Input: core.RunInput{Text: "Draft them"}})
//	run, err = c.WaitRun(ctx, run.ID)
//	if run.Status == core.RunInterrupted {
//		ins, err := c.ListInterrupts(ctx, run.ID)
//		_, err = c.Decide(ctx, ins[0].ID, core.Decision{Decision: core.DecisionApprove})
//	}
//
// Files go with a message as attachments: upload each (streamed, never
// held in memory), then name their IDs in the run's input.
//
//	f, err := os.Open("report.csv")
//	a, err := c.UploadAttachment(ctx, "report.csv", f)
//	run, err := c.StartRun(ctx, thread.ID, core.RunRequest{Input: core.RunInput{Text: "Check it", Attachments: []string{a.ID}}})
//
// Sandboxes (Kiln's OpenSandbox-compatible sandbox API) run commands and
// hold files: create one, run a command with its output streamed, copy
// files in and out.
//
//	sb, err := c.CreateSandbox(ctx, client.SandboxInput{Runtime: "wasm", Timeout: time.Hour})
//	code, err := c.Exec(ctx, sb.ID, client.ExecRequest{Command: "echo hi"}, func(e client.ExecEvent) {
//		if e.Type == "stdout" { fmt.Print(e.Output()) }
//	})
//	err = c.Upload(ctx, sb.ID, "/tmp/report.csv", f, size, nil)
//	err = c.DeleteSandbox(ctx, sb.ID)
//
// Every method takes a context. API errors are *Error values carrying the
// HTTP status and the server's code and message; IsNotFound, IsConflict and
// the other Is functions classify them. Network errors are returned as the
// net/http client reports them.
//
// # Events
//
// Client.Stream follows the server-sent event stream of one thread or of
// every thread. It reconnects by itself with backoff when the connection
// drops (a server restart, a proxy timeout), resuming after the last durable
// event it delivered, so durable events arrive exactly once and in order
// for as long as the stream runs. Ephemeral events such as message.delta
// (text as the model writes it, Seq 0) are delivered live only.
//
//	s := c.Stream(ctx, client.StreamOptions{ThreadID: thread.ID})
//	defer s.Close()
//	for e := range s.Events() {
//		fmt.Println(e.Seq, e.Type)
//	}
//	if err := s.Err(); err != nil { ... }
package client
