package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"mailroom/internal/core"
)

// Anthropic asks a model through the Messages API with the official SDK.
// The SDK retries transient failures (429, 5xx, 529 overloaded, a dropped
// connection, an attempt's timeout) and honours retry-after; Anthropic
// adds no retry of its own. A retry repeats only the model request: the
// loop runs tools after Respond has returned.
type Anthropic struct {
	cfg    ModelConfig
	key    string
	client anthropic.Client
	opts   ProviderOptions
}

// NewAnthropic returns the adapter for c. key is sent as x-api-key and
// nowhere else; baseURL "" is the provider's own. The SDK reads nothing
// from the environment: NewModel has done that.
func NewAnthropic(c ModelConfig, key, baseURL string, o ProviderOptions) *Anthropic {
	ro := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		// The Messages API authenticates with x-api-key; the header is set
		// directly so that exactly this one credential header is sent.
		option.WithHeader("x-api-key", key),
		option.WithMaxRetries(o.retries()),
		option.WithRequestTimeout(o.timeout()),
	}
	if baseURL != "" {
		ro = append(ro, option.WithBaseURL(baseURL))
	}
	// Every answer's body is cut at MaxAnswerBytes (untrusted.go).
	ro = append(ro, option.WithHTTPClient(limitedClient(o.HTTPClient)))
	return &Anthropic{cfg: c, key: key, client: anthropic.NewClient(ro...), opts: o}
}

// ModelConfig implements Described.
func (a *Anthropic) ModelConfig() ModelConfig { return a.cfg }

// Respond sends req as one Messages API request and maps the answer back.
func (a *Anthropic) Respond(ctx context.Context, req Request) (Response, error) {
	params := anthropic.MessageNewParams{
		Model:     anthropic.Model(a.cfg.Name),
		MaxTokens: a.cfg.maxTokens(),
		Messages:  anthropicMessages(req.Messages),
		Tools:     anthropicTools(req.Tools),
	}
	if strings.TrimSpace(req.System) != "" {
		params.System = []anthropic.TextBlockParam{{Text: req.System}}
	}
	log := a.opts.log()
	count := &attempts{provider: ProviderAnthropic, log: log}
	start := time.Now()
	msg, err := a.client.Messages.New(ctx, params, option.WithMiddleware(count.observe))
	if err != nil {
		perr := a.failure(ctx, err, count.retries())
		log.WarnContext(ctx, "model request failed", "provider", ProviderAnthropic, "model", a.cfg.Name, "member", req.Member,
			"status", perr.Status, "type", perr.Type, "retries", perr.Retries, "duration_ms", time.Since(start).Milliseconds())
		return Response{}, perr
	}
	if msg == nil { // a JSON null decodes as no message at all
		perr := &ProviderError{Provider: ProviderAnthropic, Type: "invalid_response", Message: "the answer holds no message", Retries: count.retries()}
		log.WarnContext(ctx, "model request failed", "provider", ProviderAnthropic, "model", a.cfg.Name, "member", req.Member, "type", perr.Type)
		return Response{}, perr
	}
	if perr := checkUsage(ProviderAnthropic, count.retries(),
		usageCount{"input_tokens", msg.Usage.JSON.InputTokens.Raw()}, usageCount{"output_tokens", msg.Usage.JSON.OutputTokens.Raw()}); perr != nil {
		log.WarnContext(ctx, "model request failed", "provider", ProviderAnthropic, "model", a.cfg.Name, "member", req.Member, "type", perr.Type, "err", perr.Message)
		return Response{}, perr
	}
	resp := Response{
		Content:      anthropicContent(msg.Content),
		StopReason:   string(msg.StopReason),
		Usage:        Usage{InputTokens: msg.Usage.InputTokens, OutputTokens: msg.Usage.OutputTokens},
		UsageMissing: usageMissing(usageCount{"input_tokens", msg.Usage.JSON.InputTokens.Raw()}, usageCount{"output_tokens", msg.Usage.JSON.OutputTokens.Raw()}),
		Retries:      count.retries(),
	}
	if resp.StopReason == "" {
		resp.StopReason = StopEndTurn
	}
	log.DebugContext(ctx, "model request", "provider", ProviderAnthropic, "model", a.cfg.Name, "member", req.Member,
		"stop_reason", resp.StopReason, "input_tokens", resp.Usage.InputTokens, "output_tokens", resp.Usage.OutputTokens,
		"retries", resp.Retries, "duration_ms", time.Since(start).Milliseconds())
	return resp, nil
}

// failure maps an SDK error to a ProviderError. The SDK's own error text
// holds the URL and the raw answer; only the status, the error type and
// the scrubbed message are kept.
func (a *Anthropic) failure(ctx context.Context, err error, retries int) *ProviderError {
	if perr := tooLarge(ProviderAnthropic, err, retries); perr != nil {
		return perr
	}
	var apiErr *anthropic.Error
	if errors.As(err, &apiErr) {
		typ := string(apiErr.Type())
		if typ == "" {
			typ = "api_error"
		}
		return &ProviderError{Provider: ProviderAnthropic, Status: apiErr.StatusCode, Type: typ, Message: scrub(apiErr.Message, a.key), Retries: retries}
	}
	return transportError(ctx, ProviderAnthropic, a.key, err, retries)
}

// anthropicMessages maps the conversation to Messages API messages. Entries
// of the same role in a row (a tool result followed by attached mail) are
// merged into one message, because the API expects user and assistant to
// alternate; block order is kept, so tool_result blocks stay first in the
// user message that answers a tool_use. Empty text, which the API
// refuses, is left out, and so is a message left with no content.
func anthropicMessages(entries []core.Entry) []anthropic.MessageParam {
	var out []anthropic.MessageParam
	role := ""
	var blocks []anthropic.ContentBlockParamUnion
	flush := func() {
		if len(blocks) == 0 {
			return
		}
		if role == "assistant" {
			out = append(out, anthropic.NewAssistantMessage(blocks...))
		} else {
			out = append(out, anthropic.NewUserMessage(blocks...))
		}
		blocks = nil
	}
	for _, e := range entries {
		r := "user"
		if e.Role == "assistant" {
			r = "assistant"
		}
		bs := anthropicBlocks(e)
		if len(bs) == 0 {
			continue
		}
		if r != role {
			flush()
			role = r
		}
		blocks = append(blocks, bs...)
	}
	flush()
	return out
}

func anthropicBlocks(e core.Entry) []anthropic.ContentBlockParamUnion {
	if e.Blocks == nil {
		if strings.TrimSpace(e.Text) == "" {
			return nil
		}
		return []anthropic.ContentBlockParamUnion{anthropic.NewTextBlock(e.Text)}
	}
	var out []anthropic.ContentBlockParamUnion
	for _, b := range e.Blocks {
		switch b.Type {
		case "text":
			if strings.TrimSpace(b.Text) != "" {
				out = append(out, anthropic.NewTextBlock(b.Text))
			}
		case "tool_use":
			out = append(out, anthropic.NewToolUseBlock(b.ID, objectInput(b.Input), b.Name))
		case "tool_result":
			tr := anthropic.ToolResultBlockParam{ToolUseID: b.ToolUseID}
			if b.Content != "" {
				tr.Content = []anthropic.ToolResultBlockParamContentUnion{{OfText: &anthropic.TextBlockParam{Text: b.Content}}}
			}
			if b.IsError {
				tr.IsError = anthropic.Bool(true)
			}
			out = append(out, anthropic.ContentBlockParamUnion{OfToolResult: &tr})
		}
	}
	return out
}

// anthropicTools maps tool specs to Messages API tools; the JSON schema is
// sent as written: its properties and required list in their fields, any
// other keyword (additionalProperties, $defs...) alongside.
func anthropicTools(specs []ToolSpec) []anthropic.ToolUnionParam {
	out := make([]anthropic.ToolUnionParam, 0, len(specs))
	for _, s := range specs {
		schema := map[string]any{}
		_ = json.Unmarshal(s.InputSchema, &schema) // a tool's schema is ours and valid; a bad one is sent empty
		in := anthropic.ToolInputSchemaParam{Properties: schema["properties"]}
		if req, ok := schema["required"].([]any); ok {
			for _, r := range req {
				if name, ok := r.(string); ok {
					in.Required = append(in.Required, name)
				}
			}
		}
		delete(schema, "properties")
		delete(schema, "required")
		delete(schema, "type")
		if len(schema) > 0 {
			in.ExtraFields = schema
		}
		tool := anthropic.ToolParam{Name: s.Name, InputSchema: in}
		if s.Description != "" {
			tool.Description = anthropic.String(s.Description)
		}
		out = append(out, anthropic.ToolUnionParam{OfTool: &tool})
	}
	return out
}

// anthropicContent maps the answer's text and tool_use blocks to
// core.Block, keeping the model's tool-use ids (the loop replaces them
// with its own before anything runs). Other block kinds (thinking, server
// tools) are not part of a Mailroom turn and are dropped.
func anthropicContent(blocks []anthropic.ContentBlockUnion) []core.Block {
	out := make([]core.Block, 0, len(blocks))
	for _, b := range blocks {
		switch b.Type {
		case "text":
			out = append(out, core.Block{Type: "text", Text: b.Text})
		case "tool_use":
			out = append(out, core.Block{Type: "tool_use", ID: b.ID, Name: b.Name, Input: modelInput(b.Input)})
		}
	}
	return out
}

// modelInput is the tool input a model wrote, made safe to hold: an
// absent input is an empty object; text that is not JSON is kept as a
// JSON string, which no tool accepts, so the loop answers the model with
// an error tool result instead of failing the turn, and the history can
// still be encoded.
func modelInput(raw []byte) json.RawMessage {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return json.RawMessage(`{}`)
	}
	if json.Valid(trimmed) {
		return append(json.RawMessage(nil), trimmed...)
	}
	quoted, _ := json.Marshal(strings.ToValidUTF8(string(trimmed), "\uFFFD"))
	return quoted
}

// objectInput is a history's tool input as the APIs require it, a JSON
// object. The loop replaces a refused input with a note object, so any
// other value here is unexpected and is sent as an empty object rather
// than as a request the provider would refuse.
func objectInput(raw json.RawMessage) json.RawMessage {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || trimmed[0] != '{' || !json.Valid(trimmed) {
		return json.RawMessage(`{}`)
	}
	return trimmed
}
