// Package adminui serves the admin address's live routing page: brokers,
// topics, every partition's owner and since when, groups, the proxy's own
// state, request and error rates, and ownership changes as they happen.
//
// It promises: the page is plain HTML, CSS and JavaScript embedded in the
// binary (no build step, no CDN) and has no write actions; it is kept
// current over server-sent events fed by the proxy's own routing table;
// rates come from the Prometheus registry /metrics serves; lists are paged
// and filtered on the server, so that a table of 100,000 partitions never
// reaches the browser whole; a page that cannot keep up is dropped, and no
// page ever blocks the proxy. Its limit: "owner since" is when this proxy
// first saw the owner, so owners that predate the proxy's start show a
// lower bound.
package adminui

import (
	"context"
	"embed"
	"encoding/json"
	"io/fs"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kproxy/kproxy/proxy/admin/adminapi"
	"github.com/kproxy/kproxy/routing"
)

//go:embed static
var static embed.FS

// Config is what the page reads. Table is required.
type Config struct {
	Table    *routing.Table
	Gatherer prometheus.Gatherer // rates; nil: none
	// State returns the proxy's own state: its /readyz body.
	State  func() adminapi.Readiness
	Logger *slog.Logger
	Now    func() time.Time

	Throttle   time.Duration // least time between two reads of the table (default 250ms)
	Tick       time.Duration // state and rates refresh (default 1s)
	MaxPages   int           // open event streams (default 32)
	PageBuffer int           // messages queued per stream before it is dropped (default 64)
	Recent     int           // ownership changes kept (default 200)
}

// maxChangesPerEvent bounds one "changes" event; a failover that moves
// more partitions sends the newest and the page reloads its window.
const maxChangesPerEvent = 500

// UI is the page and its data. Create it with New, serve Handler, and run
// Run for as long as the page should follow the table.
type UI struct {
	cfg   Config
	view  atomic.Pointer[view]
	rates atomic.Pointer[Rates]
	hub   *hub
}

// New returns a UI showing an empty table until Run takes its first look.
func New(cfg Config) *UI {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.State == nil {
		cfg.State = func() adminapi.Readiness { return adminapi.Readiness{} }
	}
	setDefault(&cfg.Throttle, 250*time.Millisecond)
	setDefault(&cfg.Tick, time.Second)
	setDefault(&cfg.MaxPages, 32)
	setDefault(&cfg.PageBuffer, 64)
	setDefault(&cfg.Recent, 200)
	u := &UI{cfg: cfg, hub: newHub(cfg.PageBuffer, cfg.MaxPages)}
	u.view.Store(&view{at: cfg.Now()})
	u.rates.Store(&Rates{ByAPI: []Rate{}, ByBroker: []Rate{}})
	return u
}

func setDefault[T time.Duration | int](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// Register adds the page's routes to mux: GET / (the page), /ui/ (its
// files), /v1/ui/{partitions,topics,groups} (paged lists), /v1/ui/overview
// and /v1/events (the event stream).
func (u *UI) Register(mux *http.ServeMux) {
	files, _ := fs.Sub(static, "static") // static is embedded: cannot fail
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		securityHeaders(w)
		http.ServeFileFS(w, r, files, "index.html")
	})
	fileServer := http.StripPrefix("/ui/", http.FileServerFS(files))
	mux.HandleFunc("GET /ui/", func(w http.ResponseWriter, r *http.Request) {
		securityHeaders(w)
		fileServer.ServeHTTP(w, r)
	})
	mux.HandleFunc("GET /v1/ui/partitions", pageHandler(u, "topic", (*view).partitionPage))
	mux.HandleFunc("GET /v1/ui/topics", pageHandler(u, "topic", (*view).topicPage))
	mux.HandleFunc("GET /v1/ui/groups", pageHandler(u, "group", (*view).groupPage))
	mux.HandleFunc("GET /v1/ui/overview", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, u.overview())
	})
	mux.HandleFunc("GET /v1/events", func(w http.ResponseWriter, r *http.Request) {
		first, err := event("overview", u.overview())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		u.hub.serveEvents(w, r, first)
	})
}

// securityHeaders: the page loads nothing but its own files.
func securityHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
}

// CloseStreams ends every open event stream (for the admin server's
// shutdown, which otherwise waits for them).
func (u *UI) CloseStreams() { u.hub.close() }

func (u *UI) current() *view { return u.view.Load() }

// Overview is the event-stream message that carries everything but the
// paged lists.
type Overview struct {
	Version    uint64             `json:"version"` // changes whenever the table was read anew
	At         time.Time          `json:"at"`
	State      adminapi.Readiness `json:"state"`
	Brokers    []BrokerRow        `json:"brokers"`
	Topics     int                `json:"topics"`
	Partitions int                `json:"partitions"`
	Groups     int                `json:"groups"`
	Recent     []Change           `json:"recent"` // newest first
	Rates      *Rates             `json:"rates"`
}

func (u *UI) overview() Overview {
	v := u.current()
	brokers := v.brokers
	if brokers == nil {
		brokers = []BrokerRow{}
	}
	recent := v.recent
	if recent == nil {
		recent = []Change{}
	}
	return Overview{
		Version: v.version, At: v.at, State: u.cfg.State(), Brokers: brokers,
		Topics: len(v.topics), Partitions: len(v.parts), Groups: len(v.groups),
		Recent: recent, Rates: u.rates.Load(),
	}
}

// Run follows the table until ctx ends, then closes every stream. It reads
// the table at most once per Throttle however often it changes (once per
// four while no page is open).
func (u *UI) Run(ctx context.Context) {
	defer u.hub.close()
	tr := newTracker(u.cfg.Now, u.cfg.Recent)
	tick := time.NewTicker(u.cfg.Tick)
	defer tick.Stop()
	var prev sample
	for {
		changed := u.cfg.Table.Changed()
		u.refresh(tr)
		for waiting := true; waiting; {
			select {
			case <-ctx.Done():
				return
			case <-changed:
				waiting = false
			case <-tick.C:
				prev = u.tick(prev)
			}
		}
		// With no page open, the table is read less often: owner-since is
		// then a little coarser, and a proxy nobody watches pays less.
		gap := u.cfg.Throttle
		if u.hub.count() == 0 {
			gap *= 4
		}
		t := time.NewTimer(gap)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// refresh reads the table and tells the open pages what changed.
func (u *UI) refresh(tr *tracker) {
	v, changes := tr.observe(u.cfg.Table.Snapshot())
	u.view.Store(v)
	if u.hub.count() == 0 {
		return
	}
	if len(changes) > 0 {
		u.send("changes", changes[max(0, len(changes)-maxChangesPerEvent):])
	}
	u.send("overview", u.overview())
}

// tick refreshes the rates and the proxy's state on the open pages. The
// registry is read only while a page is open; a sample taken before a
// quiet spell is discarded so that rates never average over it.
func (u *UI) tick(prev sample) sample {
	if u.cfg.Gatherer == nil || u.hub.count() == 0 {
		return sample{}
	}
	cur, err := takeSample(u.cfg.Gatherer, u.cfg.Now())
	if err != nil {
		u.cfg.Logger.Warn("admin page: read metrics", "err", err)
		return sample{}
	}
	r := ratesBetween(prev, cur)
	u.rates.Store(&r)
	u.send("overview", u.overview())
	return cur
}

func (u *UI) send(name string, v any) {
	msg, err := event(name, v)
	if err != nil {
		u.cfg.Logger.Warn("admin page: encode event", "event", name, "err", err)
		return
	}
	u.hub.broadcast(msg)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(v) // the page went away; nothing to do
}
