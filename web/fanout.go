package web

import (
	"math/rand/v2"
	"runtime/debug"
	"sync"
	"time"

	"github.com/kilnhq/kiln/core"
)

// Fan-out limits. The ring holds the newest frames for every stream to
// read from; a stream whose next frame has left it is dropped (its client
// resumes with Last-Event-ID, from the durable log).
const (
	ringFrames = 1 << 15  // at most this many frames
	ringBytes  = 16 << 20 // and at most this many bytes of them
	// wakePerStream and maxWakeGap pace the streams under load: a stream
	// that has just read waits streams x wakePerStream (at most
	// maxWakeGap, give or take half) before it reads again, so the server
	// makes about 5,000 writes a second however many streams are open, a
	// burst of commits costs each stream one write, not one each, and the
	// writes are spread out rather than all at once. Up to 9 streams do
	// not wait; 500 wait up to 150 ms. Measured with make bench (200
	// runs, 500 clients): at 50 µs a stream, the wake-ups cost more than
	// the bytes they send.
	wakePerStream = 200 * time.Microsecond
	maxWakeGap    = 100 * time.Millisecond
	minPace       = 2 * time.Millisecond
	// pumpBuffer is the fanout's subscription buffer in the core broker.
	pumpBuffer = 8192
	// When the open streams fall below a quarter of a peak of at least
	// releaseAfter streams, the memory they held is handed back to the
	// operating system releaseDelay after the last of them left (the Go
	// runtime would keep it for minutes).
	releaseAfter = 64
	releaseDelay = 5 * time.Second
)

// frame is one event as every stream sends it: encoded once.
type frame struct {
	seq    int64 // 0 for an ephemeral event
	owner  string
	thread string
	data   []byte // the SSE message, redacted
}

// fanout fans the Service's live events out to every event stream of the
// server. It holds one subscription to the core broker while any stream
// is open, encodes each event once into its SSE frame and keeps the
// newest frames in a ring that all streams read from: a stream costs a
// position in the ring, not a copy of the events, and publishing costs
// the same for one stream as for five hundred.
type fanout struct {
	svc    *core.Service
	encode func(core.Event) []byte

	mu      sync.RWMutex
	ring    []*frame // ring[pos % len(ring)] for pos in [start, next)
	start   uint64   // position of the oldest frame kept
	next    uint64   // position the next frame gets
	size    int      // bytes of the frames kept
	wake    chan struct{}
	streams int
	sub     *core.Subscription // while streams > 0
	dropped uint64             // streams dropped for falling behind, since start
	peak    int                // most streams open since memory was last released
	release *time.Timer        // pending release, or nil
	// releaseMemory hands freed memory back to the operating system.
	releaseMemory func()
}

func newFanout(svc *core.Service, encode func(core.Event) []byte) *fanout {
	return &fanout{svc: svc, encode: encode, ring: make([]*frame, ringFrames), wake: make(chan struct{}), releaseMemory: debug.FreeOSMemory}
}

// join registers a stream and returns its position: it reads every frame
// published from now on. The first stream starts the fanout's subscription,
// so events committed after join returns are in the ring. With limit > 0
// streams open already, it refuses (ok false).
func (h *fanout) join(limit int) (pos uint64, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if limit > 0 && h.streams >= limit {
		return 0, false
	}
	h.streams++
	h.peak = max(h.peak, h.streams)
	if h.sub == nil {
		h.sub = h.svc.Broker().Subscribe(core.Filter{}, pumpBuffer)
		go h.pump(h.sub)
	}
	return h.next, true
}

// leave unregisters a stream; the last one ends the subscription.
func (h *fanout) leave() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.streams--
	if h.streams == 0 && h.sub != nil {
		h.sub.Close()
		h.sub = nil
	}
	if h.peak >= releaseAfter && h.streams < h.peak/4 {
		if h.release != nil {
			h.release.Stop()
		}
		h.release = time.AfterFunc(releaseDelay, func() {
			h.mu.Lock()
			h.peak, h.release = h.streams, nil
			h.mu.Unlock()
			h.releaseMemory()
		})
	}
}

// pump moves sub's events into the ring until sub is closed. When the
// broker dropped sub because the pump fell behind, every stream has missed
// events: the fanout then drops them all (they resume from the log) and
// subscribes again.
func (h *fanout) pump(sub *core.Subscription) {
	var batch []*frame
	for {
		e, ok := <-sub.C
		if !ok {
			h.ended(sub)
			return
		}
		batch = append(batch[:0], h.frame(e))
	drain:
		for len(batch) < 256 {
			select {
			case e, ok := <-sub.C:
				if !ok {
					break drain
				}
				batch = append(batch, h.frame(e))
			default:
				break drain
			}
		}
		h.append(batch)
		clear(batch)
	}
}

func (h *fanout) frame(e core.Event) *frame {
	return &frame{seq: e.Seq, owner: e.OwnerID, thread: e.ThreadID, data: h.encode(e)}
}

// ended handles the end of a subscription: closed by leave, or dropped by
// the broker for lagging.
func (h *fanout) ended(sub *core.Subscription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.sub != sub {
		return // closed by leave (a later join has its own)
	}
	// Lagged: every stream's position is void, even one that had read all
	// the ring held, for the broker dropped events after it. Skipping a
	// position puts every open stream behind start, so each one sees that
	// it lagged (and counts itself dropped); streams that join later start
	// at next.
	h.next++
	h.start = h.next
	clear(h.ring)
	h.size = 0
	h.sub = h.svc.Broker().Subscribe(core.Filter{}, pumpBuffer)
	go h.pump(h.sub)
	close(h.wake)
	h.wake = make(chan struct{})
}

// append adds frames to the ring, dropping the oldest beyond its limits,
// and wakes the streams waiting for them.
func (h *fanout) append(fs []*frame) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := uint64(len(h.ring))
	for _, f := range fs {
		if h.next-h.start == n {
			h.evict()
		}
		h.ring[h.next%n] = f
		h.next++
		h.size += len(f.data)
		for h.size > ringBytes && h.next-h.start > 1 {
			h.evict()
		}
	}
	close(h.wake)
	h.wake = make(chan struct{})
}

// pace is how long a stream that has just read waits before it reads
// again: streams x wakePerStream, at most maxWakeGap, spread by a random
// half either way so that the streams write at different moments; 0 with
// few streams, which need no pacing (and a timer under a millisecond
// would round up to one).
func (h *fanout) pace() time.Duration {
	h.mu.RLock()
	gap := min(time.Duration(h.streams)*wakePerStream, maxWakeGap)
	h.mu.RUnlock()
	if gap < minPace {
		return 0
	}
	return gap/2 + rand.N(gap+1)
}

func (h *fanout) evict() {
	i := h.start % uint64(len(h.ring))
	h.size -= len(h.ring[i].data)
	h.ring[i] = nil
	h.start++
}

// read appends to out the frames from position pos on that match f, at
// most max of them, and returns them with the position after the last
// frame it looked at. With nothing new it returns the channel that is
// closed when there is. lagged reports that pos has left the ring: the
// stream missed frames and must be dropped.
func (h *fanout) read(pos uint64, f core.Filter, out []*frame, max int) (frames []*frame, next uint64, wake <-chan struct{}, lagged bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if pos < h.start {
		return out, pos, nil, true
	}
	n := uint64(len(h.ring))
	for ; pos < h.next && len(out) < max; pos++ {
		fr := h.ring[pos%n]
		if (f.OwnerID == "" || f.OwnerID == fr.owner) && (f.ThreadID == "" || f.ThreadID == fr.thread) {
			out = append(out, fr)
		}
	}
	if pos == h.next {
		wake = h.wake
	}
	return out, pos, wake, false
}

// stats returns the number of open streams and of streams dropped so far.
func (h *fanout) stats() (streams int, dropped uint64) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.streams, h.dropped
}

// lagged counts a stream dropped for falling behind or not reading.
func (h *fanout) lagged() {
	h.mu.Lock()
	h.dropped++
	h.mu.Unlock()
}
