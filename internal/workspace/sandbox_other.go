//go:build !linux

package workspace

import (
	"context"
	"errors"
)

// sandboxEnv is what probe found: elsewhere than on Linux, no sandbox.
type sandboxEnv struct {
	user          *Identity
	abi           int
	python        string
	netRestricted bool
	unavailable   string
}

// probe reports that the sandbox needs Linux (Landlock and namespaces).
func probe(Mode, Identity) sandboxEnv {
	return sandboxEnv{unavailable: "the sandbox needs Linux (Landlock and namespaces)"}
}

// run is not available here: with the sandbox off, programs are still
// only run on Linux, where a whole process group can be killed.
func (r *Runner) run(context.Context, string) (Outcome, error) {
	return Outcome{}, errors.New("workspace: running programs needs Linux")
}
