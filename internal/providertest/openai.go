package providertest

import (
	"encoding/json"
	"fmt"
	"net/http"

	"mailroom/internal/core"
)

// OpenAIRequest is a Chat Completions request body as the fake reads it.
type OpenAIRequest struct {
	Model               string          `json:"model"`
	MaxTokens           *int64          `json:"max_tokens"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens"`
	Messages            []OpenAIMessage `json:"messages"`
	Tools               []OpenAITool    `json:"tools"`
}

// OpenAIMessage is one message of any role.
type OpenAIMessage struct {
	Role       string           `json:"role"`
	Content    json.RawMessage  `json:"content"`
	ToolCalls  []OpenAIToolCall `json:"tool_calls"`
	ToolCallID string           `json:"tool_call_id"`
}

// OpenAIToolCall is a function call of an assistant message.
type OpenAIToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// OpenAITool is one function tool definition.
type OpenAITool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// OpenAI decodes the request body.
func (r Request) OpenAI() (OpenAIRequest, error) {
	var out OpenAIRequest
	err := json.Unmarshal(r.Body, &out)
	return out, err
}

// Text is the message's content as text: a string or its text parts.
func (m OpenAIMessage) Text() string {
	if len(m.Content) == 0 || string(m.Content) == "null" {
		return ""
	}
	return contentText(m.Content)
}

// checkOpenAI returns why a Chat Completions server would refuse req, or "".
func checkOpenAI(req Request) string {
	r, err := req.OpenAI()
	if err != nil {
		return "the body is not a Chat Completions request: " + err.Error()
	}
	if r.Model == "" {
		return "model: field required"
	}
	if r.MaxTokens == nil && r.MaxCompletionTokens == nil {
		return "neither max_tokens nor max_completion_tokens is set"
	}
	if (r.MaxTokens != nil && *r.MaxTokens < 1) || (r.MaxCompletionTokens != nil && *r.MaxCompletionTokens < 1) {
		return "max_tokens must be at least 1"
	}
	if len(r.Messages) == 0 {
		return "messages: at least one message is required"
	}
	names := map[string]bool{}
	for _, t := range r.Tools {
		if t.Type != "function" {
			return fmt.Sprintf("tools: type %q, want function", t.Type)
		}
		if !toolName.MatchString(t.Function.Name) || names[t.Function.Name] {
			return fmt.Sprintf("tools: function name %q must be unique and match %s", t.Function.Name, toolName)
		}
		names[t.Function.Name] = true
		if err := compileSchema(t.Function.Parameters); err != nil {
			return fmt.Sprintf("tools.%s.parameters: %v", t.Function.Name, err)
		}
	}
	seen := map[string]bool{}
	var pending []string // calls of the last assistant message not yet answered
	for i, m := range r.Messages {
		if m.Role != "tool" && len(pending) > 0 {
			return fmt.Sprintf("messages.%d: an assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'; %s has none", i, pending[0])
		}
		switch m.Role {
		case "system", "developer":
			if i != 0 {
				return fmt.Sprintf("messages.%d: the system message comes first", i)
			}
			if blank(m.Text()) {
				return fmt.Sprintf("messages.%d: empty system message", i)
			}
		case "user":
			if blank(m.Text()) {
				return fmt.Sprintf("messages.%d: empty user message", i)
			}
		case "assistant":
			if blank(m.Text()) && len(m.ToolCalls) == 0 {
				return fmt.Sprintf("messages.%d: an assistant message needs content or tool_calls", i)
			}
			for j, c := range m.ToolCalls {
				if c.ID == "" || seen[c.ID] {
					return fmt.Sprintf("messages.%d.tool_calls.%d: id %q must be set and unique", i, j, c.ID)
				}
				if c.Type != "function" || c.Function.Name == "" {
					return fmt.Sprintf("messages.%d.tool_calls.%d: a function call needs type function and a name", i, j)
				}
				if !json.Valid([]byte(c.Function.Arguments)) {
					return fmt.Sprintf("messages.%d.tool_calls.%d: arguments are not JSON", i, j)
				}
				seen[c.ID] = true
				pending = append(pending, c.ID)
			}
		case "tool":
			k := -1
			for n, id := range pending {
				if id == m.ToolCallID {
					k = n
				}
			}
			if k < 0 {
				return fmt.Sprintf("messages.%d: messages with role 'tool' must be a response to a preceding message with 'tool_calls' (tool_call_id %q)", i, m.ToolCallID)
			}
			pending = append(pending[:k], pending[k+1:]...)
		default:
			return fmt.Sprintf("messages.%d: unknown role %q", i, m.Role)
		}
	}
	if len(pending) > 0 {
		return fmt.Sprintf("the last assistant message's call %s has no tool message", pending[0])
	}
	return ""
}

// OpenAIUsage is the token count a canned answer reports.
type OpenAIUsage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
}

// OpenAIReply is a 200 Chat Completions answer: the text blocks become the
// content, the tool_use blocks function tool calls whose arguments are the
// input as written (so a test can send arguments that are not JSON by
// giving Input bytes that are not JSON; see OpenAIRawCall).
func OpenAIReply(finish string, usage OpenAIUsage, blocks ...core.Block) Reply {
	msg := map[string]any{"role": "assistant", "content": nil}
	text := ""
	var calls []map[string]any
	for _, b := range blocks {
		switch b.Type {
		case "tool_use":
			args := string(b.Input)
			if args == "" {
				args = "{}"
			}
			calls = append(calls, map[string]any{"id": b.ID, "type": "function", "function": map[string]string{"name": b.Name, "arguments": args}})
		default:
			text += b.Text
		}
	}
	if text != "" {
		msg["content"] = text
	}
	if len(calls) > 0 {
		msg["tool_calls"] = calls
	}
	return Reply{Body: mustJSON(map[string]any{
		"id":      fmt.Sprintf("chatcmpl-fake%d", messageSeq.Add(1)),
		"object":  "chat.completion",
		"created": 1700000000,
		"model":   "fake",
		"choices": []map[string]any{{"index": 0, "message": msg, "finish_reason": finish, "logprobs": nil}},
		"usage":   map[string]int64{"prompt_tokens": usage.PromptTokens, "completion_tokens": usage.CompletionTokens, "total_tokens": usage.PromptTokens + usage.CompletionTokens},
	})}
}

// OpenAIText is a "stop" answer with text content.
func OpenAIText(text string, usage OpenAIUsage) Reply {
	return OpenAIReply("stop", usage, core.Block{Type: "text", Text: text})
}

// OpenAIToolCallReply is a "tool_calls" answer calling one function; input is
// encoded as JSON.
func OpenAIToolCallReply(id, name string, input any, usage OpenAIUsage) Reply {
	return OpenAIReply("tool_calls", usage, core.Block{Type: "tool_use", ID: id, Name: name, Input: mustJSON(input)})
}

// OpenAIRawCall is a "tool_calls" answer whose arguments are exactly
// arguments, valid JSON or not, as a model may write them.
func OpenAIRawCall(id, name, arguments string, usage OpenAIUsage) Reply {
	return OpenAIReply("tool_calls", usage, core.Block{Type: "tool_use", ID: id, Name: name, Input: json.RawMessage(arguments)})
}

// OpenAIError is an error answer in OpenAI's shape, e.g. 429
// rate_limit_exceeded or 400 invalid_request_error.
func OpenAIError(status int, typ, message string) Reply {
	if status == 0 {
		status = http.StatusInternalServerError
	}
	return Reply{Status: status, Body: mustJSON(map[string]any{
		"error": map[string]any{"message": message, "type": typ, "param": nil, "code": nil},
	})}
}
