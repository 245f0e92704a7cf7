package providertest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"sync/atomic"

	"mailroom/internal/core"
)

// AnthropicRequest is a Messages API request body as the fake reads it.
type AnthropicRequest struct {
	Model     string             `json:"model"`
	MaxTokens int64              `json:"max_tokens"`
	System    json.RawMessage    `json:"system"`
	Messages  []AnthropicMessage `json:"messages"`
	Tools     []AnthropicTool    `json:"tools"`
}

// AnthropicMessage is one message; content is a string or a block list.
type AnthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// AnthropicBlock is one content block of a request.
type AnthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
}

// AnthropicTool is one tool definition.
type AnthropicTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// Anthropic decodes the request body.
func (r Request) Anthropic() (AnthropicRequest, error) {
	var out AnthropicRequest
	err := json.Unmarshal(r.Body, &out)
	return out, err
}

// SystemText is the system prompt, a string or the text of its blocks.
func (r AnthropicRequest) SystemText() string { return contentText(r.System) }

// Blocks returns the message's content as blocks; a string content is one
// text block.
func (m AnthropicMessage) Blocks() ([]AnthropicBlock, error) {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return []AnthropicBlock{{Type: "text", Text: s}}, nil
	}
	var out []AnthropicBlock
	err := json.Unmarshal(m.Content, &out)
	return out, err
}

// ResultText is a tool_result's content as text.
func (b AnthropicBlock) ResultText() string { return contentText(b.Content) }

// contentText reads a content that is a string or a list of text blocks.
func contentText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &blocks)
	out := ""
	for _, b := range blocks {
		out += b.Text
	}
	return out
}

// toolUseID is the pattern the Messages API requires of tool_use ids.
var toolUseID = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// checkAnthropic returns why the real Messages API would refuse req, or "".
func checkAnthropic(req Request) string {
	r, err := req.Anthropic()
	if err != nil {
		return "the body is not a Messages API request: " + err.Error()
	}
	if r.Model == "" {
		return "model: field required"
	}
	if r.MaxTokens < 1 {
		return "max_tokens: field required, at least 1"
	}
	if len(r.Messages) == 0 {
		return "messages: at least one message is required"
	}
	names := map[string]bool{}
	for _, t := range r.Tools {
		if !toolName.MatchString(t.Name) {
			return fmt.Sprintf("tools: name %q does not match %s", t.Name, toolName)
		}
		if names[t.Name] {
			return fmt.Sprintf("tools: tool names must be unique: %q", t.Name)
		}
		names[t.Name] = true
		if err := compileSchema(t.InputSchema); err != nil {
			return fmt.Sprintf("tools.%s.input_schema: %v", t.Name, err)
		}
	}
	seen := map[string]bool{}
	var pending []string // tool_use ids of the previous assistant message
	for i, m := range r.Messages {
		want := "user"
		if i%2 == 1 {
			want = "assistant"
		}
		if m.Role != want {
			return fmt.Sprintf("messages.%d: roles must alternate, starting with user; got %q", i, m.Role)
		}
		blocks, err := m.Blocks()
		if err != nil {
			return fmt.Sprintf("messages.%d.content: %v", i, err)
		}
		if len(blocks) == 0 {
			return fmt.Sprintf("messages.%d: content must not be empty", i)
		}
		answered := map[string]bool{}
		resultsDone := false
		var uses []string
		for j, b := range blocks {
			switch b.Type {
			case "text":
				if blank(b.Text) {
					return fmt.Sprintf("messages.%d.content.%d: text content blocks must contain non-whitespace text", i, j)
				}
				resultsDone = true
			case "tool_use":
				if m.Role != "assistant" {
					return fmt.Sprintf("messages.%d.content.%d: tool_use belongs to an assistant message", i, j)
				}
				if !toolUseID.MatchString(b.ID) || seen[b.ID] {
					return fmt.Sprintf("messages.%d.content.%d: tool_use id %q must be unique and match %s", i, j, b.ID, toolUseID)
				}
				var obj map[string]any
				if json.Unmarshal(b.Input, &obj) != nil || obj == nil {
					return fmt.Sprintf("messages.%d.content.%d: tool_use input must be an object", i, j)
				}
				seen[b.ID] = true
				uses = append(uses, b.ID)
			case "tool_result":
				if m.Role != "user" {
					return fmt.Sprintf("messages.%d.content.%d: tool_result belongs to a user message", i, j)
				}
				if resultsDone {
					return fmt.Sprintf("messages.%d.content.%d: tool_result blocks must come first in the user message", i, j)
				}
				if !contains(pending, b.ToolUseID) || answered[b.ToolUseID] {
					return fmt.Sprintf("messages.%d.content.%d: unexpected tool_use_id %q: each tool_result must answer one tool_use block of the previous message", i, j, b.ToolUseID)
				}
				answered[b.ToolUseID] = true
			default:
				return fmt.Sprintf("messages.%d.content.%d: unexpected block type %q", i, j, b.Type)
			}
		}
		for _, id := range pending {
			if !answered[id] {
				return fmt.Sprintf("messages.%d: tool_use ids were found without tool_result blocks immediately after: %s", i, id)
			}
		}
		pending = uses
	}
	if len(pending) > 0 {
		return fmt.Sprintf("the last message asks for tools (%s) and no tool_result follows", pending[0])
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

var messageSeq atomic.Int64

// AnthropicUsage is the token count a canned answer reports.
type AnthropicUsage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

// AnthropicReply is a 200 Messages API answer with blocks (text and
// tool_use, as core.Block), the stop reason and the usage.
func AnthropicReply(stop string, usage AnthropicUsage, blocks ...core.Block) Reply {
	content := make([]map[string]any, 0, len(blocks))
	for _, b := range blocks {
		switch b.Type {
		case "tool_use":
			input := b.Input
			if len(input) == 0 {
				input = json.RawMessage(`{}`)
			}
			content = append(content, map[string]any{"type": "tool_use", "id": b.ID, "name": b.Name, "input": input})
		default:
			content = append(content, map[string]any{"type": "text", "text": b.Text})
		}
	}
	return Reply{Body: mustJSON(map[string]any{
		"id":            fmt.Sprintf("msg_fake%d", messageSeq.Add(1)),
		"type":          "message",
		"role":          "assistant",
		"model":         "fake",
		"content":       content,
		"stop_reason":   stop,
		"stop_sequence": nil,
		"usage":         usage,
	})}
}

// AnthropicText is an end_turn answer with one text block.
func AnthropicText(text string, usage AnthropicUsage) Reply {
	return AnthropicReply("end_turn", usage, core.Block{Type: "text", Text: text})
}

// AnthropicToolUse is a tool_use answer calling one tool; input is encoded
// as JSON.
func AnthropicToolUse(id, name string, input any, usage AnthropicUsage) Reply {
	return AnthropicReply("tool_use", usage, core.Block{Type: "tool_use", ID: id, Name: name, Input: mustJSON(input)})
}

// AnthropicError is an error answer in the Messages API's shape, e.g.
// 529 overloaded_error or 400 invalid_request_error.
func AnthropicError(status int, typ, message string) Reply {
	if status == 0 {
		status = http.StatusInternalServerError
	}
	return Reply{Status: status, Body: mustJSON(map[string]any{
		"type":       "error",
		"error":      map[string]string{"type": typ, "message": message},
		"request_id": fmt.Sprintf("req_fake%d", messageSeq.Add(1)),
	})}
}
