package adminui

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/kproxy/kproxy/routing"
)

// TestPageIsSelfContained: the page and its files are served from the
// binary with a policy that forbids anything else, and name no other host.
func TestPageIsSelfContained(t *testing.T) {
	mux := http.NewServeMux()
	New(Config{Table: routing.NewTable()}).Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, tc := range []struct{ path, ctype, contains string }{
		{"/", "text/html", `src="/ui/app.js"`},
		{"/ui/app.js", "javascript", "new EventSource('/v1/events')"},
		{"/ui/app.css", "text/css", "font"},
	} {
		resp, err := http.Get(srv.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Type"), tc.ctype) ||
			!strings.Contains(string(body), tc.contains) {
			t.Errorf("GET %s: %s %q, body has %q: %v", tc.path, resp.Status, resp.Header.Get("Content-Type"), tc.contains, strings.Contains(string(body), tc.contains))
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q", tc.path, csp)
		}
	}
	resp, err := http.Get(srv.URL + "/nope")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /nope: %s", resp.Status)
	}
	// No CDN, no other host: no absolute URL in any embedded file, and no
	// write method anywhere in the script.
	url := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	err = fs.WalkDir(static, "static", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(static, path)
		if err != nil {
			return err
		}
		if m := url.Find(b); m != nil {
			t.Errorf("%s names another host: %s", path, m)
		}
		if l := strings.ToLower(string(b)); strings.Contains(l, "method:") || strings.Contains(l, "'post'") || strings.Contains(l, "\"post\"") {
			t.Errorf("%s has a request method other than GET", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
