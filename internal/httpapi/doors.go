package httpapi

import (
	"net/http"

	"mailroom/internal/core"
)

// CodeBodyTooLarge is the code of a request body over MaxBodyBytes, for the
// other doors (the MCP endpoint) that bound bodies the same way.
const CodeBodyTooLarge = codeBodyTooLarge

// WriteProblem answers code and detail as a problem document, with the
// status the one table of problem.go gives code. The MCP endpoint's HTTP
// refusals use it, so every door answers errors alike.
func WriteProblem(w http.ResponseWriter, code core.Code, detail string) {
	writeProblem(w, newProblem(code, detail))
}
