package docker

import "time"

// SetRetireQuiet sets how long the janitor of r waits for quiet before it
// removes a retired container, and wakes it to apply the new wait: a test
// that looks into a retired container holds the janitor off meanwhile.
func SetRetireQuiet(r *Runtime, d time.Duration) {
	r.jan.quiet.Store(int64(d))
	select {
	case r.jan.wake <- struct{}{}:
	default:
	}
}
