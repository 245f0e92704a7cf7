package agent

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"mailroom/internal/core"
)

// OpenAI asks a model through Chat Completions with tools, using the
// official SDK. The base URL is configurable, so OpenAI itself and the
// OpenAI-compatible servers people run locally (Ollama, vLLM, llama.cpp,
// LM Studio) all work. The SDK retries transient failures (429, 5xx, a
// dropped connection) and honours retry-after; an attempt that outlives
// the request timeout ends the request, as this SDK does not send it
// again. The adapter adds no retry of its own.
type OpenAI struct {
	cfg    ModelConfig
	key    string
	client openai.Client
	opts   ProviderOptions
	// completionTokens selects max_completion_tokens over max_tokens.
	// OpenAI's own API wants the former (its reasoning models refuse
	// max_tokens); local servers have long understood only the latter.
	completionTokens bool
}

// openAIDefaultBase is OpenAI's own API.
const openAIDefaultBase = "https://api.openai.com/v1/"

// NewOpenAI returns the adapter for c. key is sent as a bearer token and
// nowhere else; "" sends none, as a local server needs. baseURL "" is
// OpenAI's own API.
func NewOpenAI(c ModelConfig, key, baseURL string, o ProviderOptions) *OpenAI {
	ro := []option.RequestOption{
		option.WithAPIKey(key),
		option.WithMaxRetries(o.retries()),
		option.WithRequestTimeout(o.timeout()),
	}
	if baseURL != "" {
		ro = append(ro, option.WithBaseURL(baseURL))
	} else {
		// Explicit, so that nothing the SDK reads from the environment
		// points a request elsewhere.
		ro = append(ro, option.WithBaseURL(openAIDefaultBase))
	}
	// Every answer's body is cut at MaxAnswerBytes (untrusted.go).
	ro = append(ro, option.WithHTTPClient(limitedClient(o.HTTPClient)))
	return &OpenAI{cfg: c, key: key, client: openai.NewClient(ro...), opts: o, completionTokens: baseURL == ""}
}

// ModelConfig implements Described.
func (m *OpenAI) ModelConfig() ModelConfig { return m.cfg }

// Respond sends req as one Chat Completions request and maps the answer
// back to Messages API blocks and stop reasons.
func (m *OpenAI) Respond(ctx context.Context, req Request) (Response, error) {
	params := openai.ChatCompletionNewParams{
		Model:    shared.ChatModel(m.cfg.Name),
		Messages: openaiMessages(req.System, req.Messages),
		Tools:    openaiTools(req.Tools),
	}
	if m.completionTokens {
		params.MaxCompletionTokens = openai.Int(m.cfg.maxTokens())
	} else {
		params.MaxTokens = openai.Int(m.cfg.maxTokens())
	}
	log := m.opts.log()
	count := &attempts{provider: ProviderOpenAI, log: log}
	start := time.Now()
	completion, err := m.client.Chat.Completions.New(ctx, params, option.WithMiddleware(count.observe))
	if err != nil {
		perr := m.failure(ctx, err, count.retries())
		log.WarnContext(ctx, "model request failed", "provider", ProviderOpenAI, "model", m.cfg.Name, "member", req.Member,
			"status", perr.Status, "type", perr.Type, "retries", perr.Retries, "duration_ms", time.Since(start).Milliseconds())
		return Response{}, perr
	}
	if completion == nil || len(completion.Choices) == 0 { // a JSON null decodes as no completion at all
		perr := &ProviderError{Provider: ProviderOpenAI, Type: "invalid_response", Message: "the answer holds no choice", Retries: count.retries()}
		log.WarnContext(ctx, "model request failed", "provider", ProviderOpenAI, "model", m.cfg.Name, "member", req.Member, "type", perr.Type)
		return Response{}, perr
	}
	if perr := checkUsage(ProviderOpenAI, count.retries(),
		usageCount{"prompt_tokens", completion.Usage.JSON.PromptTokens.Raw()}, usageCount{"completion_tokens", completion.Usage.JSON.CompletionTokens.Raw()}); perr != nil {
		log.WarnContext(ctx, "model request failed", "provider", ProviderOpenAI, "model", m.cfg.Name, "member", req.Member, "type", perr.Type, "err", perr.Message)
		return Response{}, perr
	}
	choice := completion.Choices[0]
	resp := Response{
		Content:      openaiContent(choice.Message),
		StopReason:   openaiStopReason(choice.FinishReason),
		Usage:        Usage{InputTokens: completion.Usage.PromptTokens, OutputTokens: completion.Usage.CompletionTokens},
		UsageMissing: usageMissing(usageCount{"prompt_tokens", completion.Usage.JSON.PromptTokens.Raw()}, usageCount{"completion_tokens", completion.Usage.JSON.CompletionTokens.Raw()}),
		Retries:      count.retries(),
	}
	log.DebugContext(ctx, "model request", "provider", ProviderOpenAI, "model", m.cfg.Name, "member", req.Member,
		"stop_reason", resp.StopReason, "input_tokens", resp.Usage.InputTokens, "output_tokens", resp.Usage.OutputTokens,
		"retries", resp.Retries, "duration_ms", time.Since(start).Milliseconds())
	return resp, nil
}

// failure maps an SDK error to a ProviderError with the status, the
// provider's error type (or code, which some servers send instead) and
// the scrubbed message. OpenAI's message may echo part of a wrong key;
// scrub removes it.
func (m *OpenAI) failure(ctx context.Context, err error, retries int) *ProviderError {
	if perr := tooLarge(ProviderOpenAI, err, retries); perr != nil {
		return perr
	}
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		typ := apiErr.Type
		if typ == "" {
			typ = apiErr.Code
		}
		if typ == "" {
			typ = "api_error"
		}
		return &ProviderError{Provider: ProviderOpenAI, Status: apiErr.StatusCode, Type: scrub(typ, m.key), Message: scrub(apiErr.Message, m.key), Retries: retries}
	}
	return transportError(ctx, ProviderOpenAI, m.key, err, retries)
}

// openaiStopReason maps a finish_reason to the Messages API's stop reasons
// the loop knows; any other reason (content_filter...) is kept as written.
func openaiStopReason(finish string) string {
	switch finish {
	case "tool_calls", "function_call":
		return StopToolUse
	case "stop", "":
		return StopEndTurn
	case "length":
		return StopMaxTokens
	}
	return finish
}

// openaiMessages maps the conversation: the system text becomes a system
// message; an assistant entry's text and tool_use blocks become one
// assistant message with tool_calls; a user entry's tool_result blocks
// become tool messages, placed right after the assistant message that
// called them as the API requires, and its text a user message after
// them.
func openaiMessages(system string, entries []core.Entry) []openai.ChatCompletionMessageParamUnion {
	var out []openai.ChatCompletionMessageParamUnion
	if strings.TrimSpace(system) != "" {
		out = append(out, openai.SystemMessage(system))
	}
	for _, e := range entries {
		if e.Blocks == nil {
			if strings.TrimSpace(e.Text) == "" {
				continue
			}
			if e.Role == "assistant" {
				out = append(out, openai.AssistantMessage(e.Text))
			} else {
				out = append(out, openai.UserMessage(e.Text))
			}
			continue
		}
		var texts []string
		if e.Role == "assistant" {
			var calls []openai.ChatCompletionMessageToolCallUnionParam
			for _, b := range e.Blocks {
				switch b.Type {
				case "text":
					if strings.TrimSpace(b.Text) != "" {
						texts = append(texts, b.Text)
					}
				case "tool_use":
					calls = append(calls, openai.ChatCompletionMessageToolCallUnionParam{
						OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
							ID:       b.ID,
							Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: b.Name, Arguments: string(objectInput(b.Input))},
						},
					})
				}
			}
			if len(texts) == 0 && len(calls) == 0 {
				continue
			}
			msg := openai.ChatCompletionAssistantMessageParam{ToolCalls: calls}
			if len(texts) > 0 {
				msg.Content.OfString = openai.String(strings.Join(texts, "\n"))
			}
			out = append(out, openai.ChatCompletionMessageParamUnion{OfAssistant: &msg})
			continue
		}
		for _, b := range e.Blocks {
			switch b.Type {
			case "tool_result":
				content := b.Content
				if b.IsError {
					// Chat Completions has no error flag on a tool message;
					// the text says it instead.
					content = "Error: " + content
				}
				out = append(out, openai.ToolMessage(content, b.ToolUseID))
			case "text":
				if strings.TrimSpace(b.Text) != "" {
					texts = append(texts, b.Text)
				}
			}
		}
		if len(texts) > 0 {
			out = append(out, openai.UserMessage(strings.Join(texts, "\n")))
		}
	}
	return out
}

// openaiTools maps tool specs to function tools; the JSON schema is the
// function's parameters as written.
func openaiTools(specs []ToolSpec) []openai.ChatCompletionToolUnionParam {
	out := make([]openai.ChatCompletionToolUnionParam, 0, len(specs))
	for _, s := range specs {
		params := shared.FunctionParameters{}
		_ = json.Unmarshal(s.InputSchema, &params) // a tool's schema is ours and valid; a bad one is sent empty
		fn := shared.FunctionDefinitionParam{Name: s.Name, Parameters: params}
		if s.Description != "" {
			fn.Description = openai.String(s.Description)
		}
		out = append(out, openai.ChatCompletionFunctionTool(fn))
	}
	return out
}

// openaiContent maps the answer: its text to a text block, each function
// tool call to a tool_use block with the model's id. Arguments that are
// not valid JSON are passed through (see modelInput), so that the loop
// answers the model with an error tool result and the turn goes on.
func openaiContent(msg openai.ChatCompletionMessage) []core.Block {
	var out []core.Block
	if msg.Content != "" {
		out = append(out, core.Block{Type: "text", Text: msg.Content})
	} else if msg.Refusal != "" {
		out = append(out, core.Block{Type: "text", Text: msg.Refusal})
	}
	for _, call := range msg.ToolCalls {
		if call.Type != "" && call.Type != "function" {
			continue
		}
		out = append(out, core.Block{Type: "tool_use", ID: call.ID, Name: call.Function.Name, Input: modelInput([]byte(call.Function.Arguments))})
	}
	return out
}
