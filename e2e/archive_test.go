package e2e

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

type letterDoc struct {
	ID   string `json:"id"`
	Body string `json:"body"`
}

// TestArchiveCrash: the real binary is killed (SIGKILL) while three
// members send to a worker that keeps reading and archiving what it read.
// After a restart every acknowledged letter is there exactly once, in the
// inbox or the archive, with its body; every letter an acknowledged
// archive moved is in the archive; ids run from 1 with no gap and none
// twice; and the next letter takes the next id.
func TestArchiveCrash(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	srv := startServer(t, dataDir)
	c := newClient(srv.base)
	tokens := createTeam(t, c, "arc", "worker", "s1", "s2")

	var mu sync.Mutex
	sent := map[string]string{} // acknowledged letters: id → body
	archivedThrough := 0        // the highest through of an acknowledged archive
	ks := newKillSwitch(srv, int64(150+rand.IntN(150)))
	var wg sync.WaitGroup
	for _, sender := range []string{"lead", "s1", "s2"} {
		wg.Go(func() {
			for i := 0; ; i++ {
				body := fmt.Sprintf("%s %d", sender, i)
				var d struct {
					ID string `json:"id"`
				}
				status, code, err := c.do(http.MethodPost, "/teams/arc/messages", tokens[sender], "", map[string]any{"to": "worker", "body": body}, &d)
				if err == nil && code == "inbox_full" {
					// The lessons' 8 letters: the worker's next archive
					// makes room.
					time.Sleep(time.Millisecond)
					continue
				}
				if err != nil || status != http.StatusCreated {
					return
				}
				mu.Lock()
				if prev, dup := sent[d.ID]; dup {
					t.Errorf("%s acknowledged for %q and %q", d.ID, prev, body)
				}
				sent[d.ID] = body
				mu.Unlock()
				ks.ack()
			}
		})
	}
	wg.Go(func() {
		for {
			var inbox struct {
				Messages []letterDoc `json:"messages"`
			}
			status, _, err := c.do(http.MethodGet, "/teams/arc/members/worker/inbox", tokens["worker"], "", nil, &inbox)
			if err != nil || status != http.StatusOK {
				return
			}
			if len(inbox.Messages) == 0 {
				select {
				case <-ks.killed:
					return
				case <-time.After(time.Millisecond):
				}
				continue
			}
			last := inbox.Messages[len(inbox.Messages)-1].ID
			if status, _, err := c.do(http.MethodPost, "/teams/arc/members/worker/inbox/read", tokens["worker"], "", map[string]any{"through": last}, nil); err != nil || status != http.StatusOK {
				return
			}
			var res struct {
				Archived int `json:"archived"`
			}
			if status, _, err := c.do(http.MethodPost, "/teams/arc/members/worker/inbox/archive", tokens["worker"], "", map[string]any{"through": last}, &res); err != nil || status != http.StatusOK {
				return
			}
			n, _ := strconv.Atoi(strings.TrimPrefix(last, "worker-"))
			mu.Lock()
			archivedThrough = max(archivedThrough, n)
			mu.Unlock()
			ks.ack()
		}
	})
	select {
	case <-ks.killed:
	case <-time.After(2 * time.Minute):
		ks.kill()
		wg.Wait()
		t.Fatalf("no kill after 2 minutes: %d acknowledgements of %d", ks.acks.Load(), ks.at)
	}
	wg.Wait()
	c.close()

	srv = startServer(t, dataDir)
	c = newClient(srv.base)
	defer c.close()
	var inbox struct {
		Messages []letterDoc `json:"messages"`
	}
	if status, code, err := c.do(http.MethodGet, "/teams/arc/members/worker/inbox", adminToken, "", nil, &inbox); err != nil || status != http.StatusOK {
		t.Fatalf("inbox after the restart: %d %s %v", status, code, err)
	}
	var archive []letterDoc
	for after := ""; ; {
		var page struct {
			Letters []letterDoc `json:"letters"`
		}
		path := "/teams/arc/members/worker/archive?limit=1000"
		if after != "" {
			path += "&after=" + after
		}
		if status, code, err := c.do(http.MethodGet, path, adminToken, "", nil, &page); err != nil || status != http.StatusOK {
			t.Fatalf("archive after the restart: %d %s %v", status, code, err)
		}
		if len(page.Letters) == 0 {
			break
		}
		archive = append(archive, page.Letters...)
		after = page.Letters[len(page.Letters)-1].ID
	}
	stored := map[string]string{}
	where := map[string]string{}
	for place, letters := range map[string][]letterDoc{"inbox": inbox.Messages, "archive": archive} {
		for _, l := range letters {
			if prev, dup := where[l.ID]; dup {
				t.Errorf("%s is in the %s and in the %s", l.ID, prev, place)
			}
			stored[l.ID], where[l.ID] = l.Body, place
		}
	}
	for i := 1; i <= len(stored); i++ {
		if _, ok := stored[fmt.Sprintf("worker-%d", i)]; !ok {
			t.Errorf("worker-%d missing among %d letters: ids must run from 1 without a gap", i, len(stored))
		}
	}
	for id, body := range sent {
		if got, ok := stored[id]; !ok || got != body {
			t.Errorf("acknowledged %s (%q) after the restart: %q, present %v", id, body, got, ok)
		}
	}
	for i := 1; i <= archivedThrough; i++ {
		if id := fmt.Sprintf("worker-%d", i); where[id] != "archive" {
			t.Errorf("%s was archived (acknowledged through worker-%d) but is in the %s", id, archivedThrough, where[id])
		}
	}
	if n := len(inbox.Messages); n > 0 {
		// Room for the next letter: the worker reads and archives what
		// the restart kept in its inbox.
		last := inbox.Messages[n-1].ID
		if status, code, err := c.do(http.MethodPost, "/teams/arc/members/worker/inbox/read", tokens["worker"], "", map[string]any{"through": last}, nil); err != nil || status != http.StatusOK {
			t.Fatalf("mark read after the restart: %d %s %v", status, code, err)
		}
		if status, code, err := c.do(http.MethodPost, "/teams/arc/members/worker/inbox/archive", tokens["worker"], "", map[string]any{"through": last}, nil); err != nil || status != http.StatusOK {
			t.Fatalf("archive after the restart: %d %s %v", status, code, err)
		}
	}
	var d struct {
		ID string `json:"id"`
	}
	if status, code, err := c.do(http.MethodPost, "/teams/arc/messages", tokens["lead"], "", map[string]any{"to": "worker", "body": "after"}, &d); err != nil || status != http.StatusCreated || d.ID != fmt.Sprintf("worker-%d", len(stored)+1) {
		t.Fatalf("send after the restart = %q (%d %s %v), want worker-%d", d.ID, status, code, err, len(stored)+1)
	}
	t.Logf("killed after %d acknowledgements: %d letters, %d archived (acknowledged through worker-%d), %d sent acknowledged", ks.at, len(stored), len(archive), archivedThrough, len(sent))
}
