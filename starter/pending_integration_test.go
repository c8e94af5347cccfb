//go:build integration

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/internal/testkit/devtest"
)

// starter pending pages: more waiting runs than a page are listed a page at a time, each run
// once, the JSON carrying next_page_token and the table saying how to get the next page.
func TestIntegrationPendingPages(t *testing.T) {
	ts := devtest.Start(t)
	addr, ns := ts.GetFrontendHostPort(), ts.GetDefaultNamespace()
	cliWorker(t, ts)
	const runs, size = 5, 2
	want := map[string]bool{}
	for i := range runs {
		id := fmt.Sprintf("page-run-%d", i)
		if r := starterIn(t, addr, ns, "run", "--code", "print(1)", "--workflow-id", id); r.code != 0 {
			t.Fatalf("run %s: exit %d, %s %s", id, r.code, r.stdout, r.stderr)
		}
		want[id] = true
	}
	pageOf := func(args ...string) client.PendingPage {
		t.Helper()
		r := starterIn(t, addr, ns, append([]string{"pending", "--json"}, args...)...)
		var p client.PendingPage
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &p) != nil {
			t.Fatalf("pending %v: exit %d, %s %s", args, r.code, r.stdout, r.stderr)
		}
		return p
	}
	// Visibility is eventually consistent: wait (bounded) until one big page lists them all.
	deadline := time.Now().Add(30 * time.Second)
	for p := pageOf(); len(p.Runs) < runs; p = pageOf() {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d runs listed after 30 s", len(p.Runs), runs)
		}
		time.Sleep(200 * time.Millisecond)
	}

	seen := map[string]bool{}
	token, pages := "", 0
	for {
		args := []string{"--page-size", fmt.Sprint(size)}
		if token != "" {
			args = append(args, "--next-page", token)
		}
		p := pageOf(args...)
		if pages++; pages > runs {
			t.Fatalf("more than %d pages of %d runs", pages, runs)
		}
		if len(p.Runs) > size {
			t.Fatalf("page %d has %d runs, more than --page-size %d", pages, len(p.Runs), size)
		}
		for _, r := range p.Runs {
			if seen[r.WorkflowID] || !want[r.WorkflowID] {
				t.Fatalf("page %d lists %s again or unknown (seen %v)", pages, r.WorkflowID, seen)
			}
			seen[r.WorkflowID] = true
		}
		if token = p.NextPageToken; token == "" {
			break
		}
	}
	if len(seen) != runs || pages < 3 {
		t.Fatalf("pages listed %d of %d runs in %d pages; want all in at least 3", len(seen), runs, pages)
	}

	// The table's first page ends with the command for the next one, which works as printed.
	r := starterIn(t, addr, ns, "pending", "--page-size", fmt.Sprint(size))
	_, next, ok := strings.Cut(r.stdout, "the next page: starter pending ")
	if r.code != 0 || !ok {
		t.Fatalf("table: exit %d, %s; want the next page's command", r.code, r.stdout)
	}
	r = starterIn(t, addr, ns, append([]string{"pending"}, strings.Fields(next)...)...)
	if r.code != 0 || !strings.Contains(r.stdout, "WORKFLOW ID") || strings.Count(r.stdout, "page-run-") != size {
		t.Fatalf("next page from the table's command %q: exit %d, %s", next, r.code, r.stdout)
	}
	// The Go client's PendingPage pages the same way; Pending still lists every page.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sc, err := client.Connect(ctx, client.Connection{Address: addr, Namespace: ns}, "", "cli")
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	first, err := sc.PendingPage(ctx, size, "")
	if err != nil || len(first.Runs) != size || first.NextPageToken == "" {
		t.Fatalf("PendingPage(%d): %d runs, token %q, %v", size, len(first.Runs), first.NextPageToken, err)
	}
	second, err := sc.PendingPage(ctx, size, first.NextPageToken)
	if err != nil || len(second.Runs) == 0 || second.Runs[0].WorkflowID == first.Runs[0].WorkflowID {
		t.Fatalf("second page: %+v, %v", second, err)
	}
	if all, err := sc.Pending(ctx); err != nil || len(all) != runs {
		t.Fatalf("Pending: %d runs, %v; want %d", len(all), err, runs)
	}
	if _, err := sc.PendingPage(ctx, -1, ""); err == nil {
		t.Fatal("PendingPage(-1): want an error")
	}
	// A token that is not one: refused, not the first page again.
	if r := starterIn(t, addr, ns, "pending", "--next-page", "not*base64"); r.code == 0 {
		t.Fatalf("bad token: exit 0, %s", r.stdout)
	}
}
