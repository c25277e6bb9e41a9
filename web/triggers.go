package web

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/kilnhq/kiln/core"
)

// Triggers: /api/v1/triggers manages them; /hooks/{id} receives webhook
// deliveries, which authenticate themselves (secret or signature) rather
// than with the API token.

func parseTriggerInput(b []byte) (core.TriggerInput, error) {
	var in core.TriggerInput
	err := unmarshalStrict(b, &in)
	return in, err
}

func parseTriggerPatch(b []byte) (core.TriggerPatch, error) {
	var p core.TriggerPatch
	if err := unmarshalStrict(b, &p); err != nil {
		return p, err
	}
	if strings.Contains(string(b), `"kind"`) {
		return p, errorf(core.EINVALID, "a trigger's kind cannot change; create another")
	}
	return p, nil
}

func (s *server) listTriggers(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	trs, err := s.svc.ListTriggers(r.Context(), principal(r))
	return http.StatusOK, map[string]any{"triggers": trs}, err
}

func (s *server) createTrigger(w http.ResponseWriter, r *http.Request) (int, any, error) {
	in, err := decodeBody(w, r, true, parseTriggerInput)
	if err != nil {
		return 0, nil, err
	}
	v, err := s.svc.CreateTrigger(r.Context(), principal(r), in)
	return http.StatusCreated, v, err
}

func (s *server) getTrigger(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	v, err := s.svc.GetTrigger(r.Context(), principal(r), id(r))
	return http.StatusOK, v, err
}

func (s *server) updateTrigger(w http.ResponseWriter, r *http.Request) (int, any, error) {
	p, err := decodeBody(w, r, true, parseTriggerPatch)
	if err != nil {
		return 0, nil, err
	}
	v, err := s.svc.UpdateTrigger(r.Context(), principal(r), id(r), p)
	return http.StatusOK, v, err
}

func (s *server) deleteTrigger(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	return http.StatusNoContent, nil, s.svc.DeleteTrigger(r.Context(), principal(r), id(r))
}

func (s *server) rotateTriggerSecret(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	v, err := s.svc.RotateSecret(r.Context(), principal(r), id(r))
	return http.StatusOK, v, err
}

func (s *server) fireTrigger(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	o, err := s.svc.FireTrigger(r.Context(), principal(r), id(r))
	return http.StatusAccepted, o, err
}

func (s *server) triggerOccurrences(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	limit, err := queryLimit(r)
	if err != nil {
		return 0, nil, err
	}
	var before *time.Time
	if b := r.URL.Query().Get("before"); b != "" {
		t, err := time.Parse(time.RFC3339Nano, b)
		if err != nil {
			return 0, nil, errorf(core.EINVALID, "query parameter \"before\" must be an RFC 3339 time")
		}
		before = &t
	}
	page, err := s.svc.ListOccurrences(r.Context(), principal(r), id(r), limit, before)
	return http.StatusOK, page, err
}

func (s *server) previewTrigger(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	n, err := queryInt(r, "n", 1, 100, 10)
	if err != nil {
		return 0, nil, err
	}
	next, err := s.svc.PreviewTrigger(r.Context(), principal(r), id(r), int(n))
	return http.StatusOK, map[string]any{"next": next}, err
}

// previewSchedule previews an expression before any trigger has it.
func (s *server) previewSchedule(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	n, err := queryInt(r, "n", 1, 100, 10)
	if err != nil {
		return 0, nil, err
	}
	q := r.URL.Query()
	next, err := s.svc.PreviewSchedule(q.Get("cron"), q.Get("timezone"), int(n))
	return http.StatusOK, map[string]any{"next": next}, err
}

// receiveHook is POST /hooks/{id}: a webhook delivery. The body is read
// raw (at most core.MaxPayloadLen bytes, else 413) for the signature.
// Every credential header sent goes to the core, which requires all of
// them to verify.
func (s *server) receiveHook(w http.ResponseWriter, r *http.Request) (int, any, error) {
	if r.ContentLength > core.MaxPayloadLen {
		return 0, nil, errorf(codeTooLarge, "the payload exceeds %d bytes", core.MaxPayloadLen)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, core.MaxPayloadLen))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return 0, nil, errorf(codeTooLarge, "the payload exceeds %d bytes", core.MaxPayloadLen)
	}
	if err != nil {
		return 0, nil, errorf(core.EINVALID, "could not read the request body: %s", err)
	}
	h := r.Header
	d := core.Delivery{Body: body, Token: h.Get("X-Kiln-Token"), Timestamp: h.Get("X-Kiln-Timestamp")}
	if tok, ok := strings.CutPrefix(h.Get("Authorization"), "Bearer "); ok {
		if tok = strings.TrimSpace(tok); d.Token != "" && d.Token != tok {
			return 0, nil, errorf(core.EUNAUTHORIZED, "the webhook secret or signature is missing or wrong")
		}
		d.Token = tok
	}
	for _, name := range []string{"X-Kiln-Signature", "X-Hub-Signature-256"} {
		if v := h.Values(name); len(v) > 0 {
			if d.Signatures == nil {
				d.Signatures = map[string]string{}
			}
			d.Signatures[name] = strings.Join(v, ",")
		}
	}
	d.DeliveryID = h.Get("X-Kiln-Delivery")
	if d.DeliveryID == "" {
		d.DeliveryID = h.Get("X-GitHub-Delivery")
	}
	o, err := s.svc.Deliver(r.Context(), id(r), d)
	if err != nil {
		if core.ErrorCode(err) == core.ELIMIT {
			w.Header().Set("Retry-After", strconv.Itoa(60))
		}
		return 0, nil, err
	}
	return http.StatusAccepted, map[string]any{"occurrence_id": o.ID, "status": o.Status, "run_id": o.RunID, "thread_id": o.ThreadID}, nil
}
