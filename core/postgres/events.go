package postgres

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kilnhq/kiln/core"
)

// The commit hook gets every replica's events, in seq order, each once:
// the event log is the truth, and NOTIFY only wakes the replicas up.
//
// An Update that emitted events notifies the schema's channel with its
// last seq as it commits, and hands its own events to the hook before
// it returns, after the other replicas' events that came before them
// (which the writer lock has committed already), read from the log. A
// listener on each replica reads the log up to each notified seq, and
// once a second whatever it may have missed (a notification lost with a
// dropped connection). delivered is the last seq the hook got; dmu
// keeps the two paths from overlapping.

// events is the Store's delivery of events to its commit hook.
type events struct {
	hook      atomic.Pointer[func([]core.Event)]
	dmu       sync.Mutex
	delivered int64
	listening sync.Once
	stop      chan struct{}
	done      chan struct{}
	onRemote  func(time.Duration)
}

// pollEvery is how often the listener reads the log without a
// notification.
const pollEvery = time.Second

// channel is the schema's notification channel.
func (s *Store) channel() string {
	return "kiln_events_" + strconv.FormatUint(uint64(uint32(s.writer)), 16)
}

// SetCommitHook implements core.CommitHooker: hook gets each committed
// Update's events, in commit order, before the Update returns, and the
// events other replicas commit, in seq order among them, soon after they
// commit (at once when the notification arrives, within pollEvery when
// it does not).
func (s *Store) SetCommitHook(hook func([]core.Event)) {
	s.dmu.Lock()
	if s.hook.Load() == nil {
		// From here on: the events committed before are history.
		if err := s.pool.QueryRow(context.Background(), "SELECT coalesce(max(seq), 0) FROM events").Scan(&s.delivered); err != nil {
			s.delivered = -1 // read at the first delivery
		}
	}
	s.hook.Store(&hook)
	s.dmu.Unlock()
	s.listening.Do(func() {
		s.done = make(chan struct{})
		go s.listen()
	})
}

// deliver hands an Update's own events to the hook, after the events of
// other replicas committed before them.
func (s *Store) deliver(own []core.Event) {
	hook := s.hook.Load()
	if hook == nil || *hook == nil {
		return
	}
	s.dmu.Lock()
	defer s.dmu.Unlock()
	if len(own) > 0 {
		if err := s.catchUp(context.Background(), own[0].Seq-1); err != nil {
			// Those the log did not give now are lost to this hook, as
			// an event is when a stream drops: its clients read the log.
			s.delivered = max(s.delivered, own[0].Seq-1)
		}
		// The listener may have read them from the log already, between
		// the commit and now.
		for len(own) > 0 && own[0].Seq <= s.delivered {
			own = own[1:]
		}
		if len(own) == 0 {
			return
		}
		s.delivered = own[len(own)-1].Seq
	}
	(*hook)(own)
}

// catchUp hands the hook the events after delivered up to upTo, in
// pages. dmu is held.
func (s *Store) catchUp(ctx context.Context, upTo int64) error {
	hook := s.hook.Load()
	if hook == nil || *hook == nil {
		return nil
	}
	for {
		if s.delivered < 0 {
			if err := s.pool.QueryRow(ctx, "SELECT coalesce(max(seq), 0) FROM events").Scan(&s.delivered); err != nil {
				return err
			}
		}
		if s.delivered >= upTo {
			return nil
		}
		var page []core.Event
		err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(t pgx.Tx) error {
			var err error
			page, err = (&tx{s: s, ctx: ctx, tx: t}).Events(core.EventQuery{After: s.delivered, Limit: 500})
			return err
		})
		if err != nil {
			return err
		}
		for i, e := range page {
			if e.Seq > upTo {
				page = page[:i]
				break
			}
		}
		if len(page) == 0 {
			return nil
		}
		(*hook)(page)
		s.delivered = page[len(page)-1].Seq
		if s.onRemote != nil {
			now := time.Now()
			for _, e := range page {
				s.onRemote(now.Sub(e.Time))
			}
		}
	}
}

// listen is the listener: a connection of its own that LISTENs to the
// channel and reads the log when a notification arrives, reconnecting
// after an error, beside a poll that reads it every pollEvery. Both stop
// with the Store.
func (s *Store) listen() {
	defer close(s.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		t := time.NewTicker(pollEvery)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				cancel()
				return
			case <-t.C:
				s.read(ctx)
			}
		}
	})
	for backoff := 100 * time.Millisecond; ctx.Err() == nil; backoff = min(2*backoff, 5*time.Second) {
		if err := s.listenOnce(ctx); ctx.Err() != nil {
			return
		} else if err == nil {
			backoff = 100 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
	}
}

// read hands the hook what the log holds past delivered.
func (s *Store) read(ctx context.Context) error {
	s.dmu.Lock()
	defer s.dmu.Unlock()
	return s.catchUp(ctx, math.MaxInt64)
}

// listenOnce listens on one connection until it fails or ctx ends.
func (s *Store) listenOnce(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel()}.Sanitize()); err != nil {
		return err
	}
	for {
		// What was committed before LISTEN, or while reconnecting.
		if err := s.read(ctx); err != nil {
			return err
		}
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return fmt.Errorf("postgres: listen: %w", err)
		}
	}
}

// stopListening stops the listener and waits for it.
func (s *Store) stopListening() {
	close(s.stop)
	if s.done != nil {
		<-s.done
	}
}
