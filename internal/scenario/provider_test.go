package scenario

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"mailroom/internal/agent"
	"mailroom/internal/core"
	"mailroom/internal/providertest"
)

// fakeKey is the credential the fake providers expect.
const fakeKey = "sk-scenario-test-7f3a9c"

// wireItem is one piece of a provider request, in order, whatever the
// wire format: a user text, an assistant text, a tool call or a tool
// result (named by the call it answers).
type wireItem struct {
	kind  string // "user", "assistant", "call" or "result"
	name  string
	text  string
	input json.RawMessage
}

// wireView is what the script player reads of a provider request: whose
// turn it is (from the system text) and the conversation.
type wireView struct {
	member string
	items  []wireItem
}

var memberOfSystem = regexp.MustCompile(`^You are ([a-z0-9-]+), a member of team`)

func memberOf(system string) string {
	if m := memberOfSystem.FindStringSubmatch(system); m != nil {
		return m[1]
	}
	return ""
}

// anthropicView reads a Messages API request.
func anthropicView(t *testing.T, req providertest.Request) wireView {
	r, err := req.Anthropic()
	if err != nil {
		t.Errorf("a request the fake cannot read: %v", err)
		return wireView{}
	}
	v := wireView{member: memberOf(r.SystemText())}
	names := map[string]string{}
	for _, m := range r.Messages {
		blocks, err := m.Blocks()
		if err != nil {
			t.Errorf("a message the fake cannot read: %v", err)
		}
		for _, b := range blocks {
			switch b.Type {
			case "text":
				kind := "user"
				if m.Role == "assistant" {
					kind = "assistant"
				}
				v.items = append(v.items, wireItem{kind: kind, text: b.Text})
			case "tool_use":
				names[b.ID] = b.Name
				v.items = append(v.items, wireItem{kind: "call", name: b.Name, input: b.Input})
			case "tool_result":
				v.items = append(v.items, wireItem{kind: "result", name: names[b.ToolUseID], text: b.ResultText()})
			}
		}
	}
	return v
}

// openaiView reads a Chat Completions request.
func openaiView(t *testing.T, req providertest.Request) wireView {
	r, err := req.OpenAI()
	if err != nil {
		t.Errorf("a request the fake cannot read: %v", err)
		return wireView{}
	}
	var v wireView
	names := map[string]string{}
	for _, m := range r.Messages {
		switch m.Role {
		case "system", "developer":
			v.member = memberOf(m.Text())
		case "user":
			v.items = append(v.items, wireItem{kind: "user", text: m.Text()})
		case "assistant":
			if m.Text() != "" {
				v.items = append(v.items, wireItem{kind: "assistant", text: m.Text()})
			}
			for _, c := range m.ToolCalls {
				names[c.ID] = c.Function.Name
				v.items = append(v.items, wireItem{kind: "call", name: c.Function.Name, input: json.RawMessage(c.Function.Arguments)})
			}
		case "tool":
			v.items = append(v.items, wireItem{kind: "result", name: names[m.ToolCallID], text: m.Text()})
		}
	}
	return v
}

// The lessons' prompts, as the runs write them: the player finds the
// current turn by its prompt.
var lessonPrompts = []string{
	"Inspect main.py and report to lead.",
	"Read expected.txt and tell reader the expected value.",
	"Write lead a supplementary report",
	"Summarise the reports you received.",
	"Plan the work",
	"Review the plan in your inbox.",
	"Lead has answered your plan.",
}

// thisTurn returns the prompt that opened the current turn and what the
// model has called and been answered since.
func (v wireView) thisTurn() (string, []wireItem) {
	for i := len(v.items) - 1; i >= 0; i-- {
		it := v.items[i]
		if it.kind != "user" {
			continue
		}
		for _, p := range lessonPrompts {
			if strings.HasPrefix(it.text, p) {
				return p, v.items[i+1:]
			}
		}
	}
	return "", nil
}

// result returns the text of the last result of tool in items.
func result(items []wireItem, tool string) (string, bool) {
	for i := len(items) - 1; i >= 0; i-- {
		if items[i].kind == "result" && items[i].name == tool {
			return items[i].text, true
		}
	}
	return "", false
}

// action is what the player answers: a tool call or a text.
type action struct {
	tool  string
	input any
	text  string
}

var requestIDInLetter = regexp.MustCompile(`request_id\\?"\s*:\s*\\?"(req-[0-9]+)`)

// playLesson answers a request the way the lessons' scripted steps do:
// the same tool calls in the same order, then a closing text. lead
// approves the plan when approve is set.
func playLesson(v wireView, approve bool) action {
	prompt, turn := v.thisTurn()
	_, read := result(turn, agent.ToolReadFile)
	_, sent := result(turn, agent.ToolSendMessage)
	switch prompt {
	case "Inspect main.py and report to lead.":
		switch {
		case !read:
			return action{tool: agent.ToolReadFile, input: map[string]string{"path": "main.py"}}
		case !sent:
			src, _ := result(turn, agent.ToolReadFile)
			return action{tool: agent.ToolSendMessage, input: map[string]string{"to": core.LeadName, "body": "reader报告1：已读取main.py，输出语句为" + printLine(src) + "。未运行。"}}
		}
		return action{text: "Source read and reported to lead; main.py was not run."}
	case "Read expected.txt and tell reader the expected value.":
		switch {
		case !read:
			return action{tool: agent.ToolReadFile, input: map[string]string{"path": "expected.txt"}}
		case !sent:
			exp, _ := result(turn, agent.ToolReadFile)
			return action{tool: agent.ToolSendMessage, input: map[string]string{"to": "reader", "body": "当前expected.txt记录为" + strings.TrimSpace(exp) + "；尚未运行。"}}
		}
		return action{text: "Expected value sent to reader."}
	case "Write lead a supplementary report":
		if !sent {
			return action{tool: agent.ToolSendMessage, input: map[string]string{"to": core.LeadName, "body": "reader报告2（补充）：结合上轮main.py源码记录与reviewer的说明。仍没有运行。"}}
		}
		return action{text: "Supplementary report sent to lead; main.py was not run."}
	case "Summarise the reports you received.":
		return action{text: "Summary: the source and the expected value were read, main.py was not run."}
	case "Plan the work":
		if _, ok := result(turn, agent.ToolSubmitPlan); !ok {
			return action{tool: agent.ToolSubmitPlan, input: map[string]string{"plan": planPayload}}
		}
		return action{text: "Plan submitted; waiting for lead's decision."}
	case "Review the plan in your inbox.":
		if res, ok := result(turn, agent.ToolReviewPlan); ok {
			return action{text: "Plan reviewed: " + res}
		}
		id := "unknown"
		for _, it := range v.items {
			if m := requestIDInLetter.FindStringSubmatch(it.text); it.kind == "user" && m != nil {
				id = m[1]
			}
		}
		return action{tool: agent.ToolReviewPlan, input: map[string]any{"request_id": id, "approve": approve, "feedback": planFeedback}}
	case "Lead has answered your plan.":
		ran, called := result(turn, agent.ToolRunMain)
		switch {
		case !read:
			return action{tool: agent.ToolReadFile, input: map[string]string{"path": "expected.txt"}}
		case !called:
			return action{tool: agent.ToolRunMain, input: map[string]any{}}
		}
		exp, _ := result(turn, agent.ToolReadFile)
		return action{text: fmt.Sprintf("main.py: %s; expected.txt: %s.", strings.TrimSpace(ran), strings.TrimSpace(exp))}
	}
	return action{text: "Nothing to do."}
}

// scriptFake is a fake provider that plays the lessons' script, and the
// model that talks to it.
type scriptFake struct {
	fake  *providertest.Server
	model agent.Model
}

// newScriptFake starts a fake of provider whose every reply is computed
// from its request by playLesson; n replies are queued, so a request
// beyond n is refused and fails the test.
func newScriptFake(t *testing.T, provider string, n int, approve bool) scriptFake {
	t.Helper()
	var seq atomic.Int64
	cfg := agent.ModelConfig{Provider: provider, Name: "fake-model", MaxTokens: 512}
	opts := agent.ProviderOptions{MaxRetries: -1}
	var f scriptFake
	var play func(providertest.Request) providertest.Reply
	switch provider {
	case agent.ProviderAnthropic:
		f.fake = providertest.NewAnthropic(t, fakeKey)
		play = func(req providertest.Request) providertest.Reply {
			a := playLesson(anthropicView(t, req), approve)
			usage := providertest.AnthropicUsage{InputTokens: 100, OutputTokens: 10}
			if a.tool == "" {
				return providertest.AnthropicText(a.text, usage)
			}
			return providertest.AnthropicToolUse(fmt.Sprintf("toolu_%d", seq.Add(1)), a.tool, a.input, usage)
		}
	case agent.ProviderOpenAI:
		f.fake = providertest.NewOpenAI(t, fakeKey)
		play = func(req providertest.Request) providertest.Reply {
			a := playLesson(openaiView(t, req), approve)
			usage := providertest.OpenAIUsage{PromptTokens: 100, CompletionTokens: 10}
			if a.tool == "" {
				return providertest.OpenAIText(a.text, usage)
			}
			return providertest.OpenAIToolCallReply(fmt.Sprintf("call_%d", seq.Add(1)), a.tool, a.input, usage)
		}
	}
	opts.HTTPClient = f.fake.Client()
	for range n {
		f.fake.Push(providertest.Reply{Func: play})
	}
	lookup := map[string]string{agent.EnvAnthropicKey: fakeKey, agent.EnvAnthropicBase: f.fake.URL(), agent.EnvOpenAIKey: fakeKey, agent.EnvOpenAIBase: f.fake.URL()}
	model, err := agent.NewModel(cfg, func(k string) (string, bool) { v, ok := lookup[k]; return v, ok }, opts)
	if err != nil {
		t.Fatalf("new model: %v", err)
	}
	f.model = model
	return f
}

// sameChecksHold fails unless every check of the scripted run scripted
// is in the model's run doc too, holding or not applicable, and every
// applicable check of doc held; notApplicable lists the checks expected
// to be reported as not applicable.
func sameChecksHold(t *testing.T, scripted, doc Result, notApplicable ...string) {
	t.Helper()
	if !scripted.OK {
		t.Fatalf("the scripted run is not ok: %s", mustJSON(t, scripted.Checks))
	}
	byName := map[string]Check{}
	for _, c := range doc.Checks {
		byName[c.Name] = c
		if c.Applies() && !c.OK {
			t.Errorf("check %s failed on the model's run: %s", c.Name, c.Detail)
		}
	}
	for _, c := range scripted.Checks {
		if _, ok := byName[c.Name]; !ok {
			t.Errorf("check %s of the scripted run is missing from the model's run", c.Name)
		}
	}
	want := map[string]bool{}
	for _, n := range notApplicable {
		want[n] = true
	}
	for _, c := range doc.Checks {
		if c.Applies() == want[c.Name] {
			t.Errorf("check %s: applicable %t, want %t (%s)", c.Name, c.Applies(), !want[c.Name], c.Detail)
		}
		if !c.Applies() && !strings.HasPrefix(c.Detail, "not applicable: ") {
			t.Errorf("check %s is not applicable without saying why: %q", c.Name, c.Detail)
		}
	}
	if !doc.OK {
		t.Errorf("ok = false on the model's run, want true")
	}
	if len(doc.Checks) != len(scripted.Checks) {
		t.Errorf("the model's run has %d checks, the scripted run %d", len(doc.Checks), len(scripted.Checks))
	}
}

func TestAgentTeamsThroughEachAdapter(t *testing.T) {
	for _, provider := range []string{agent.ProviderAnthropic, agent.ProviderOpenAI} {
		t.Run(provider, func(t *testing.T) {
			scriptedEnv := newEnv(t)
			scripted, err := scriptedEnv.runner.Run(t.Context(), AgentTeams, Options{})
			if err != nil {
				t.Fatal(err)
			}
			f := newScriptFake(t, provider, 9, true)
			e := newEnv(t)
			doc, err := e.runner.Run(t.Context(), AgentTeams, Options{Model: f.model})
			if err != nil {
				t.Fatal(err)
			}
			sameChecksHold(t, scripted, doc, "model_requests", "mailbox_counts", "reader_no_reread")
			if doc.Model == nil || doc.Model.Provider != provider || doc.Model.Name != "fake-model" {
				t.Errorf("model = %+v, want %s fake-model", doc.Model, provider)
			}
			// The fake played the script exactly: the script's totals.
			if got := len(f.fake.Requests()); doc.ModelRequests != 9 || got != 9 || f.fake.Pending() != 0 {
				t.Errorf("model_requests %d, the fake received %d with %d replies left; want 9, 9, 0", doc.ModelRequests, got, f.fake.Pending())
			}
			want := TeamsOutcome{LeadLetters: 2, ReaderLetters: 1, ReviewerLetters: 0, ReaderRereadSource: false, LeadSawReports: 2}
			if out, ok := doc.Outcome.(*TeamsOutcome); !ok || *out != want {
				t.Errorf("outcome = %s, want %+v", mustJSON(t, doc.Outcome), want)
			}
			if got, want := checkDetail(doc, "tool_use_ids"), "reader-t1-1, reader-t1-2, reviewer-t1-1, reviewer-t1-2, reader-t2-1"; !strings.Contains(got, want) {
				t.Errorf("tool_use_ids: %s, want the ids %s", got, want)
			}
			for _, p := range f.fake.Problems() {
				t.Errorf("the fake refused a request: %s", p)
			}
		})
	}
}

func TestTeamProtocolsThroughEachAdapter(t *testing.T) {
	str := func(s string) *string { return &s }
	boolp := func(b bool) *bool { return &b }
	paths := []struct {
		name      string
		scripted  Options
		decision  string
		expected  string
		approve   bool
		ran       bool
		refusedBy *string
		output    *string
		match     *bool
		counter   string
		planState string
	}{
		{name: "defaults", scripted: Options{}, approve: true, refusedBy: str("host"), planState: core.RequestApproved},
		{name: "reject, allow", scripted: Options{Plan: "reject", Decision: "allow"}, decision: "allow", refusedBy: str("plan"), planState: core.RequestRejected},
		{name: "approve, allow", scripted: Options{Plan: "approve", Decision: "allow"}, decision: "allow", approve: true, ran: true, output: str("42"), match: boolp(true), counter: "x", planState: core.RequestApproved},
		{name: "approve, allow, expected 43", scripted: Options{Decision: "allow", Expected: "43"}, decision: "allow", expected: "43", approve: true, ran: true, output: str("42"), match: boolp(false), counter: "x", planState: core.RequestApproved},
	}
	for _, provider := range []string{agent.ProviderAnthropic, agent.ProviderOpenAI} {
		for _, p := range paths {
			t.Run(provider+"/"+p.name, func(t *testing.T) {
				scriptedEnv := newEnv(t)
				scripted, err := scriptedEnv.runner.Run(t.Context(), TeamProtocols, p.scripted)
				if err != nil {
					t.Fatal(err)
				}
				f := newScriptFake(t, provider, 7, p.approve)
				e := newEnv(t)
				doc, err := e.runner.Run(t.Context(), TeamProtocols, Options{Decision: p.decision, Expected: p.expected, Model: f.model})
				if err != nil {
					t.Fatal(err)
				}
				sameChecksHold(t, scripted, doc, "model_requests")
				// The close proof's turn is the host's, not the model's: the
				// fake sees exactly the lesson team's 7 requests.
				if got := len(f.fake.Requests()); doc.ModelRequests != 7 || got != 7 || f.fake.Pending() != 0 {
					t.Errorf("model_requests %d, the fake received %d with %d replies left; want 7, 7, 0", doc.ModelRequests, got, f.fake.Pending())
				}
				out, ok := doc.Outcome.(*ProtocolOutcome)
				if !ok {
					t.Fatalf("outcome = %T", doc.Outcome)
				}
				expected := p.expected
				if expected == "" {
					expected = "42"
				}
				if out.Ran != p.ran || !eqPtr(out.RefusedBy, p.refusedBy) || !eqPtr(out.Output, p.output) || !eqPtr(out.Match, p.match) ||
					out.Counter != p.counter || out.Expected != expected {
					t.Errorf("outcome = %s", mustJSON(t, out))
				}
				// The script's exact letters, as the scripted run leaves them.
				for _, m := range []string{core.LeadName, "reader", "reviewer"} {
					if got, want := letterSummary(doc.Mailboxes[m]), letterSummary(scripted.Mailboxes[m]); got != want {
						t.Errorf("%s's mailbox = %q, want %q as in the scripted run", m, got, want)
					}
				}
				if len(doc.Requests) != 2 || doc.Requests[0].Status != p.planState || doc.Requests[1].Kind != core.KindShutdown || doc.Requests[1].Status != core.RequestApproved {
					t.Errorf("requests = %s", mustJSON(t, doc.Requests))
				}
				for _, pr := range f.fake.Problems() {
					t.Errorf("the fake refused a request: %s", pr)
				}
			})
		}
	}
}

// TestModelRunRefusesPlan: with a model, lead's model decides on the
// plan; asking for a decision is refused before anything is created.
func TestModelRunRefusesPlan(t *testing.T) {
	f := newScriptFake(t, agent.ProviderAnthropic, 0, true)
	e := newEnv(t)
	_, err := e.runner.Run(t.Context(), TeamProtocols, Options{Plan: PlanApprove, Model: f.model})
	if core.ErrorCode(err) != core.CodeValidation {
		t.Fatalf("err = %v, want validation_failed", err)
	}
	if teams := e.svc.Teams(t.Context()); len(teams) != 0 {
		t.Errorf("%d team(s) created, want none", len(teams))
	}
}

// TestOverloadedAfterSendMessage: the Messages API answers 529 to the
// request right after send_message ran. The SDK sends that request again
// and the turn goes on; the letter is stored once, because a retry
// repeats only the model request, never a tool.
func TestOverloadedAfterSendMessage(t *testing.T) {
	svc, _ := openService(t)
	if _, _, err := svc.CreateTeam(t.Context(), lessonTeam("overloaded")); err != nil {
		t.Fatal(err)
	}
	fake := providertest.NewAnthropic(t, fakeKey)
	usage := providertest.AnthropicUsage{InputTokens: 50, OutputTokens: 5}
	overloaded := providertest.AnthropicError(529, "overloaded_error", "Overloaded")
	overloaded.Header = map[string]string{"retry-after-ms": "1"}
	fake.Push(
		providertest.AnthropicToolUse("toolu_1", agent.ToolSendMessage, map[string]string{"to": core.LeadName, "body": "report"}, usage),
		overloaded,
		providertest.AnthropicText("Reported to lead.", usage),
	)
	model := agent.NewAnthropic(agent.ModelConfig{Provider: agent.ProviderAnthropic, Name: "fake-model"}, fakeKey, fake.URL(), agent.ProviderOptions{HTTPClient: fake.Client()})
	res, stats, err := agent.Run(t.Context(), svc, agent.Spec{Team: "overloaded", Member: "reader", Prompt: "Report to lead.", Model: model, Tools: agent.DefaultTools("reader")})
	if err != nil || res.Status != core.TurnAnswered {
		t.Fatalf("turn = %+v, %v; want answered", res, err)
	}
	box, err := svc.Inbox(t.Context(), "overloaded", core.LeadName)
	if err != nil {
		t.Fatal(err)
	}
	if len(box) != 1 || box[0].Body != "report" {
		t.Errorf("lead's inbox = %+v, want the one letter \"report\"", box)
	}
	reqs := fake.Requests()
	if len(reqs) != 3 || stats.ModelRequests != 2 || len(stats.Calls) != 1 {
		t.Fatalf("the fake received %d requests for %d model requests with %d tool calls; want 3, 2, 1", len(reqs), stats.ModelRequests, len(stats.Calls))
	}
	if string(reqs[1].Body) != string(reqs[2].Body) {
		t.Errorf("the retried request differs from the refused one:\n%s\n%s", reqs[1].Body, reqs[2].Body)
	}
	if pending := fake.Pending(); pending != 0 {
		t.Errorf("%d replies left, want 0", pending)
	}
}
