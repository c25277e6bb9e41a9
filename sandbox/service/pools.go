package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/sandbox"
)

// PoolConfig is a warm pool: Size sandboxes of one runtime, image,
// entrypoint and resource limits kept started, so that a create asking for
// exactly those (and no env, volumes or network) is a claim of one rather
// than a start. A claimed sandbox is replaced in the background.
type PoolConfig struct {
	Name       string            `json:"name"`
	Runtime    string            `json:"runtime"`
	Image      string            `json:"image,omitempty"`
	Entrypoint []string          `json:"entrypoint,omitempty"`
	Resources  map[string]string `json:"resourceLimits,omitempty"`
	Size       int               `json:"size"`
}

// StatePooled is a pool's sandbox waiting to be claimed; it belongs to
// PoolOwner, so no user lists it.
const StatePooled = "Pooled"

// PoolOwner owns the pools' unclaimed sandboxes.
const PoolOwner = "kiln:pool"

// LoadPools reads the pools of a file {"pools": [PoolConfig...]}; a
// missing file is no pools.
func LoadPools(path string) ([]PoolConfig, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var f struct {
		Pools []PoolConfig `json:"pools"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f.Pools, nil
}

// checkPools checks the pools of cfg: names, sizes and limits.
func checkPools(cfg Config) error {
	seen := map[string]bool{}
	total := 0
	for i, p := range cfg.Pools {
		switch {
		case p.Name == "" || seen[p.Name]:
			return fmt.Errorf("sandbox pool %d: a pool needs a name of its own", i)
		case p.Runtime == "":
			return fmt.Errorf("sandbox pool %s: no runtime", p.Name)
		case p.Size < 0:
			return fmt.Errorf("sandbox pool %s: size %d is negative", p.Name, p.Size)
		}
		if _, err := resources(p.Resources); err != nil {
			return fmt.Errorf("sandbox pool %s: %s", p.Name, core.ErrorMessage(err))
		}
		seen[p.Name] = true
		total += p.Size
	}
	if total >= cfg.MaxSandboxes {
		return fmt.Errorf("sandbox pools hold %d sandboxes, not fewer than the server's limit of %d", total, cfg.MaxSandboxes)
	}
	return nil
}

// poolFor returns the pool a create can claim from, or nil: one of the
// runtime c names whose sandboxes are what spec asks for (its image,
// entrypoint and resources as the runtime gets them), when the create
// asks for nothing a started sandbox cannot take on.
func (s *Service) poolFor(c sandbox.Capabilities, req CreateRequest, spec sandbox.Spec) *PoolConfig {
	if len(req.Env) > 0 || len(spec.Mounts) > 0 || spec.Network.Mode != sandbox.NetworkNone {
		return nil
	}
	for i := range s.cfg.Pools {
		p := &s.cfg.Pools[i]
		ps, err := poolSpec(c, p)
		if err == nil && p.Size > 0 && p.Runtime == c.Name && ps.Image == spec.Image && slices.Equal(ps.Entrypoint, spec.Entrypoint) && ps.Resources == spec.Resources {
			return p
		}
	}
	return nil
}

// poolSpec is the spec of a pool's sandboxes (without its ID and token)
// for a runtime with capabilities c.
func poolSpec(c sandbox.Capabilities, p *PoolConfig) (sandbox.Spec, error) {
	res, err := resources(p.Resources)
	if err != nil {
		return sandbox.Spec{}, err
	}
	image, entrypoint, err := environment(c, p.Runtime, CreateRequest{Image: p.Image, Entrypoint: p.Entrypoint})
	return sandbox.Spec{Image: image, Entrypoint: entrypoint, Resources: res}, err
}

// claim gives owner one of the pool's waiting sandboxes, set up as the
// create asks (metadata, expiry), or returns nil when none is waiting.
// Taking one is a pop under a mutex; storing the claim is an Update of
// its own, so that claims at once commit together.
func (s *Service) claim(ctx context.Context, p *PoolConfig, owner string, rec *core.Sandbox) (*core.Sandbox, error) {
	s.lastClaim.Store(time.Now().UnixNano())
	defer s.kickPools()
	for {
		id, ok := s.popPooled(p.Name)
		if !ok {
			s.claims[p.Name].misses.Add(1)
			return nil, nil
		}
		var got *core.Sandbox
		err := s.update(ctx, func(tx storeTx) error {
			sb, err := tx.Sandbox(id)
			if core.IsNotFound(err) {
				return nil
			}
			if err != nil || sb.State != StatePooled || sb.OwnerID != PoolOwner {
				return err
			}
			sb.OwnerID, sb.Metadata, sb.ExpiresAt, sb.Request = owner, rec.Metadata, rec.ExpiresAt, rec.Request
			sb.State, sb.Reason, sb.Message = StateRunning, "", ""
			sb.CreatedAt, sb.UpdatedAt, sb.TransitionAt = rec.CreatedAt, rec.CreatedAt, rec.CreatedAt
			got = sb
			return tx.PutSandbox(sb)
		})
		if err != nil {
			s.pushPooled(p.Name, id)
			return nil, err
		}
		if got != nil {
			s.claims[p.Name].hits.Add(1)
			return got, nil
		}
		// The record was gone or no longer waiting (reaped, lost): the next.
	}
}

// claimCounts are a pool's claims since start: those served by a waiting
// sandbox and those that found none and started one.
type claimCounts struct{ hits, misses atomic.Uint64 }

// PoolStat is a warm pool's state at one moment.
type PoolStat struct {
	PoolConfig
	// Waiting are the pool's started sandboxes ready to be claimed.
	Waiting int
	// Hits and Misses count the creates since start that asked for the
	// pool's sandbox: served by a waiting one, or started anew because
	// none was waiting.
	Hits, Misses uint64
}

// Pools reports each warm pool's state, in the order of the settings.
func (s *Service) Pools() []PoolStat {
	s.claimMu.Lock()
	defer s.claimMu.Unlock()
	out := make([]PoolStat, len(s.cfg.Pools))
	for i, p := range s.cfg.Pools {
		c := s.claims[p.Name]
		out[i] = PoolStat{PoolConfig: p, Waiting: len(s.pooled[p.Name]), Hits: c.hits.Load(), Misses: c.misses.Load()}
	}
	return out
}

// popPooled takes the oldest waiting sandbox of a pool.
func (s *Service) popPooled(pool string) (string, bool) {
	s.claimMu.Lock()
	defer s.claimMu.Unlock()
	q := s.pooled[pool]
	if len(q) == 0 {
		return "", false
	}
	s.pooled[pool] = q[1:]
	return q[0], true
}

// pushPooled adds a waiting sandbox to its pool's queue.
func (s *Service) pushPooled(pool, id string) {
	s.claimMu.Lock()
	defer s.claimMu.Unlock()
	s.pooled[pool] = append(s.pooled[pool], id)
}

// loadPooled fills the queues from the records of waiting sandboxes,
// oldest first, and destroys those the pools no longer want: of a pool
// that is gone or whose settings changed, or past its size.
func (s *Service) loadPooled(ctx context.Context) error {
	var recs []*core.Sandbox
	err := s.view(ctx, func(tx storeReadTx) (err error) {
		recs, err = tx.Sandboxes(core.SandboxQuery{OwnerID: PoolOwner, States: []string{StatePooled}})
		return err
	})
	if err != nil {
		return err
	}
	recs = s.onlyMine(recs)
	// Oldest first, as the queues are.
	slices.Reverse(recs)
	kept := map[string]int{}
	var stale []*core.Sandbox
	recs = slices.DeleteFunc(recs, func(rec *core.Sandbox) bool {
		i := slices.IndexFunc(s.cfg.Pools, func(p PoolConfig) bool { return p.Name == rec.Pool })
		if i >= 0 {
			want, _ := json.Marshal(s.cfg.Pools[i])
			if bytes.Equal(want, rec.Request) && kept[rec.Pool] < s.cfg.Pools[i].Size {
				kept[rec.Pool]++
				return false
			}
		}
		stale = append(stale, rec)
		return true
	})
	for _, rec := range stale {
		if _, err := s.runtime(rec.Runtime); err != nil {
			continue // its runtime may come back: a later start trims it
		}
		if err := s.destroy(ctx, rec); err != nil {
			s.log.Warn("destroy a sandbox of a pool that changed", "sandbox", rec.ID, "pool", rec.Pool, "err", err)
			continue
		}
		if err := s.update(ctx, func(tx storeTx) error { return tx.DeleteSandbox(rec.ID) }); err != nil && !core.IsNotFound(err) {
			return err
		}
	}
	s.claimMu.Lock()
	defer s.claimMu.Unlock()
	clear(s.pooled)
	for _, rec := range recs {
		s.pooled[rec.Pool] = append(s.pooled[rec.Pool], rec.ID)
	}
	return nil
}

// kickPools asks the filler to look at the pools now.
func (s *Service) kickPools() {
	select {
	case s.refill <- struct{}{}:
	default:
	}
}

// fillParallel is how many sandboxes a pool starts at once when it
// refills.
const fillParallel = 4

// fillPools keeps every pool at its size until ctx ends, fillParallel
// starts at a time, looking after each claim and every few seconds.
func (s *Service) fillPools(ctx context.Context) {
	if len(s.cfg.Pools) == 0 {
		return
	}
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		var wg sync.WaitGroup
		for i := range s.cfg.Pools {
			for range fillParallel {
				wg.Go(func() {
					for ctx.Err() == nil && s.fillOne(ctx, &s.cfg.Pools[i]) {
					}
				})
			}
		}
		wg.Wait()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.refill:
			s.settle(ctx)
		}
	}
}

// refillQuiet is how long the filler waits after the last claim before it
// starts sandboxes again: a start costs the host CPU that a burst of
// claims (each a few milliseconds) needs more. A pool down to a quarter
// of its size refills at once all the same (lowWater): claims that keep
// coming must not drain it, as a cold start costs far more than a claim
// slowed by a start beside it.
const refillQuiet = 250 * time.Millisecond

// lowWater reports whether a pool's waiting sandboxes are down to a
// quarter of its size.
func (s *Service) lowWater(p *PoolConfig) bool {
	s.claimMu.Lock()
	defer s.claimMu.Unlock()
	return len(s.pooled[p.Name])*4 <= p.Size
}

// settle returns once no claim came for refillQuiet, or a pool is at its
// low water.
func (s *Service) settle(ctx context.Context) {
	t := time.NewTimer(refillQuiet)
	defer t.Stop()
	for {
		if slices.ContainsFunc(s.cfg.Pools, func(p PoolConfig) bool { return s.lowWater(&p) }) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-s.refill:
			t.Reset(refillQuiet)
		case <-t.C:
			return
		}
	}
}

// poolSlot stores a Pending record for a new sandbox of the pool when the
// pool is short of its size and the server below its limit, counting it
// against the limit (the caller releases it). The pool's count and the
// record are one step, so fillers starting at once never overfill it.
func (s *Service) poolSlot(ctx context.Context, p *PoolConfig, id string) (*core.Sandbox, bool) {
	s.fillMu.Lock()
	defer s.fillMu.Unlock()
	var n int
	err := s.view(ctx, func(tx storeReadTx) error {
		name := p.Name
		list, err := tx.Sandboxes(core.SandboxQuery{OwnerID: PoolOwner, Pool: &name, States: []string{StatePending, StatePooled}})
		n = len(s.onlyMine(list))
		return err
	})
	if err != nil || n >= p.Size {
		return nil, false
	}
	if err := s.reserve(ctx); err != nil {
		return nil, false
	}
	now := s.cfg.Now()
	rec := &core.Sandbox{ID: id, OwnerID: PoolOwner, Runtime: p.Runtime, Pool: p.Name, Replica: s.cfg.Replica, State: StatePending, CreatedAt: now, UpdatedAt: now, TransitionAt: now}
	rec.Request, _ = json.Marshal(p)
	if err := s.put(ctx, rec); err != nil {
		s.release()
		return nil, false
	}
	return rec, true
}

// fillOne starts one sandbox for the pool when it is short of its size
// (and the server below its limit), and no claim came for refillQuiet or
// the pool is at its low water, and reports whether it did.
func (s *Service) fillOne(ctx context.Context, p *PoolConfig) bool {
	if time.Since(time.Unix(0, s.lastClaim.Load())) < refillQuiet && !s.lowWater(p) {
		return false // claims are coming: the next kick or tick refills
	}
	r, err := s.runtime(p.Runtime)
	if err != nil {
		return false
	}
	spec, err := poolSpec(r.Capabilities(), p)
	if err == nil {
		spec.ID = newID()
		spec.ExecToken = s.Token(spec.ID)
		err = spec.Check(r.Capabilities())
	}
	id := spec.ID
	if err != nil {
		s.log.Warn("sandbox pool cannot be filled", "pool", p.Name, "err", err)
		return false
	}
	rec, ok := s.poolSlot(ctx, p, id)
	if !ok {
		return false
	}
	defer s.release()
	sctx, cancel := context.WithTimeout(ctx, s.cfg.StartTimeout)
	defer cancel()
	h, err := r.Start(sctx, spec)
	if err != nil {
		s.log.Warn("sandbox pool: a start failed", "pool", p.Name, "err", err)
		s.fail(rec, "start_failed", err)
		return false
	}
	if err := s.transition(context.WithoutCancel(ctx), rec, StatePooled, "", "", &h); err != nil {
		_ = r.Destroy(context.WithoutCancel(ctx), h)
		return false
	}
	s.pushPooled(p.Name, id)
	return true
}
