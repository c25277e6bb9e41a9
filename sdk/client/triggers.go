package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/kilnhq/kiln/core"
)

// ListTriggers lists the triggers, oldest first, each with its next fire
// time.
func (c *Client) ListTriggers(ctx context.Context) ([]*core.TriggerView, error) {
	var out struct {
		Triggers []*core.TriggerView `json:"triggers"`
	}
	if err := c.do(ctx, http.MethodGet, apiPrefix+"/triggers", nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Triggers, nil
}

// CreateTrigger creates a cron or webhook trigger. A webhook trigger's
// secret is in the answer, this once.
func (c *Client) CreateTrigger(ctx context.Context, in core.TriggerInput) (*core.TriggerView, error) {
	var v core.TriggerView
	if err := c.do(ctx, http.MethodPost, apiPrefix+"/triggers", nil, in, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// GetTrigger returns a trigger with its next five fire times.
func (c *Client) GetTrigger(ctx context.Context, id string) (*core.TriggerView, error) {
	return c.trigger(ctx, http.MethodGet, id, "", nil)
}

// UpdateTrigger changes a trigger; nil fields stay as they are.
func (c *Client) UpdateTrigger(ctx context.Context, id string, p core.TriggerPatch) (*core.TriggerView, error) {
	return c.trigger(ctx, http.MethodPatch, id, "", p)
}

// RotateTriggerSecret gives a webhook trigger a new secret, returned this
// once.
func (c *Client) RotateTriggerSecret(ctx context.Context, id string) (*core.TriggerView, error) {
	return c.trigger(ctx, http.MethodPost, id, "/rotate-secret", nil)
}

// DeleteTrigger deletes a trigger and its history.
func (c *Client) DeleteTrigger(ctx context.Context, id string) error {
	p, err := pathID("trigger", id)
	if err != nil {
		return err
	}
	return c.do(ctx, http.MethodDelete, apiPrefix+"/triggers/"+p, nil, nil, nil)
}

// FireTrigger fires a trigger now, by hand.
func (c *Client) FireTrigger(ctx context.Context, id string) (*core.Occurrence, error) {
	p, err := pathID("trigger", id)
	if err != nil {
		return nil, err
	}
	var o core.Occurrence
	if err := c.do(ctx, http.MethodPost, apiPrefix+"/triggers/"+p+"/run", nil, nil, &o); err != nil {
		return nil, err
	}
	return &o, nil
}

// TriggerOccurrences lists a trigger's history, newest first; limit 0 is
// the server's default.
func (c *Client) TriggerOccurrences(ctx context.Context, id string, limit int) (core.OccurrencePage, error) {
	var page core.OccurrencePage
	p, err := pathID("trigger", id)
	if err != nil {
		return page, err
	}
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	err = c.do(ctx, http.MethodGet, apiPrefix+"/triggers/"+p+"/occurrences", q, nil, &page)
	return page, err
}

// PreviewTrigger returns a cron trigger's next n fire times.
func (c *Client) PreviewTrigger(ctx context.Context, id string, n int) ([]time.Time, error) {
	p, err := pathID("trigger", id)
	if err != nil {
		return nil, err
	}
	var out struct {
		Next []time.Time `json:"next"`
	}
	err = c.do(ctx, http.MethodGet, apiPrefix+"/triggers/"+p+"/preview", url.Values{"n": {strconv.Itoa(n)}}, nil, &out)
	return out.Next, err
}

func (c *Client) trigger(ctx context.Context, method, id, suffix string, in any) (*core.TriggerView, error) {
	p, err := pathID("trigger", id)
	if err != nil {
		return nil, err
	}
	var v core.TriggerView
	if err := c.do(ctx, method, apiPrefix+"/triggers/"+p+suffix, nil, in, &v); err != nil {
		return nil, err
	}
	return &v, nil
}
