package core

import (
	"regexp"
	"slices"
	"strings"
)

// Skills and needs (docs/api.md, "Skills"): a member carries labels of
// what it can do, a task the labels it needs; a member may claim a task
// only when it has every label the task needs. The labels live in the
// member's state and in the task's document, which both stores already
// keep as JSON: data stored before them loads with empty lists.

// MaxLabels bounds the distinct labels of one member's skills or one
// task's needs.
const MaxLabels = 16

// labelPattern is what one label may be: short, lower case, so that
// "Go" and "go" are never two skills.
var labelPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// CheckLabels validates a list of skills or needs (what names the list
// in the error): every label matches labelPattern, and at most MaxLabels
// distinct ones. A repeated label is collapsed into its first place, so
// that ["go", "go"] is ["go"]: a client that adds a label it already
// sent is not refused. The result is never nil.
func CheckLabels(labels []string, what string) ([]string, error) {
	out := []string{}
	for _, l := range labels {
		if !labelPattern.MatchString(l) {
			return nil, Errorf(CodeValidation, "Each of the %s must be 1 to 32 characters of a-z, 0-9, _ and -, starting with a letter or digit.", what)
		}
		if !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	if len(out) > MaxLabels {
		return nil, Errorf(CodeValidation, "At most %d distinct %s.", MaxLabels, what)
	}
	return out, nil
}

// missingLabels returns the labels of needs that skills lacks, in the
// order of needs.
func missingLabels(needs, skills []string) []string {
	var out []string
	for _, n := range needs {
		if !slices.Contains(skills, n) {
			out = append(out, n)
		}
	}
	return out
}

// needsError is task_needs for the labels missing names. The labels are
// client input, but only ever of labelPattern's safe alphabet, as task
// ids in task_blocked are; the contract asks the detail to name them.
func needsError(missing []string) error {
	return Errorf(CodeTaskNeeds, "The task needs skills the member lacks: %s.", strings.Join(missing, ", "))
}
