package adminui

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/kproxy/kproxy/routing"
)

// bigTable has 1,000 topics of 100 partitions, owned round-robin by 10
// brokers: 100,000 partitions.
func bigTable(tb testing.TB) *routing.Table {
	tb.Helper()
	t := routing.NewTable()
	bld := routing.NewBuilder()
	for b := int32(1); b <= 10; b++ {
		bld.SetBroker(routing.Broker{ID: b, Addr: fmt.Sprintf("127.0.0.1:%d", 9000+b)})
	}
	for i := range 1000 {
		name := fmt.Sprintf("topic-%04d", i)
		bld.SetTopic(routing.Topic{Name: name, Partitions: 100})
		for p := range int32(100) {
			bld.SetOwner(name, p, 1+(int32(i)*100+p)%10)
			bld.SetEpoch(name, p, 1)
		}
	}
	t.Replace(bld)
	return t
}

func TestPagingAt100kPartitions(t *testing.T) {
	tb := bigTable(t)
	u := New(Config{Table: tb})
	tr := newTracker(time.Now, 10)
	start := time.Now()
	v, _ := tr.observe(tb.Snapshot())
	u.view.Store(v)
	observe := time.Since(start)
	if len(v.parts) != 100_000 {
		t.Fatalf("%d partitions in the view", len(v.parts))
	}
	mux := http.NewServeMux()
	u.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	cases := []struct {
		query     string
		total     int
		rows      int
		firstKey  string // topic/partition of the first row
		wantOwner int32  // every row's owner (0: any)
	}{
		{"", 100_000, 100, "topic-0000/0", 0},
		{"?offset=99950&limit=100", 100_000, 50, "topic-0999/50", 0},
		{"?limit=1000&offset=1000", 100_000, 1000, "topic-0010/0", 0},
		{"?topic=topic-0042", 100, 100, "topic-0042/0", 0},
		{"?topic=topic-004&limit=5&offset=995", 1000, 5, "topic-0049/95", 0},
		{"?broker=3", 10_000, 100, "topic-0000/2", 3},
		{"?broker=3&topic=topic-0001", 10, 10, "topic-0001/2", 3},
		{"?broker=42", 0, 0, "", 0},
		{"?topic=nope", 0, 0, "", 0},
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			t0 := time.Now()
			var page Page[PartitionRow]
			getJSON(t, srv.URL+"/v1/ui/partitions"+tc.query, &page)
			if el := time.Since(t0); el > 2*time.Second {
				t.Errorf("page took %s", el)
			}
			if page.Total != tc.total || len(page.Rows) != tc.rows || page.Version != v.version {
				t.Fatalf("total %d rows %d version %d, want %d, %d, %d", page.Total, len(page.Rows), page.Version, tc.total, tc.rows, v.version)
			}
			if tc.rows > 0 {
				if k := fmt.Sprintf("%s/%d", page.Rows[0].Topic, page.Rows[0].Partition); k != tc.firstKey {
					t.Fatalf("first row %s, want %s", k, tc.firstKey)
				}
			}
			for _, r := range page.Rows {
				if tc.wantOwner != 0 && r.Owner != tc.wantOwner {
					t.Fatalf("row %+v does not match the owner filter", r)
				}
			}
		})
	}
	for _, bad := range []string{"?limit=0", "?limit=1001", "?offset=-1", "?broker=x", "?offset=1e3"} {
		resp, err := http.Get(srv.URL + "/v1/ui/partitions" + bad)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", bad, resp.StatusCode)
		}
	}
	var topics Page[TopicRow]
	getJSON(t, srv.URL+"/v1/ui/topics?topic=topic-09&limit=10", &topics)
	if topics.Total != 100 || len(topics.Rows) != 10 || topics.Rows[0].Name != "topic-0900" || topics.Rows[0].Owned != 100 {
		t.Fatalf("topics page = %+v", topics)
	}
	// The overview carries counts, never the lists.
	var ov Overview
	getJSON(t, srv.URL+"/v1/ui/overview", &ov)
	if ov.Partitions != 100_000 || ov.Topics != 1000 || len(ov.Brokers) != 10 || ov.Brokers[0].Partitions != 10_000 {
		t.Fatalf("overview = %+v", ov)
	}
	t.Logf("first look at 100k partitions: %s", observe)
}

func BenchmarkObserve100k(b *testing.B) {
	tb := bigTable(b)
	tr := newTracker(time.Now, 200)
	for b.Loop() {
		tr.observe(tb.Snapshot())
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}
