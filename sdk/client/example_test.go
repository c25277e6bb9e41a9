package client_test

import (
	"context"
	"fmt"
	"log"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/sdk/client"
)

// Start a run, wait until it stops and approve what it waits for.
func Example() {
	ctx := context.Background()
	c, err := client.New(client.DefaultURL, client.WithToken("my-token"))
	if err != nil {
		log.Fatal(err)
	}
	thread, err := c.CreateThread(ctx, core.ThreadInput{Title: "Release notes"})
	if err != nil {
		log.Fatal(err)
	}
	run, err := c.StartRun(ctx, thread.ID, core.RunRequest{
		Input:       core.RunInput{Text: "Draft the release notes for v1.2"},
		InterruptOn: core.Policy{"append_file": {Interrupt: true}},
	})
	if err != nil {
		log.Fatal(err)
	}
	for {
		if run, err = c.WaitRun(ctx, run.ID); err != nil {
			log.Fatal(err)
		}
		if run.Status != core.RunInterrupted {
			break
		}
		ins, err := c.ListInterrupts(ctx, run.ID)
		if err != nil {
			log.Fatal(err)
		}
		for _, in := range ins {
			if in.Status == core.InterruptOpen {
				if _, err := c.Decide(ctx, in.ID, core.Decision{Decision: core.DecisionApprove}); err != nil {
					log.Fatal(err)
				}
			}
		}
	}
	fmt.Println("run", run.ID, run.Status)
}

// Follow one thread live, text deltas included, from its first event.
func ExampleClient_Stream() {
	ctx := context.Background()
	c, err := client.New(client.DefaultURL)
	if err != nil {
		log.Fatal(err)
	}
	s := c.Stream(ctx, client.StreamOptions{ThreadID: "thr_123"})
	defer s.Close()
	for e := range s.Events() {
		switch e.Type {
		case core.EventMessageDelta:
			fmt.Print(string(e.Payload))
		case core.EventRunFinished:
			fmt.Println("\nrun finished; resume later after event", s.LastSeq())
			return
		}
	}
	if err := s.Err(); client.IsNotFound(err) {
		fmt.Println("no such thread")
	}
}
