package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"mailroom/internal/core"
)

// Providers a team's model can name.
const (
	ProviderAnthropic = "anthropic"
	ProviderOpenAI    = "openai"
	ProviderScripted  = "scripted"
)

// Environment variables the provider adapters read. Credentials come only
// from here: they are never part of a team, a request or a stored file.
const (
	EnvAnthropicKey  = "ANTHROPIC_API_KEY"
	EnvAnthropicBase = "ANTHROPIC_BASE_URL"
	EnvOpenAIKey     = "OPENAI_API_KEY"
	EnvOpenAIBase    = "OPENAI_BASE_URL"
)

// Defaults of a real model request.
const (
	// DefaultMaxTokens bounds one answer when the team names no bound.
	DefaultMaxTokens = 1024
	// MaxMaxTokens is the largest bound a team may set; a larger answer
	// would not fit a non-streaming request's time.
	MaxMaxTokens = 64000
	// DefaultMaxRetries is how many times the provider's SDK sends a
	// request again after a transient failure (429, 5xx, 529, a dropped
	// connection or an attempt's timeout), honouring retry-after.
	DefaultMaxRetries = 2
	// DefaultRequestTimeout bounds one attempt of a model request. The
	// turn's context bounds all attempts together.
	DefaultRequestTimeout = 5 * time.Minute
)

// ModelConfig names a team's model: the provider, the provider's model
// name and the bound on one answer's tokens. It never holds a credential,
// so it may be stored and shown.
type ModelConfig struct {
	Provider  string `json:"provider"`
	Name      string `json:"name,omitempty"`
	MaxTokens int64  `json:"max_tokens,omitempty"`
}

// String is the PROVIDER:NAME form of the --model flag.
func (c ModelConfig) String() string {
	if c.Provider == ProviderScripted || c.Name == "" {
		return c.Provider
	}
	return c.Provider + ":" + c.Name
}

// ParseModel reads the PROVIDER:NAME form of the --model flag, e.g.
// "anthropic:claude-sonnet-4-5", "openai:gpt-4.1-mini" or "scripted".
// The name of a local server's model may itself hold colons
// ("openai:llama3.2:3b"); only the first colon separates the provider.
func ParseModel(s string) (ModelConfig, error) {
	provider, name, found := strings.Cut(strings.TrimSpace(s), ":")
	c := ModelConfig{Provider: provider, Name: name}
	if !found && provider != ProviderScripted && provider != ProviderAnthropic && provider != ProviderOpenAI && provider != "" {
		// A bare model name ("gpt-4") is the likeliest mistake: say
		// which provider it needs, in the form the flag takes.
		return c, core.Errorf(core.CodeValidation, "%q names no provider; a model is PROVIDER:NAME, as in %s:%s.",
			provider, guessProvider(provider), provider)
	}
	return c, c.Validate()
}

// guessProvider names the provider a bare model name most likely belongs
// to, for the suggestion in ParseModel's error: Anthropic's models are
// "claude-…"; anything else is served through the OpenAI-compatible API
// (OpenAI's own, or a local server's such as Ollama's).
func guessProvider(name string) string {
	if strings.HasPrefix(strings.ToLower(name), "claude") {
		return ProviderAnthropic
	}
	return ProviderOpenAI
}

// maxModelName bounds a model name; real names are far shorter.
const maxModelName = 200

// Validate checks c: a known provider, a name for a real one, and a token
// bound within 0..MaxMaxTokens (0 means DefaultMaxTokens). Errors are
// validation_failed domain errors.
func (c ModelConfig) Validate() error {
	switch c.Provider {
	case ProviderScripted:
		if c.Name != "" {
			return core.Errorf(core.CodeValidation, "The scripted model takes no name.")
		}
	case ProviderAnthropic, ProviderOpenAI:
		if c.Name == "" {
			return core.Errorf(core.CodeValidation, "A %s model needs a name, as in %s:MODEL.", c.Provider, c.Provider)
		}
		if len(c.Name) > maxModelName || !utf8.ValidString(c.Name) || strings.ContainsAny(c.Name, " \t\r\n") {
			return core.Errorf(core.CodeValidation, "The model name must be at most %d characters without spaces.", maxModelName)
		}
	default:
		return core.Errorf(core.CodeValidation, "The model provider must be one of %s, %s or %s.", ProviderAnthropic, ProviderOpenAI, ProviderScripted)
	}
	if c.MaxTokens < 0 || c.MaxTokens > MaxMaxTokens {
		return core.Errorf(core.CodeValidation, "max_tokens must be within 1..%d.", MaxMaxTokens)
	}
	return nil
}

// maxTokens is c's bound with the default applied.
func (c ModelConfig) maxTokens() int64 {
	if c.MaxTokens == 0 {
		return DefaultMaxTokens
	}
	return c.MaxTokens
}

// ProviderOptions tune the adapters; the zero value is the production
// setting. Tests shorten the timeout and pass their own HTTP client.
type ProviderOptions struct {
	// MaxRetries is handed to the SDK; 0 means DefaultMaxRetries and a
	// negative value turns retries off.
	MaxRetries int
	// RequestTimeout bounds one attempt; 0 means DefaultRequestTimeout.
	RequestTimeout time.Duration
	// HTTPClient, when set, sends the requests.
	HTTPClient *http.Client
	// Log receives one line per request and per retried attempt; nil is
	// slog.Default(). No line ever holds a credential or a prompt.
	Log *slog.Logger
}

func (o ProviderOptions) retries() int {
	switch {
	case o.MaxRetries < 0:
		return 0
	case o.MaxRetries == 0:
		return DefaultMaxRetries
	}
	return o.MaxRetries
}

func (o ProviderOptions) timeout() time.Duration {
	if o.RequestTimeout <= 0 {
		return DefaultRequestTimeout
	}
	return o.RequestTimeout
}

func (o ProviderOptions) log() *slog.Logger {
	if o.Log == nil {
		return slog.Default()
	}
	return o.Log
}

// Described is implemented by the provider adapters: the model they ask,
// for turn documents and metrics.
type Described interface {
	ModelConfig() ModelConfig
}

// NewModel builds the adapter for c with credentials and base URLs read
// through lookup (os.LookupEnv in the server, a map in tests). A provider
// without credentials is refused with model_unavailable, and so is the
// scripted model, which answers only with the responses a request brings.
//
// An OpenAI-compatible local server (Ollama, vLLM, llama.cpp, LM Studio)
// usually needs no key: with OPENAI_BASE_URL set, OPENAI_API_KEY may be
// absent and no Authorization header is sent.
func NewModel(c ModelConfig, lookup func(string) (string, bool), opts ProviderOptions) (Model, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	get := func(name string) string {
		if lookup == nil {
			return ""
		}
		v, _ := lookup(name)
		return strings.TrimSpace(v)
	}
	switch c.Provider {
	case ProviderAnthropic:
		key := get(EnvAnthropicKey)
		if key == "" {
			return nil, core.Errorf(core.CodeModelUnavailable, "The anthropic provider has no credentials on this server: %s is not set.", EnvAnthropicKey)
		}
		return NewAnthropic(c, key, get(EnvAnthropicBase), opts), nil
	case ProviderOpenAI:
		key, base := get(EnvOpenAIKey), get(EnvOpenAIBase)
		if key == "" && base == "" {
			return nil, core.Errorf(core.CodeModelUnavailable, "The openai provider has no credentials on this server: %s is not set (a local server needs only %s).", EnvOpenAIKey, EnvOpenAIBase)
		}
		return NewOpenAI(c, key, base, opts), nil
	default:
		return nil, core.Errorf(core.CodeModelUnavailable, "The scripted model answers only with the responses a turn request brings.")
	}
}

// CredentialedProviders names the providers whose credentials lookup
// finds (the rules of NewModel: anthropic needs its key, openai its key
// or a base URL), so the server can say at start which models can answer.
// It never returns a value it looked up.
func CredentialedProviders(lookup func(string) (string, bool)) []string {
	set := func(name string) bool {
		v, _ := lookup(name)
		return strings.TrimSpace(v) != ""
	}
	var out []string
	if set(EnvAnthropicKey) {
		out = append(out, ProviderAnthropic)
	}
	if set(EnvOpenAIKey) || set(EnvOpenAIBase) {
		out = append(out, ProviderOpenAI)
	}
	return out
}

// ProviderError is a model request that failed after the SDK's retries.
// Its text names the provider, the HTTP status and the provider's error
// type (invalid_request_error, overloaded_error, rate_limit_error...), so
// a failed turn says why; it never holds a credential, a header or the
// request body. errors.Is sees context.Canceled and
// context.DeadlineExceeded through it.
type ProviderError struct {
	// Provider is ProviderAnthropic or ProviderOpenAI.
	Provider string
	// Status is the HTTP status of the last answer, 0 when none came.
	Status int
	// Type is the provider's error type, or "timeout", "canceled" or
	// "connection_error" when no answer came.
	Type string
	// Message is the provider's explanation, shortened, with anything
	// shaped like a key removed.
	Message string
	// Retries is how many times the request was sent again.
	Retries int

	cause error
}

// Error implements error.
func (e *ProviderError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", e.Provider, e.Type)
	if e.Status != 0 {
		fmt.Fprintf(&b, " (HTTP %d)", e.Status)
	}
	if e.Retries > 0 {
		fmt.Fprintf(&b, " after %d retries", e.Retries)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	return b.String()
}

// Unwrap exposes a context error, so that a cancelled turn is told apart
// from a failed one.
func (e *ProviderError) Unwrap() error { return e.cause }

// maxErrorMessage bounds the provider's message kept in an error.
const maxErrorMessage = 300

// keyShaped matches strings that look like provider keys, which some
// providers echo partly masked in their messages ("Incorrect API key
// provided: sk-proj-****abcd").
var keyShaped = regexp.MustCompile(`\bsk-[A-Za-z0-9_*.\-]{3,}`)

// scrub makes text safe to keep: the key itself and anything shaped like
// a key are removed, control characters are dropped and the text is
// shortened.
func scrub(text, key string) string {
	if key != "" {
		text = strings.ReplaceAll(text, key, "[redacted]")
	}
	text = keyShaped.ReplaceAllString(text, "[redacted]")
	text = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(text, "?"))
	text = strings.TrimSpace(text)
	if len(text) > maxErrorMessage {
		cut := maxErrorMessage
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut] + "…"
	}
	return text
}

// transportError turns a failure without a provider answer into a
// ProviderError. ctx is the caller's context: its end means the turn was
// cancelled or ran out of time; a deadline of one attempt alone is the
// SDK's per-request timeout.
func transportError(ctx context.Context, provider, key string, err error, retries int) *ProviderError {
	pe := &ProviderError{Provider: provider, Retries: retries}
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(ctx.Err(), context.Canceled):
		pe.Type, pe.Message, pe.cause = "canceled", "the request was cancelled", context.Canceled
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		pe.Type, pe.Message, pe.cause = "timeout", "the provider did not answer in time", context.DeadlineExceeded
	default:
		pe.Type, pe.Message = "connection_error", scrub(err.Error(), key)
	}
	return pe
}

// attempts counts the HTTP attempts of one model request, as an SDK
// middleware sees them, so that a response can say how often the SDK
// retried. It also logs each retried attempt, without headers or bodies.
type attempts struct {
	n        int
	provider string
	log      *slog.Logger
}

func (a *attempts) observe(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	a.n++
	res, err := next(req)
	if res != nil && res.StatusCode >= 400 {
		a.log.DebugContext(req.Context(), "model request attempt failed", "provider", a.provider, "attempt", a.n, "status", res.StatusCode, "retry_after", res.Header.Get("Retry-After"))
	} else if err != nil {
		a.log.DebugContext(req.Context(), "model request attempt failed", "provider", a.provider, "attempt", a.n, "error_kind", attemptErrorKind(err))
	}
	return res, err
}

// retries is the number of attempts beyond the first.
func (a *attempts) retries() int { return max(0, a.n-1) }

func attemptErrorKind(err error) string {
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	return "connection_error"
}
