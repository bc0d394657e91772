package proxy

import (
	"encoding/json"
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kproxy/kproxy/proxy/admin/adminapi"
	"github.com/kproxy/kproxy/routing"
)

// adminMux serves the admin HTTP API on its own mux (never the default one).
func (s *Server) adminMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", s.handleReady)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.cfg.Registry, promhttp.HandlerOpts{Registry: s.cfg.Registry}))
	mux.HandleFunc("GET /v1/routes", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.snapshot())
	})
	mux.HandleFunc("GET /v1/brokers", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.snapshot().Brokers)
	})
	mux.HandleFunc("GET /v1/groups", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.snapshot().Groups)
	})
	s.ui.Register(mux)
	if s.cfg.EnablePprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

func (s *Server) snapshot() routing.Snapshot {
	snap := s.d.routes.Snapshot()
	snap.Zone = s.cfg.Zone
	return snap
}

// handleReady says 200 once the routing table is synced and has a live
// broker (and the proxy is not shutting down); 503 otherwise.
func (s *Server) handleReady(w http.ResponseWriter, _ *http.Request) {
	r := s.readiness()
	code := http.StatusOK
	if !r.Ready {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, r)
}

// readiness is the proxy's own state, for /readyz and the routing page.
func (s *Server) readiness() adminapi.Readiness {
	var r adminapi.Readiness
	st := s.d.status()
	r.Synced, r.Connected, r.Revision, r.RouteAgeSeconds = st.Synced, st.Connected, st.Revision, st.Age.Seconds()
	r.MissingBrokers = st.MissingBrokers
	r.LiveBrokers = len(s.d.routes.Brokers())
	r.Draining = s.draining.Load()
	r.Zone, r.FetchFrom = s.cfg.Zone, FetchOwner
	if s.d.routes.ZoneReads() {
		r.FetchFrom = FetchZone
	}
	r.Ready = r.Synced && r.LiveBrokers > 0 && !r.Draining
	return r
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // the client went away; nothing to do
}
