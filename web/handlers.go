package web

import (
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/kilnhq/kiln/core"
)

// apiFunc is a JSON API handler. It returns the status and body of a
// successful response (a nil body means no content), or an error that
// writeError turns into the error response.
type apiFunc func(w http.ResponseWriter, r *http.Request) (status int, body any, err error)

// api adapts an apiFunc to an http.HandlerFunc.
func (s *server) api(f apiFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		status, body, err := f(w, r)
		switch {
		case err != nil:
			s.writeError(w, r, err)
		case body == nil:
			w.WriteHeader(status)
		default:
			s.writeJSON(w, status, body)
		}
	}
}

// principal is the identity a request acts as: today the single local
// owner, whom the bearer token (if any) authenticates.
func principal(*http.Request) core.Principal { return core.LocalOwner }

// id is the {id} path parameter.
func id(r *http.Request) string { return chi.URLParam(r, "id") }

// healthz reports that the process serves HTTP; it needs no token.
func (s *server) healthz(w http.ResponseWriter, _ *http.Request) {
	s.writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz reports whether the server is ready (core.Service.Ready): 200
// when it is, 503 when not, with the checks either way; it needs no
// token, and names no error, only which check failed.
func (s *server) readyz(w http.ResponseWriter, r *http.Request) {
	rd := s.svc.Ready(r.Context())
	status := http.StatusOK
	if !rd.Ready {
		status = http.StatusServiceUnavailable
	}
	s.writeJSON(w, status, rd)
}

func (s *server) listThreads(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	limit, err := queryLimit(r)
	if err != nil {
		return 0, nil, err
	}
	noFolder, err := queryBool(r, "no_folder")
	if err != nil {
		return 0, nil, err
	}
	q := r.URL.Query()
	query := core.ThreadQuery{FolderID: q.Get("folder_id"), NoFolder: noFolder, Search: q.Get("q"), Limit: limit, Cursor: q.Get("cursor")}
	if query.FolderID != "" && query.NoFolder {
		return 0, nil, errorf(core.EINVALID, "query parameters \"folder_id\" and \"no_folder\" exclude each other")
	}
	page, err := s.svc.ListThreads(r.Context(), principal(r), query)
	return http.StatusOK, page, err
}

func (s *server) createThread(w http.ResponseWriter, r *http.Request) (int, any, error) {
	in, err := decodeBody(w, r, false, parseThreadInput)
	if err != nil {
		return 0, nil, err
	}
	t, err := s.svc.CreateThread(r.Context(), principal(r), in)
	return http.StatusCreated, t, err
}

func (s *server) getThread(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	t, err := s.svc.GetThread(r.Context(), principal(r), id(r))
	return http.StatusOK, t, err
}

func (s *server) updateThread(w http.ResponseWriter, r *http.Request) (int, any, error) {
	p, err := decodeBody(w, r, true, parseThreadPatch)
	if err != nil {
		return 0, nil, err
	}
	t, err := s.svc.UpdateThread(r.Context(), principal(r), id(r), p.core())
	return http.StatusOK, t, err
}

func (s *server) deleteThread(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	return http.StatusNoContent, nil, s.svc.DeleteThread(r.Context(), principal(r), id(r))
}

func (s *server) markRead(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	t, err := s.svc.MarkRead(r.Context(), principal(r), id(r))
	return http.StatusOK, t, err
}

func (s *server) listMessages(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	msgs, err := s.svc.Messages(r.Context(), principal(r), id(r))
	return http.StatusOK, map[string]any{"messages": msgs}, err
}

// listRuns lists one thread's runs, oldest first.
func (s *server) listRuns(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	q, err := runQuery(r)
	if err != nil {
		return 0, nil, err
	}
	q.ThreadID = id(r)
	page, err := s.svc.ListRuns(r.Context(), principal(r), q)
	return http.StatusOK, page, err
}

// listAllRuns lists runs across threads, newest first, filtered by
// thread_id and status (comma-separated).
func (s *server) listAllRuns(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	q, err := runQuery(r)
	if err != nil {
		return 0, nil, err
	}
	q.ThreadID, q.Newest = r.URL.Query().Get("thread_id"), true
	page, err := s.svc.ListRuns(r.Context(), principal(r), q)
	return http.StatusOK, page, err
}

// runQuery reads the paging and status parameters of a run list.
func runQuery(r *http.Request) (core.RunQuery, error) {
	limit, err := queryLimit(r)
	if err != nil {
		return core.RunQuery{}, err
	}
	q := core.RunQuery{Limit: limit, Cursor: r.URL.Query().Get("cursor")}
	if q.Limit == noLimit {
		q.Limit = defaultPageSize
	}
	if raw := r.URL.Query().Get("status"); raw != "" {
		for _, st := range strings.Split(raw, ",") {
			q.Statuses = append(q.Statuses, core.RunStatus(strings.TrimSpace(st)))
		}
	}
	return q, nil
}

// startRun answers 202: the run proceeds in the background.
func (s *server) startRun(w http.ResponseWriter, r *http.Request) (int, any, error) {
	req, err := decodeBody(w, r, true, parseRunRequest)
	if err != nil {
		return 0, nil, err
	}
	run, err := s.svc.StartRun(r.Context(), principal(r), id(r), req)
	return http.StatusAccepted, run, err
}

func (s *server) getRun(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	run, err := s.svc.GetRun(r.Context(), principal(r), id(r))
	return http.StatusOK, run, err
}

// cancelRun answers 202: a running run stops at its next step boundary.
func (s *server) cancelRun(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	run, err := s.svc.CancelRun(r.Context(), principal(r), id(r))
	return http.StatusAccepted, run, err
}

func (s *server) listInterrupts(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	ins, err := s.svc.ListInterrupts(r.Context(), principal(r), id(r))
	return http.StatusOK, map[string]any{"interrupts": ins}, err
}

func (s *server) getInterrupt(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	in, err := s.svc.GetInterrupt(r.Context(), principal(r), id(r))
	return http.StatusOK, in, err
}

func (s *server) decide(w http.ResponseWriter, r *http.Request) (int, any, error) {
	d, err := decodeBody(w, r, true, parseDecision)
	if err != nil {
		return 0, nil, err
	}
	in, err := s.svc.Decide(r.Context(), principal(r), id(r), d)
	return http.StatusOK, in, err
}

func (s *server) inbox(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	limit, err := queryLimit(r)
	if err != nil {
		return 0, nil, err
	}
	q := r.URL.Query()
	if q.Get("queue") == "" {
		return 0, nil, errorf(core.EINVALID, "query parameter \"queue\" is required: unread or action")
	}
	page, err := s.svc.Inbox(r.Context(), principal(r), core.InboxQuery{Queue: q.Get("queue"), Search: q.Get("q"), Limit: limit, Cursor: q.Get("cursor")})
	return http.StatusOK, page, err
}

// markAllRead empties the Unread queue.
func (s *server) markAllRead(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	n, err := s.svc.MarkAllRead(r.Context(), principal(r))
	return http.StatusOK, map[string]int{"marked": n}, err
}

func (s *server) listFolders(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	fs, err := s.svc.ListFolders(r.Context(), principal(r))
	return http.StatusOK, map[string]any{"folders": fs}, err
}

func (s *server) createFolder(w http.ResponseWriter, r *http.Request) (int, any, error) {
	in, err := decodeBody(w, r, true, parseFolderInput)
	if err != nil {
		return 0, nil, err
	}
	f, err := s.svc.CreateFolder(r.Context(), principal(r), in)
	return http.StatusCreated, f, err
}

func (s *server) getFolder(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	f, err := s.svc.GetFolder(r.Context(), principal(r), id(r))
	return http.StatusOK, f, err
}

func (s *server) updateFolder(w http.ResponseWriter, r *http.Request) (int, any, error) {
	p, err := decodeBody(w, r, true, parseFolderPatch)
	if err != nil {
		return 0, nil, err
	}
	f, err := s.svc.UpdateFolder(r.Context(), principal(r), id(r), p.core())
	return http.StatusOK, f, err
}

func (s *server) deleteFolder(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	return http.StatusNoContent, nil, s.svc.DeleteFolder(r.Context(), principal(r), id(r))
}

func (s *server) tools(_ http.ResponseWriter, _ *http.Request) (int, any, error) {
	specs := s.svc.ToolSpecs()
	if specs == nil {
		specs = []core.ToolSpec{}
	}
	return http.StatusOK, map[string]any{"tools": specs}, nil
}

// statusBody is the body of GET /api/v1/status.
type statusBody struct {
	Version       string    `json:"version"`
	DataRoot      string    `json:"data_root"`
	DefaultModel  string    `json:"default_model"`
	StartedAt     time.Time `json:"started_at"`
	UptimeSeconds int64     `json:"uptime_seconds"`
	ActiveRuns    int       `json:"active_runs"`
	// Subscribers counts the open event streams.
	Subscribers int `json:"subscribers"`
	// Search is how thread and inbox searches run: "fts5" (full text,
	// ranked) or "basic" (a scan, unranked: a build without FTS5).
	Search string `json:"search"`
}

func (s *server) status(_ http.ResponseWriter, _ *http.Request) (int, any, error) {
	streams, _ := s.fanout.stats()
	return http.StatusOK, statusBody{
		Version:       s.opts.Version,
		DataRoot:      s.opts.DataRoot,
		DefaultModel:  s.opts.DefaultModel,
		StartedAt:     s.opts.StartedAt.UTC(),
		UptimeSeconds: int64(time.Since(s.opts.StartedAt).Seconds()),
		ActiveRuns:    s.svc.ActiveRuns(),
		Subscribers:   streams,
		Search:        searchMode(s.svc.Store()),
	}, nil
}

// searchMode is how st runs thread and inbox searches, as /status says:
// "fts5" or "postgres" for a store that reports it (the sqlite Store
// built with FTS5, the postgres Store), else "basic".
func searchMode(st core.Store) string {
	if m, ok := st.(interface{ SearchMode() string }); ok {
		if mode := m.SearchMode(); mode == "fts5" || mode == "postgres" {
			return mode
		}
	}
	return "basic"
}
