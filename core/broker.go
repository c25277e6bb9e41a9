package core

import "sync"

// Filter selects events for a subscriber. Empty fields match everything.
type Filter struct {
	OwnerID  string
	ThreadID string
}

// Match reports whether e passes the filter.
func (f Filter) Match(e Event) bool {
	return (f.OwnerID == "" || f.OwnerID == e.OwnerID) && (f.ThreadID == "" || f.ThreadID == e.ThreadID)
}

// Subscription receives live events in Seq order. C is closed when the
// subscription is closed or when the subscriber fell more than its buffer
// behind; Lagged then reports true and the subscriber should replay from
// the Store after its last Seq and subscribe again.
type Subscription struct {
	C      <-chan Event
	c      chan Event
	filter Filter
	b      *Broker
	lagged bool
	closed bool
}

// Lagged reports whether the broker dropped the subscription because the
// subscriber did not keep up. Only valid after C is closed.
func (s *Subscription) Lagged() bool {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	return s.lagged
}

// Close ends the subscription. It is safe to call more than once.
func (s *Subscription) Close() {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	s.b.drop(s)
}

// Broker fans committed (and ephemeral) events out to live subscribers.
// Publish must be called in commit order; Service guarantees it.
type Broker struct {
	mu   sync.Mutex
	subs map[*Subscription]struct{}
}

// NewBroker returns an empty broker.
func NewBroker() *Broker { return &Broker{subs: map[*Subscription]struct{}{}} }

// Subscribe registers a subscriber with a buffer of size events.
func (b *Broker) Subscribe(f Filter, size int) *Subscription {
	if size <= 0 {
		size = 1024
	}
	c := make(chan Event, size)
	s := &Subscription{C: c, c: c, filter: f, b: b}
	b.mu.Lock()
	b.subs[s] = struct{}{}
	b.mu.Unlock()
	return s
}

// Publish delivers events to every matching subscriber without blocking.
func (b *Broker) Publish(events ...Event) {
	if len(events) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		for _, e := range events {
			if !s.filter.Match(e) {
				continue
			}
			select {
			case s.c <- e:
			default:
				s.lagged = true
				b.drop(s)
			}
			if s.closed {
				break
			}
		}
	}
}

// Subscribers returns the number of live subscriptions.
func (b *Broker) Subscribers() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs)
}

func (b *Broker) drop(s *Subscription) {
	if s.closed {
		return
	}
	s.closed = true
	delete(b.subs, s)
	close(s.c)
}
