package adminui

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/kproxy/kproxy/routing"
)

// Page sizes: the page asks for one page of rows at a time, never for all.
const (
	defaultLimit = 100
	maxLimit     = 1000
)

// query is a page request: a substring filter on the name (topic or
// group), an owner broker (-1: any), and the window.
type query struct {
	name          string
	broker        int32
	offset, limit int
}

// Page is one window of a filtered list.
type Page[T any] struct {
	Version uint64 `json:"version"` // the view it was cut from
	Total   int    `json:"total"`   // rows matching the filter
	Offset  int    `json:"offset"`
	Rows    []T    `json:"rows"`
}

func parseQuery(v url.Values, nameKey string) (query, error) {
	q := query{name: v.Get(nameKey), broker: -1, limit: defaultLimit}
	num := func(key string, lo, hi int) (int, bool, error) {
		s := v.Get(key)
		if s == "" {
			return 0, false, nil
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < lo || n > hi {
			return 0, false, fmt.Errorf("%s=%q: want an integer in [%d, %d]", key, s, lo, hi)
		}
		return n, true, nil
	}
	var err error
	var set bool
	var n int
	if q.offset, _, err = num("offset", 0, 1<<31-1); err != nil {
		return q, err
	}
	if n, set, err = num("limit", 1, maxLimit); err != nil {
		return q, err
	} else if set {
		q.limit = n
	}
	if n, set, err = num("broker", 0, 1<<31-1); err != nil {
		return q, err
	} else if set {
		q.broker = int32(n)
	}
	return q, nil
}

// cut returns the window of rows that match, counting all matches.
func cut[T any](version uint64, rows []T, q query, match func(*T) bool) Page[T] {
	p := Page[T]{Version: version, Offset: q.offset, Rows: []T{}}
	for i := range rows {
		if !match(&rows[i]) {
			continue
		}
		if p.Total >= q.offset && len(p.Rows) < q.limit {
			p.Rows = append(p.Rows, rows[i])
		}
		p.Total++
	}
	return p
}

func (v *view) partitionPage(q query) Page[PartitionRow] {
	return cut(v.version, v.parts, q, func(p *PartitionRow) bool {
		return (q.broker < 0 || p.Owner == q.broker) && strings.Contains(p.Topic, q.name)
	})
}

func (v *view) topicPage(q query) Page[TopicRow] {
	return cut(v.version, v.topics, q, func(t *TopicRow) bool { return strings.Contains(t.Name, q.name) })
}

func (v *view) groupPage(q query) Page[routing.SnapshotGroup] {
	return cut(v.version, v.groups, q, func(g *routing.SnapshotGroup) bool {
		return (q.broker < 0 || g.Coordinator == q.broker) && strings.Contains(g.Group, q.name)
	})
}

// pageHandler serves one paged list of the newest view as JSON.
func pageHandler[T any](u *UI, nameKey string, page func(*view, query) Page[T]) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q, err := parseQuery(r.URL.Query(), nameKey)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		writeJSON(w, page(u.current(), q))
	}
}
