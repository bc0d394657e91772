package apis

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// docRequests returns the API names in the first column of the table under
// heading in a Markdown text: each cell is a list of names joined by ", "
// or " / ", each name its cell piece's first word (a piece may go on, as in
// "DescribeCluster authorized operations").
func docRequests(md, heading string) []string {
	_, after, ok := strings.Cut("\n"+md, "\n"+heading+"\n")
	if !ok {
		return nil
	}
	var names []string
	inTable := false
	for line := range strings.Lines(after) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break
			}
			continue
		}
		inTable = true
		cell := strings.TrimSpace(strings.Split(line, "|")[1])
		if cell == "request" || strings.HasPrefix(cell, "---") {
			continue
		}
		for _, piece := range strings.FieldsFunc(strings.ReplaceAll(cell, " / ", ","), func(r rune) bool { return r == ',' }) {
			if f := strings.Fields(piece); len(f) > 0 {
				names = append(names, f[0])
			}
		}
	}
	return names
}

// TestAuthorizationDocMatchesTable: docs/authorization.md's table of what
// each request needs names every API the table authorizes (a rule or per
// partition), and nothing else, so a new row fails here until the doc
// says what it needs (names compare without case: the doc spells them as
// Kafka's documentation does, CreateAcls for kmsg's CreateACLs).
func TestAuthorizationDocMatchesTable(t *testing.T) {
	md, err := os.ReadFile(filepath.Join("..", "..", "docs", "authorization.md"))
	if err != nil {
		t.Fatal(err)
	}
	inDoc := map[string]bool{}
	for _, n := range docRequests(string(md), "## What each request needs (Kafka's checks, Kafka's codes)") {
		inDoc[strings.ToLower(n)] = true
	}
	if len(inDoc) < 30 {
		t.Fatalf("docs/authorization.md's table names %d requests; the check would prove nothing", len(inDoc))
	}
	authorized := map[string]bool{}
	for _, k := range AuthorizedKeys() {
		name := strings.ToLower(kmsg.NameForKey(k))
		authorized[name] = true
		if !inDoc[name] {
			t.Errorf("%s is authorized (its row in table.go) but not in docs/authorization.md's table of what each request needs", kmsg.NameForKey(k))
		}
	}
	for _, n := range slices.Sorted(maps.Keys(inDoc)) {
		if !authorized[n] {
			t.Errorf("docs/authorization.md's table names %q, which no row of table.go authorizes", n)
		}
	}
}

func TestDocRequests(t *testing.T) {
	md := "## T\n\n| request | needs |\n|---|---|\n| A, B c d | x |\n| E / F | y |\n\n| G | z |\n"
	if got := docRequests(md, "## T"); !slices.Equal(got, []string{"A", "B", "E", "F"}) {
		t.Errorf("docRequests = %q, want [A B E F]", got)
	}
}
