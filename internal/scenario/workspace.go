package scenario

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"mailroom/internal/core"
	"mailroom/internal/workspace"
)

// mainPy is the workspace's fixed program: it prints 42 and appends one x
// to counter.txt beside itself each time it runs, so a run can be seen.
const mainPy = `"""The run's fixed program: print the answer and count the run."""
from pathlib import Path

with open(Path(__file__).with_name("counter.txt"), "a", encoding="utf-8") as counter:
    counter.write("x")
print(42)
`

const counterFile = "counter.txt"

// writeWorkspace creates the run's workspace with main.py and
// expected.txt holding expected (and the workspaces root, mode 0700, when
// missing). The run's team was just created, so a directory already there
// is a leftover of an earlier team of that name and is replaced.
func writeWorkspace(dir, expected string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); errors.Is(err, fs.ErrExist) {
		if _, err := workspace.Remove(dir); err != nil {
			return err // a leftover not removed now is trash the next start removes
		}
		err = os.Mkdir(dir, 0o700)
		if err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, workspace.Program), []byte(mainPy), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "expected.txt"), []byte(expected+"\n"), 0o600)
}

// readCounter returns the counter file's content and whether it exists.
func readCounter(ws string) (string, bool, error) {
	b, err := os.ReadFile(filepath.Join(ws, counterFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return string(b), true, nil
}

// seenResult is a tool result as the model saw it, with the tool's name
// and input taken from the tool_use it answers.
type seenResult struct {
	id      string
	name    string
	input   json.RawMessage
	content string
	isError bool
}

// toolResults lists the tool results in msgs, in order.
func toolResults(msgs []core.Entry) []seenResult {
	uses := map[string]core.Block{}
	var out []seenResult
	for _, e := range msgs {
		for _, b := range e.Blocks {
			switch b.Type {
			case "tool_use":
				uses[b.ID] = b
			case "tool_result":
				u := uses[b.ToolUseID]
				out = append(out, seenResult{id: b.ToolUseID, name: u.Name, input: u.Input, content: b.Content, isError: b.IsError})
			}
		}
	}
	return out
}

// lastResult returns the last result of tool in msgs.
func lastResult(msgs []core.Entry, tool string) (seenResult, bool) {
	rs := toolResults(msgs)
	for i := len(rs) - 1; i >= 0; i-- {
		if rs[i].name == tool {
			return rs[i], true
		}
	}
	return seenResult{}, false
}

// readPath returns the path argument of a read_file input.
func readPath(input json.RawMessage) string {
	var in struct {
		Path string `json:"path"`
	}
	_ = json.Unmarshal(input, &in)
	return filepath.Clean(in.Path)
}

// teamMessages returns the letters attached to msgs as [team-message]
// entries, in order.
func teamMessages(msgs []core.Entry) []core.Message {
	var out []core.Message
	for _, e := range msgs {
		if e.Role != "user" || e.Blocks != nil {
			continue
		}
		rest, ok := strings.CutPrefix(e.Text, core.TeamMessagePrefix)
		if !ok {
			continue
		}
		var m core.Message
		if json.Unmarshal([]byte(rest), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// protocolData decodes a protocol letter's body; ok is false for an
// ordinary letter or unreadable protocol JSON.
func protocolData(body string) (map[string]any, bool) {
	rest, ok := strings.CutPrefix(body, core.ProtocolPrefix)
	if !ok {
		return nil, false
	}
	var data map[string]any
	if json.Unmarshal([]byte(rest), &data) != nil {
		return nil, false
	}
	return data, true
}

// containsText reports whether msgs hold a plain user entry equal to text.
func containsText(msgs []core.Entry, text string) bool {
	for _, e := range msgs {
		if e.Role == "user" && e.Blocks == nil && e.Text == text {
			return true
		}
	}
	return false
}
