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

// poolFor returns the pool a create can claim from, or nil.
func (s *Service) poolFor(runtime string, req CreateRequest, res sandbox.Resources, netw sandbox.Network) *PoolConfig {
	if len(req.Env) > 0 || len(req.Volumes) > 0 || netw.Mode != sandbox.NetworkNone {
		return nil
	}
	for i := range s.cfg.Pools {
		p := &s.cfg.Pools[i]
		pr, _ := resources(p.Resources)
		if p.Size > 0 && p.Runtime == runtime && p.Image == req.Image && slices.Equal(p.Entrypoint, req.Entrypoint) && pr == res {
			return p
		}
	}
	return nil
}

// claim gives owner one of the pool's waiting sandboxes, set up as the
// create asks (metadata, expiry), or returns nil when none is waiting.
func (s *Service) claim(ctx context.Context, p *PoolConfig, owner string, rec *core.Sandbox) (*core.Sandbox, error) {
	var got *core.Sandbox
	s.claimMu.Lock()
	defer s.claimMu.Unlock()
	_, err := s.cfg.Store.Update(ctx, func(tx core.Tx) error {
		name := p.Name
		waiting, err := tx.Sandboxes(core.SandboxQuery{OwnerID: PoolOwner, Pool: &name, States: []string{StatePooled}})
		if err != nil || len(waiting) == 0 {
			return err
		}
		sb := waiting[len(waiting)-1] // the oldest
		sb.OwnerID, sb.Metadata, sb.ExpiresAt, sb.Request = owner, rec.Metadata, rec.ExpiresAt, rec.Request
		sb.State, sb.Reason, sb.Message = StateRunning, "", ""
		sb.CreatedAt, sb.UpdatedAt, sb.TransitionAt = rec.CreatedAt, rec.CreatedAt, rec.CreatedAt
		got = sb
		return tx.PutSandbox(sb)
	})
	if err != nil {
		return nil, err
	}
	s.kickPools()
	return got, nil
}

// kickPools asks the filler to look at the pools now.
func (s *Service) kickPools() {
	select {
	case s.refill <- struct{}{}:
	default:
	}
}

// fillPools keeps every pool at its size until ctx ends, one start at a
// time, looking after each claim and every few seconds.
func (s *Service) fillPools(ctx context.Context) {
	if len(s.cfg.Pools) == 0 {
		return
	}
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		for i := range s.cfg.Pools {
			for ctx.Err() == nil && s.fillOne(ctx, &s.cfg.Pools[i]) {
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.refill:
		}
	}
}

// fillOne starts one sandbox for the pool when it is short of its size
// (and the server below its limit), and reports whether it did.
func (s *Service) fillOne(ctx context.Context, p *PoolConfig) bool {
	r, err := s.runtime(p.Runtime)
	if err != nil {
		return false
	}
	var n int
	err = s.cfg.Store.View(ctx, func(tx core.ReadTx) error {
		name := p.Name
		list, err := tx.Sandboxes(core.SandboxQuery{OwnerID: PoolOwner, Pool: &name, States: []string{StatePending, StatePooled}})
		n = len(list)
		return err
	})
	if err != nil || n >= p.Size {
		return false
	}
	if err := s.reserve(ctx); err != nil {
		return false
	}
	defer s.release()
	res, _ := resources(p.Resources)
	now := s.cfg.Now()
	id := newID()
	spec := sandbox.Spec{ID: id, Image: p.Image, Resources: res, Entrypoint: p.Entrypoint, ExecToken: s.Token(id)}
	if err := spec.Check(r.Capabilities()); err != nil {
		s.log.Warn("sandbox pool cannot be filled", "pool", p.Name, "err", err)
		return false
	}
	rec := &core.Sandbox{ID: id, OwnerID: PoolOwner, Runtime: p.Runtime, Pool: p.Name, State: StatePending, CreatedAt: now, UpdatedAt: now, TransitionAt: now}
	if err := s.put(ctx, rec); err != nil {
		return false
	}
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
	return true
}
