// Package admin is the proxy's admin HTTP endpoint: health, readiness,
// metrics, the routing table as JSON, the live routing page (adminui) and,
// when enabled, pprof, served on its own listener with the protection
// package adminauth gives it.
//
// Its limit: it reports the state it is given (the routing table, the
// routing feeder's status, whether the proxy drains); it changes nothing.
package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kproxy/kproxy/leasewatch"
	"github.com/kproxy/kproxy/proxy/admin/adminapi"
	"github.com/kproxy/kproxy/proxy/admin/adminui"
	"github.com/kproxy/kproxy/proxy/security/adminauth"
	"github.com/kproxy/kproxy/proxy/security/tlsconf"
	"github.com/kproxy/kproxy/routing"
)

// Config is what the endpoint reports and how it is protected.
type Config struct {
	Routes   *routing.Table
	Status   func() leasewatch.Status // the routing feeder's
	Draining func() bool              // whether the proxy shuts down
	Registry *prometheus.Registry     // served on /metrics
	Zone     string                   // the proxy's own zone, reported

	EnablePprof bool
	Security    adminauth.Config
	Logger      *slog.Logger
}

// Endpoint serves the admin HTTP API on a listener; Run serves it.
type Endpoint struct {
	cfg   Config
	ln    net.Listener
	certs *tlsconf.Server // the endpoint's TLS files, when it serves TLS
	http  *http.Server
	ui    *adminui.UI // the routing page
}

// New serves cfg on ln (bound; Run closes it).
func New(cfg Config, ln net.Listener) (*Endpoint, error) {
	e := &Endpoint{cfg: cfg, ln: ln}
	e.ui = adminui.New(adminui.Config{
		Table: cfg.Routes, Gatherer: cfg.Registry, State: e.readiness,
		Logger: cfg.Logger.With("component", "adminui"),
	})
	sln, h, certs, err := adminauth.Secure(cfg.Security, ln, e.mux(), cfg.Logger)
	if err != nil {
		return nil, err
	}
	e.ln, e.certs = sln, certs
	e.http = &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}
	e.http.RegisterOnShutdown(e.ui.CloseStreams)
	return e, nil
}

// Addr is the bound admin HTTP address.
func (e *Endpoint) Addr() string { return e.ln.Addr().String() }

// Run serves until ctx ends, then shuts the server down (waiting up to a
// second for open requests) and returns nil; it returns an error if
// serving fails first.
func (e *Endpoint) Run(ctx context.Context) error {
	bg, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() { e.ui.Run(bg) })
	if e.certs != nil {
		wg.Go(func() { _ = e.certs.Run(bg) })
	}
	errc := make(chan error, 1)
	go func() { errc <- e.http.Serve(e.ln) }()
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
		err = fmt.Errorf("admin http: %w", err)
	}
	hctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if serr := e.http.Shutdown(hctx); serr != nil {
		e.http.Close()
	}
	if err == nil {
		if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) {
			err = fmt.Errorf("admin http: %w", serr)
		}
	}
	stop()
	wg.Wait()
	return err
}

// mux serves the admin HTTP API on its own mux (never the default one).
func (e *Endpoint) mux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", e.handleReady)
	mux.Handle("GET /metrics", promhttp.HandlerFor(e.cfg.Registry, promhttp.HandlerOpts{Registry: e.cfg.Registry}))
	mux.HandleFunc("GET /v1/routes", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, e.snapshot())
	})
	mux.HandleFunc("GET /v1/brokers", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, e.snapshot().Brokers)
	})
	mux.HandleFunc("GET /v1/groups", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, e.snapshot().Groups)
	})
	e.ui.Register(mux)
	if e.cfg.EnablePprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

func (e *Endpoint) snapshot() routing.Snapshot {
	snap := e.cfg.Routes.Snapshot()
	snap.Zone = e.cfg.Zone
	return snap
}

// handleReady says 200 once the routing table is synced and has a live
// broker (and the proxy is not shutting down); 503 otherwise.
func (e *Endpoint) handleReady(w http.ResponseWriter, _ *http.Request) {
	r := e.readiness()
	code := http.StatusOK
	if !r.Ready {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, r)
}

// readiness is the proxy's own state, for /readyz and the routing page.
func (e *Endpoint) readiness() adminapi.Readiness {
	var r adminapi.Readiness
	st := e.cfg.Status()
	r.Synced, r.Connected, r.Revision, r.RouteAgeSeconds = st.Synced, st.Connected, st.Revision, st.Age.Seconds()
	r.MissingBrokers = st.MissingBrokers
	r.LiveBrokers = len(e.cfg.Routes.Brokers())
	r.Draining = e.cfg.Draining()
	r.Zone, r.FetchFrom = e.cfg.Zone, adminapi.FetchOwner
	if e.cfg.Routes.ZoneReads() {
		r.FetchFrom = adminapi.FetchZone
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
