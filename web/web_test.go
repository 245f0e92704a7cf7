package web_test

import (
	"encoding/xml"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"mailroom/internal/scenario"
	"mailroom/web"
)

// TestScenarioFormDefaultsAsTheAPI pins the page's scenario options to the
// API's defaults, so a run started from the page with nothing touched is the
// run POST /scenarios/team-protocols/runs makes with an empty body.
func TestScenarioFormDefaultsAsTheAPI(t *testing.T) {
	b, err := fs.ReadFile(web.FS(), "index.html")
	if err != nil {
		t.Fatal(err)
	}
	checked := regexp.MustCompile(`<input type="radio" name="(plan|decision)" value="([a-z]+)" checked>`)
	got := map[string]string{}
	for _, m := range checked.FindAllStringSubmatch(string(b), -1) {
		got[m[1]] = m[2]
	}
	want := map[string]string{"plan": scenario.PlanApprove, "decision": scenario.DecisionDeny}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("the page's %s defaults to %q, want the API's default %q", name, got[name], w)
		}
	}
}

func TestFSHoldsThePage(t *testing.T) {
	files := []struct {
		name string
		want string // a fragment the file must contain
	}{
		{"index.html", "<!doctype html>"},
		{"app.js", "Authorization"},
		{"style.css", "@media"},
		{"icon.svg", "<svg"},
	}
	for _, f := range files {
		t.Run(f.name, func(t *testing.T) {
			b, err := fs.ReadFile(web.FS(), f.name)
			if err != nil {
				t.Fatalf("read %s: %v", f.name, err)
			}
			if !strings.Contains(string(b), f.want) {
				t.Errorf("%s does not contain %q", f.name, f.want)
			}
		})
	}
	if _, err := fs.Stat(web.FS(), "static"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("FS must be rooted inside static/, got Stat(static) err = %v", err)
	}
}

// element is one start tag of index.html with its attributes and the text
// directly inside it.
type element struct {
	name  string
	attrs map[string]string
	text  string
}

// parseHTML reads index.html with encoding/xml in its lenient HTML mode:
// enough to list every tag and attribute of a hand-written page.
func parseHTML(t *testing.T, src []byte) []*element {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(string(src)))
	d.Strict = false
	d.AutoClose = xml.HTMLAutoClose
	d.Entity = xml.HTMLEntity
	var out []*element
	var stack []*element
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("parse index.html: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			e := &element{name: strings.ToLower(tok.Name.Local), attrs: map[string]string{}}
			for _, a := range tok.Attr {
				name := strings.ToLower(a.Name.Local)
				if a.Name.Space != "" {
					name = strings.ToLower(a.Name.Space) + ":" + name
				}
				e.attrs[name] = a.Value
			}
			out = append(out, e)
			stack = append(stack, e)
		case xml.EndElement:
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		case xml.CharData:
			if len(stack) > 0 {
				stack[len(stack)-1].text += string(tok)
			}
		}
	}
	return out
}

func TestIndexHasNoInlineCodeAndOnlyLocalAssets(t *testing.T) {
	src, err := fs.ReadFile(web.FS(), "index.html")
	if err != nil {
		t.Fatal(err)
	}
	elems := parseHTML(t, src)
	if len(elems) < 20 {
		t.Fatalf("parsed only %d elements; the parser lost its way", len(elems))
	}

	var scripts, sheets int
	for _, e := range elems {
		for name := range e.attrs {
			if strings.HasPrefix(name, "on") {
				t.Errorf("<%s> has inline handler %s (CSP forbids inline script)", e.name, name)
			}
			if name == "style" {
				t.Errorf("<%s> has a style attribute (CSP forbids inline style)", e.name)
			}
		}
		switch e.name {
		case "style":
			t.Errorf("index.html has a <style> element (CSP forbids inline style)")
		case "script":
			scripts++
			if e.attrs["src"] == "" {
				t.Errorf("<script> without src (CSP forbids inline script)")
			}
			if strings.TrimSpace(e.text) != "" {
				t.Errorf("<script src=%q> has inline text %q", e.attrs["src"], e.text)
			}
		case "link":
			if e.attrs["rel"] == "stylesheet" {
				sheets++
			}
		}
		for _, attr := range []string{"src", "href", "action", "formaction"} {
			ref, ok := e.attrs[attr]
			if !ok {
				continue
			}
			if !isLocal(ref) {
				t.Errorf("<%s %s=%q> is not a local asset", e.name, attr, ref)
				continue
			}
			if _, err := fs.Stat(web.FS(), strings.TrimPrefix(ref, "/")); err != nil {
				t.Errorf("<%s %s=%q> names a file the page does not embed: %v", e.name, attr, ref, err)
			}
		}
	}
	if scripts != 1 || sheets != 1 {
		t.Errorf("want exactly one script and one stylesheet, got %d and %d", scripts, sheets)
	}
}

// isLocal reports whether ref is a relative path on the same origin: no
// scheme, no network-path reference, no fragment-only or javascript: URL.
func isLocal(ref string) bool {
	if ref == "" || strings.HasPrefix(ref, "//") || strings.HasPrefix(ref, "#") {
		return false
	}
	return !regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`).MatchString(ref)
}

func TestIsLocal(t *testing.T) {
	tests := []struct {
		ref  string
		want bool
	}{
		{"app.js", true},
		{"/style.css", true},
		{"https://cdn.example/x.js", false},
		{"//cdn.example/x.js", false},
		{"javascript:alert(1)", false},
		{"data:text/javascript,1", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := isLocal(tt.ref); got != tt.want {
			t.Errorf("isLocal(%q) = %v, want %v", tt.ref, got, tt.want)
		}
	}
}

// TestScriptNeverParsesMarkup guards the rendering rule: API strings go
// into the page as text only, and the token never goes into a URL.
func TestScriptNeverParsesMarkup(t *testing.T) {
	src, err := fs.ReadFile(web.FS(), "app.js")
	if err != nil {
		t.Fatal(err)
	}
	js := string(src)
	for _, banned := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "new EventSource", "?token=", "&token="} {
		if strings.Contains(js, banned) {
			t.Errorf("app.js uses %q", banned)
		}
	}
}

// TestScriptIDsExist checks that every element the script looks up by id is
// in index.html, so a renamed id fails here instead of in a browser.
func TestScriptIDsExist(t *testing.T) {
	js, err := fs.ReadFile(web.FS(), "app.js")
	if err != nil {
		t.Fatal(err)
	}
	html, err := fs.ReadFile(web.FS(), "index.html")
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, e := range parseHTML(t, html) {
		if id := e.attrs["id"]; id != "" {
			if ids[id] {
				t.Errorf("id %q appears twice in index.html", id)
			}
			ids[id] = true
		}
	}
	refs := regexp.MustCompile(`\$\('([A-Za-z0-9_-]+)'\)`).FindAllStringSubmatch(string(js), -1)
	if len(refs) == 0 {
		t.Fatal("found no $('id') lookups in app.js")
	}
	for _, m := range refs {
		if !ids[m[1]] {
			t.Errorf("app.js looks up #%s, which index.html lacks", m[1])
		}
	}
}

func TestFileServerServesIndex(t *testing.T) {
	srv := httptest.NewServer(http.FileServerFS(web.FS()))
	defer srv.Close()
	tests := []struct {
		path string
		ct   string
	}{
		{"/", "text/html; charset=utf-8"},
		{"/app.js", "text/javascript; charset=utf-8"},
		{"/style.css", "text/css; charset=utf-8"},
		{"/icon.svg", "image/svg+xml"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			res, err := http.Get(srv.URL + tt.path)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Fatalf("GET %s: %d", tt.path, res.StatusCode)
			}
			if got := res.Header.Get("Content-Type"); got != tt.ct {
				t.Errorf("GET %s: Content-Type %q, want %q", tt.path, got, tt.ct)
			}
		})
	}
}

// TestPageSaysLoadingFirst: until its first data the page says Loading…
// and not that there is no team, which it cannot know yet.
func TestPageSaysLoadingFirst(t *testing.T) {
	b, err := fs.ReadFile(web.FS(), "index.html")
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	if want := `<h2 id="team-title" data-loading="true">Loading…</h2>`; !strings.Contains(page, want) {
		t.Errorf("index.html has no %s", want)
	}
	if want := `<p id="team-empty" class="empty" hidden>`; !strings.Contains(page, want) {
		t.Errorf("index.html shows the empty-team text before any data; want %s", want)
	}
}
