package main

import (
	"container/heap"
	"math"
	"time"

	"github.com/dop251/goja"
)

// loop is the event loop: the timers set by setTimeout and setInterval,
// run in the order they are due (ties in the order they were set). goja
// runs the promise jobs (microtasks) each time a call from Go into the
// runtime returns, so after the script and after each timer callback.
type loop struct {
	vm     *goja.Runtime
	due    timerHeap
	timers map[int64]*timer // the ones not cleared, by id
	nextID int64
	seq    int64
}

// timer is one pending setTimeout or setInterval.
type timer struct {
	id       int64
	seq      int64 // order of setting, to break ties in when
	when     time.Time
	fn       goja.Callable
	args     []goja.Value
	interval time.Duration // > 0 for setInterval
}

// install sets setTimeout, setInterval, clearTimeout and clearInterval
// on global. The functions return and take numeric ids (node returns
// Timeout objects).
func (l *loop) install(global *goja.Object) {
	l.timers = map[int64]*timer{}
	must(global.Set("setTimeout", func(call goja.FunctionCall) goja.Value { return l.set(call, false) }))
	must(global.Set("setInterval", func(call goja.FunctionCall) goja.Value { return l.set(call, true) }))
	clear := func(call goja.FunctionCall) goja.Value {
		if a := call.Argument(0); !goja.IsUndefined(a) && !goja.IsNull(a) {
			delete(l.timers, a.ToInteger())
		}
		return goja.Undefined()
	}
	must(global.Set("clearTimeout", clear))
	must(global.Set("clearInterval", clear))
}

// set adds a timer for setTimeout(fn, ms, ...args) or setInterval. A
// delay that is not a number of at least 1 ms is 1 ms, as in node.
func (l *loop) set(call goja.FunctionCall, repeat bool) goja.Value {
	fn, ok := goja.AssertFunction(call.Argument(0))
	if !ok {
		panic(l.vm.NewTypeError("The \"callback\" argument must be of type function"))
	}
	ms := call.Argument(1).ToFloat()
	if math.IsNaN(ms) || ms < 1 || ms > math.MaxInt32 {
		ms = 1
	}
	d := time.Duration(ms * float64(time.Millisecond))
	l.nextID++
	t := &timer{id: l.nextID, fn: fn, when: time.Now().Add(d)}
	if len(call.Arguments) > 2 {
		t.args = append([]goja.Value(nil), call.Arguments[2:]...)
	}
	if repeat {
		t.interval = d
	}
	l.schedule(t)
	return l.vm.ToValue(t.id)
}

// schedule queues t by its when.
func (l *loop) schedule(t *timer) {
	l.seq++
	t.seq = l.seq
	l.timers[t.id] = t
	heap.Push(&l.due, t)
}

// runNext waits for the next timer that has not been cleared and runs
// its callback. It returns false when no timer is left, or the error the
// callback threw.
func (l *loop) runNext() (bool, error) {
	for l.due.Len() > 0 {
		t := heap.Pop(&l.due).(*timer)
		if l.timers[t.id] != t {
			continue // cleared
		}
		if wait := time.Until(t.when); wait > 0 {
			time.Sleep(wait)
		}
		if t.interval > 0 {
			t.when = time.Now().Add(t.interval)
			l.schedule(t)
		} else {
			delete(l.timers, t.id)
		}
		_, err := t.fn(goja.Undefined(), t.args...)
		return true, err
	}
	return false, nil
}

// timerHeap orders timers by when, then seq (container/heap).
type timerHeap []*timer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if !h[i].when.Equal(h[j].when) {
		return h[i].when.Before(h[j].when)
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)   { *h = append(*h, x.(*timer)) }
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	*h = old[:len(old)-1]
	return t
}
