// Package web holds Mailroom's live status page: a static, framework-free
// page (HTML, CSS and one script) that the server embeds and serves at "/".
//
// The page reads the REST API with the admin token taken from the URL
// fragment, follows the team's event stream and can start the scenarios.
// It renders every string from the API as text, never as markup, so it is
// served under a strict Content-Security-Policy without inline code.
package web

import (
	"embed"
	"io/fs"
)

// static is embedded as a directory so the router can serve it without
// knowing file names; dotfiles and _-prefixed files are left out on purpose.
//
//go:embed static
var static embed.FS

// FS returns the page's files (index.html, app.js, style.css, icon.svg) at
// its root, so URLs don't carry the "static/" prefix:
// http.FileServerFS(web.FS()) serves index.html for "/".
func FS() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		// fs.Sub fails only on an invalid path; "static" is a constant.
		panic(err)
	}
	return sub
}
