package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLessonListing(t *testing.T) {
	page := strings.Join([]string{
		"A lesson page: prose first.",
		"def send_message(directory, members, sender, recipient, body, lock):",
		"    pass  # an excerpt shown above the listing, not the listing",
		"from copy import deepcopy   ",
		"import json",
		"def send_message(directory, members, sender, recipient, body, lock):",
		"    return {}",
		"",
		"def prepare_inbox(history, directory, members, recipient, lock):",
		"    pass",
		"from copy import deepcopy",
		"import second_listing",
		"def prepare_inbox():",
	}, "\r\n")
	tests := []struct {
		name, file, text string
		want             string
		wantErr          string
	}{
		{"page text", "001_page.txt", page,
			"from copy import deepcopy   \nimport json\ndef send_message(directory, members, sender, recipient, body, lock):\n    return {}\n\n", ""},
		{"a Python file is whole", "runtime.py", "import json\ndef prepare_inbox(): pass\n", "import json\ndef prepare_inbox(): pass\n", ""},
		{"no start", "page.txt", "def prepare_inbox():\n", "", "no line \"from copy import deepcopy\""},
		{"no end", "page.txt", "from copy import deepcopy\nimport json\n", "", "no line \"def prepare_inbox…\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := lessonListing(tt.file, tt.text)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("lessonListing error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("lessonListing: %v", err)
			}
			if got != tt.want {
				t.Errorf("lessonListing = %q, want %q", got, tt.want)
			}
		})
	}
}

// stubLesson has the lesson's four functions with its rules that the
// reference server relies on: members checked, at most 8 letters per
// inbox (refused with a ValueError), one file per inbox.
const stubLesson = `import json, os
def member_name(name, members):
    if name not in members:
        raise ValueError('unknown member ' + str(name))
    return name
def load_inbox(directory, recipient, members):
    member_name(recipient, members)
    path = os.path.join(directory, recipient + '.jsonl')
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f]
def save_inbox(directory, recipient, items):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, recipient + '.jsonl'), 'w') as f:
        f.write(''.join(json.dumps(item) + '\n' for item in items))
def send_message(directory, members, sender, recipient, body, lock):
    member_name(sender, members)
    with lock:
        items = load_inbox(directory, recipient, members)
        if len(items) >= 8:
            raise ValueError('inbox full')
        item = {'id': recipient + '-' + str(len(items) + 1), 'sender': sender, 'body': body}
        save_inbox(directory, recipient, items + [item])
    return {'id': item['id'], 'status': 'queued'}
`

// TestReferenceServer runs reference.py under python3 over the stub
// lesson: receipts, a fresh directory when an inbox is full, refusals.
func TestReferenceServer(t *testing.T) {
	dir := t.TempDir()
	lesson := filepath.Join(dir, "stub.py")
	if err := os.WriteFile(lesson, []byte(stubLesson), 0o600); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(dir, "work")
	url, stop, err := startReference(work, lesson)
	if err != nil {
		t.Fatalf("startReference: %v", err)
	}
	defer stop()
	post := func(path, body string) (int, string) {
		t.Helper()
		resp, err := http.Post(url+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(data)
	}
	for i, want := range []string{"lead-1", "lead-2", "lead-3", "lead-4", "lead-5", "lead-6", "lead-7", "lead-8", "lead-1", "lead-2"} {
		code, body := post("/teams/t1/messages", `{"to": "lead", "body": "hello"}`)
		if code != http.StatusCreated || !strings.Contains(body, fmt.Sprintf(`"id": %q`, want)) {
			t.Fatalf("send %d: %d %s, want 201 with id %s", i+1, code, body, want)
		}
	}
	for gen, want := range []int{8, 2} {
		b, err := os.ReadFile(filepath.Join(work, "teams", "t1", fmt.Sprint(gen), "lead.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Count(string(b), "\n"); got != want {
			t.Errorf("directory %d holds %d letters, want %d", gen, got, want)
		}
	}
	for _, tt := range []struct {
		path, body string
		want       int
	}{
		{"/teams/t1/messages", `{"to": "bob", "body": "hello"}`, http.StatusBadRequest},
		{"/teams/t1/messages", `{"body": "hello"}`, http.StatusBadRequest},
		{"/teams/t1/messages", `not json`, http.StatusBadRequest},
		{"/teams/../messages", `{"to": "lead", "body": "hello"}`, http.StatusNotFound},
	} {
		if code, body := post(tt.path, tt.body); code != tt.want {
			t.Errorf("POST %s %s: %d %s, want %d", tt.path, tt.body, code, body, tt.want)
		}
	}

	// Phase r against the running server by its URL: every send a 201.
	f, err := measureReference(context.Background(), filepath.Join(dir, "unused"), config{refURL: url, duration: 200 * time.Millisecond})
	if err != nil {
		t.Fatalf("measureReference: %v", err)
	}
	if len(f.lat) == 0 || f.rate <= 0 || f.source != url {
		t.Errorf("measureReference = %d sends, %.0f/s from %q; want some sends from %q", len(f.lat), f.rate, f.source, url)
	}
}
