package scenario

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"mailroom/internal/agent"
	"mailroom/internal/core"
)

// The lesson's texts (docs/spec.md §8), byte for byte: the plan ("Read the
// expected value, then run main.py."), lead's feedback ("Approves only this
// plan; permission is judged separately."), the shutdown request ("The work
// is done; please close at an idle boundary.") and its confirmation
// ("Confirming this shutdown at the idle boundary."). They travel inside
// protocol letters, so a mailbox written here is the lesson's mailbox.
const (
	planPayload      = "读取预期，再运行main.py。"
	planFeedback     = "仅批准本次计划，权限另行判断。"
	shutdownPayload  = "本次工作结束，请在空闲边界关闭。"
	shutdownFeedback = "空闲边界确认本次关闭。"
)

// The words of reader's verdict (docs/spec.md §8): the lesson's reader
// reports a mismatch as 不符 ("does not match"); 相符 is its opposite and
// 未运行 ("not run") says that nothing ran to compare.
const (
	verdictMatch    = "相符"
	verdictMismatch = "不符"
	verdictNotRun   = "未运行"
)

// teamProtocols runs lesson 16 (docs/spec.md §8 steps 1–13) on the run's team and
// then proves on a second, small team that a member closed while it still
// has turns left cannot take another turn (docs/spec.md §13.8).
func (x *run) teamProtocols(ctx context.Context) *ProtocolOutcome {
	opts := x.opts
	bg := context.WithoutCancel(ctx)
	out := &ProtocolOutcome{Expected: opts.Expected}

	// Steps 1–2: reader plans. Only submit_plan is offered in this phase.
	readerT1 := x.turn(ctx, "reader", "Plan the work (read the expected value, run main.py, compare) and submit the plan to lead.",
		agent.ToolSet{Names: []string{agent.ToolSubmitPlan}}, nil,
		agent.CallStep(agent.ToolSubmitPlan, map[string]string{"plan": planPayload}),
		agent.TextStep("Plan submitted; waiting for lead's decision."),
	)
	planID := ""
	if reqs, err := x.svc.Requests(bg, x.team); err == nil {
		for _, r := range reqs {
			if r.Kind == core.KindPlan && r.Sender == "reader" {
				planID = r.ID
			}
		}
	}

	// Steps 3–4: lead reviews the plan it was shown. Only review_plan.
	x.pause(ctx)
	approve := opts.Plan == PlanApprove
	leadT := x.turn(ctx, core.LeadName, "Review the plan in your inbox.",
		agent.ToolSet{Names: []string{agent.ToolReviewPlan}}, nil,
		agent.ComputedStep(func(req agent.Request) agent.Step {
			id := "unknown"
			for _, m := range teamMessages(req.Messages) {
				if data, ok := protocolData(m.Body); ok && data["type"] == "plan_request" {
					id, _ = data["request_id"].(string)
				}
			}
			return agent.CallStep(agent.ToolReviewPlan, map[string]any{"request_id": id, "approve": approve, "feedback": planFeedback})
		}),
		agent.ComputedStep(func(req agent.Request) agent.Step {
			res, _ := lastResult(req.Messages, agent.ToolReviewPlan)
			return agent.TextStep("Plan reviewed (" + opts.Plan + "): " + res.content + ". Running the program is the host's decision.")
		}),
	)

	// Step 5: the reply is saved, and the request is still pending.
	x.pause(ctx)
	afterReply, _ := x.svc.Request(bg, x.team, planID)

	// Steps 6–9: reader's prepare matches the reply; then it reads the
	// expected value, tries run_main through both gates and compares.
	x.pause(ctx)
	statusAtWork := ""
	readerT2 := x.turn(ctx, "reader", "Lead has answered your plan. Read expected.txt, run main.py if you may, and compare the output with the expected value.",
		agent.ToolSet{Names: []string{agent.ToolReadFile, agent.ToolRunMain}, Workspace: x.ws, Runner: x.programs, AllowRun: opts.Decision == DecisionAllow, PlanID: planID},
		func() {
			// Seen as the first request of the turn arrives, i.e. just
			// after the prepare step consumed the reply.
			if r, err := x.svc.Request(bg, x.team, planID); err == nil {
				statusAtWork = r.Status
			}
		},
		agent.CallStep(agent.ToolReadFile, map[string]string{"path": "expected.txt"}),
		agent.CallStep(agent.ToolRunMain, map[string]any{}),
		agent.ComputedStep(readerVerdict),
	)
	afterMatch, _ := x.svc.Request(bg, x.team, planID)

	// A stopped run takes no host step: the shutdown steps below would
	// change the team after the point the run was stopped at.
	if ctx.Err() != nil {
		return out
	}

	// Steps 10–12: lead asks reader to close; reader approves at its idle
	// boundary (its turn has ended); lead matches the reply.
	x.pause(ctx)
	shut, openErr := x.svc.OpenRequest(core.AsMember(bg, x.team, core.LeadName), core.OpenInput{Team: x.team, Target: "reader", Kind: core.KindShutdown, Payload: shutdownPayload})
	x.pause(ctx)
	ended := make(chan struct{})
	close(ended) // reader's last turn is over: this is an idle boundary
	attempts, shutErr := x.approveShutdownAtIdle(ctx, x.team, shut.RequestID, "reader", ended, nil)
	afterShutReply, _ := x.svc.Request(bg, x.team, shut.RequestID)
	readerAfter := x.memberView(bg, x.team, "reader")
	x.pause(ctx)
	_, consumeErr := x.svc.Consume(core.AsMember(bg, x.team, core.LeadName), x.team)
	afterShutMatch, _ := x.svc.Request(bg, x.team, shut.RequestID)

	// Step 13: reader cannot take another turn.
	x.pause(ctx)
	called := false
	_, againErr := x.svc.RunTurn(bg, x.team, "reader", func(context.Context, []core.Entry) (core.TurnOutcome, error) {
		called = true
		return core.TurnOutcome{}, fmt.Errorf("a closed member's turn must not start")
	})

	// The outcome, from what the tools actually did.
	var runCall *agent.ToolCall
	runs := 0
	for i, c := range readerT2.stats.Calls {
		if c.Name == agent.ToolRunMain && runCall == nil {
			runCall = &readerT2.stats.Calls[i]
		}
		if c.Name == agent.ToolRunMain && c.Ran {
			runs++
		}
	}
	if runCall != nil {
		out.Ran = runCall.Ran
		if runCall.Refused != "" {
			gate := runCall.Refused
			out.RefusedBy = &gate
		}
		if runCall.Ran && !runCall.IsError {
			output := strings.TrimSpace(runCall.Content)
			match := output == opts.Expected
			out.Output, out.Match = &output, &match
		}
	}
	counter, counterExists, counterErr := readCounter(x.ws)
	out.Counter = counter

	// Checks.
	ok, detail := x.answered(readerT1, leadT, readerT2)
	x.check("turn_outcomes", ok, "%s", detail)

	requests := fmt.Sprintf("%d model requests in team %s (reader turn 1: %d, lead: %d, reader turn 2: %d)",
		x.modelRequests, x.team, readerT1.stats.ModelRequests, leadT.stats.ModelRequests, readerT2.stats.ModelRequests)
	if x.scripted() {
		x.check("model_requests", x.modelRequests == 7, "%s; the lesson makes 7 on every path", requests)
		x.checkLetters(bg)
	} else {
		x.notApplicable("model_requests", "the lesson's 7 requests are the script's; a model asks as often as it needs: %s", requests)
		x.checkLettersOnModel(bg)
	}
	x.lettersValid(bg)

	// On a model's run lead's model chose; its reply says how.
	if !x.scripted() && afterReply.Reply != nil {
		approve = afterReply.Reply.Approve
	}
	chose := opts.Plan
	if !x.scripted() {
		chose = "to " + map[bool]string{true: PlanApprove, false: PlanReject}[approve]
	}
	// A plan request made and decided is the lesson's flow, whoever
	// drives it: a model that skipped either step fails both checks.
	switch {
	case !x.scripted() && planID == "":
		x.check("pending_between_reply_and_match", false, "reader's model submitted no plan, so there was no reply to match")
		x.check("plan_decision", false, "reader's model submitted no plan for lead to decide")
	case !x.scripted() && afterReply.Reply == nil:
		x.check("pending_between_reply_and_match", false, "lead's model did not answer plan %s, so there was no reply to match", planID)
		x.check("plan_decision", false, "lead's model did not decide plan %s; it is %q", planID, afterMatch.Status)
	default:
		x.check("pending_between_reply_and_match",
			planID != "" && afterReply.Reply != nil && afterReply.Status == core.RequestPending && statusAtWork == wantPlanStatus(approve),
			"after lead's reply (receipt %s) %s was %q with its reply saved; at reader's next prepare it became %q",
			orNone(afterReplyReceipt(leadT)), orNone(planID), afterReply.Status, statusAtWork)
		x.check("plan_decision", afterMatch.Status == wantPlanStatus(approve) && afterMatch.Reply != nil && afterMatch.Reply.Approve == approve,
			"plan %s: lead chose %s; the request is %q, matched by reader itself", orNone(planID), chose, afterMatch.Status)
	}
	x.repliesMatched(bg)

	planApproved := afterMatch.Status == core.RequestApproved
	if x.scripted() {
		planApproved = opts.Plan == PlanApprove
	}
	// The gates are consulted before any run: a model that never
	// called run_main skipped them, and the check fails (checkGates).
	x.checkGates(opts, planApproved, runCall, out)

	switch {
	case counterErr != nil:
		x.check("counter_file", false, "the counter file could not be read")
	case !x.scripted():
		want := strings.Repeat("x", runs)
		x.check("counter_file", counter == want && counterExists == (runs > 0),
			"main.py ran %d time(s): counter.txt exists: %t, holds %q (want %q)", runs, counterExists, counter, want)
	case out.RefusedBy == nil && runCall != nil:
		x.check("counter_file", counterExists && counter == "x", "main.py ran once: counter.txt holds %q (want exactly one x)", counter)
	default:
		x.check("counter_file", !counterExists, "main.py was refused: counter.txt exists: %t (want no file)", counterExists)
	}

	verdict := readerT2.res.Text
	honest := false
	switch {
	case out.Match == nil:
		honest = strings.Contains(verdict, verdictNotRun)
	case *out.Match:
		honest = strings.Contains(verdict, verdictMatch) && !strings.Contains(verdict, verdictMismatch)
	default:
		honest = strings.Contains(verdict, verdictMismatch) && !strings.Contains(verdict, verdictMatch)
	}
	if x.scripted() {
		x.check("result_reported_honestly", honest && readerT2.err == nil,
			"output %s, expected %q, match %s; reader reported: %q", strOrNull(out.Output), opts.Expected, boolOrNull(out.Match), verdict)
	} else {
		ok, why := reportMatchesRun(runCall, out, verdict)
		x.check("result_reported_honestly", ok && readerT2.err == nil,
			"%s: output %s, expected %q, match %s; reader reported: %q", why, strOrNull(out.Output), opts.Expected, boolOrNull(out.Match), verdict)
	}

	x.check("shutdown_at_idle_boundary",
		openErr == nil && shutErr == nil && strings.Join(attempts, ",") == "queued" && readerAfter.Status == core.StatusClosed && !readerAfter.Active,
		"shutdown %s approved by reader after its turn ended: attempts %s; reader is %s (active %t)",
		orNone(shut.RequestID), orNone(strings.Join(attempts, " → ")), readerAfter.Status, readerAfter.Active)

	x.check("shutdown_matched_by_lead",
		afterShutReply.Reply != nil && afterShutReply.Status == core.RequestPending && consumeErr == nil && afterShutMatch.Status == core.RequestApproved,
		"%s was %q after reader's reply (reader already closed) and %q after lead consumed it",
		orNone(shut.RequestID), afterShutReply.Status, afterShutMatch.Status)

	x.check("closed_member_unavailable", core.ErrorCode(againErr) == core.CodeMemberUnavailable && !called,
		"another turn for reader: %s; its callback started: %t", codeOrOK(againErr), called)

	if ctx.Err() != nil {
		return out
	}
	x.proveClosedWithTurnsLeft(ctx)
	return out
}

func wantPlanStatus(approve bool) string {
	if approve {
		return core.RequestApproved
	}
	return core.RequestRejected
}

func afterReplyReceipt(leadT turnRecord) string {
	for _, c := range leadT.stats.Calls {
		if c.Name == agent.ToolReviewPlan && !c.IsError {
			var res core.ReplyResult
			if json.Unmarshal([]byte(c.Content), &res) == nil {
				return res.Receipt
			}
		}
	}
	return ""
}

// checkGates checks that run_main was refused by the right gate, or ran,
// on this path: plan not approved → plan gate; approved + deny → host;
// approved + allow → ran.
func (x *run) checkGates(opts Options, planApproved bool, call *agent.ToolCall, out *ProtocolOutcome) {
	if call == nil {
		x.check("run_gates", false, "reader never called run_main")
		return
	}
	want := ""
	switch {
	case !planApproved:
		want = GatePlanWord
	case opts.Decision == DecisionDeny:
		want = GateHostWord
	}
	if !x.scripted() {
		opts.Plan = map[bool]string{true: "approved", false: "not approved"}[planApproved]
	}
	got := ""
	if out.RefusedBy != nil {
		got = *out.RefusedBy
	}
	if want == "" {
		x.check("run_gates", out.Ran && got == "", "plan %s and host %s: both gates passed and main.py ran", opts.Plan, opts.Decision)
		return
	}
	x.check("run_gates", !out.Ran && got == want, "plan %s and host %s: refused by the %s gate: %q", opts.Plan, opts.Decision, orNone(got), call.Content)
}

// Gate words of the outcome's refused_by.
const (
	GatePlanWord = agent.GatePlan
	GateHostWord = agent.GateHost
)

// checkLetters checks the 4 protocol letters and where they are.
func (x *run) checkLetters(ctx context.Context) {
	want := map[string][]string{
		core.LeadName: {"lead-1 reader plan_request", "lead-2 reader shutdown_response"},
		"reader":      {"reader-1 lead plan_response", "reader-2 lead shutdown_request"},
		"reviewer":    {},
	}
	protocol := 0
	okPlace := true
	var got []string
	for _, m := range []string{core.LeadName, "reader", "reviewer"} {
		box, err := x.svc.Inbox(ctx, x.team, m)
		if err != nil {
			okPlace = false
			continue
		}
		var have []string
		for _, l := range box {
			typ := "ordinary"
			if data, ok := protocolData(l.Body); ok {
				protocol++
				typ, _ = data["type"].(string)
			}
			have = append(have, l.ID+" "+l.Sender+" "+typ)
		}
		okPlace = okPlace && strings.Join(have, "|") == strings.Join(want[m], "|")
		got = append(got, have...)
	}
	x.check("protocol_letters", protocol == 4 && okPlace,
		"%d protocol letters (the lesson keeps 4): %s", protocol, orNone(strings.Join(got, "; ")))
}

// checkLettersOnModel checks, on a model's run, that the lesson's four
// protocol letters exist where the flow puts them: reader's plan request
// in lead's inbox, lead's answer in reader's, lead's shutdown request in
// reader's and reader's confirmation in lead's. A model may write other
// letters besides; how many and in which order is its choice.
func (x *run) checkLettersOnModel(ctx context.Context) {
	want := []struct{ owner, sender, typ string }{
		{core.LeadName, "reader", "plan_request"},
		{"reader", core.LeadName, "plan_response"},
		{"reader", core.LeadName, "shutdown_request"},
		{core.LeadName, "reader", "shutdown_response"},
	}
	var missing []string
	for _, w := range want {
		found := false
		box, _ := x.svc.Inbox(ctx, x.team, w.owner)
		for _, l := range box {
			if data, ok := protocolData(l.Body); ok && l.Sender == w.sender && data["type"] == w.typ {
				found = true
			}
		}
		if !found {
			missing = append(missing, fmt.Sprintf("no %s from %s in %s's inbox", w.typ, w.sender, w.owner))
		}
	}
	x.check("protocol_letters", len(missing) == 0,
		"the lesson's four protocol letters (plan request and answer, shutdown request and answer): %s; letters: %s",
		orNone(strings.Join(missing, "; ")), letterList(ctx, x))
}

// notRunWords are ways a report says that main.py did not run, in the
// lesson's language and in English; a model reporting a refused or
// failed run honestly uses one of them.
var notRunWords = []string{verdictNotRun, "没有运行", "未能运行", "not run", "n't run", "not been run", "never ran", "did not run",
	"refused", "denied", "not allowed", "not permitted", "permission", "gate", "could not", "couldn't", "cannot", "can't", "unable", "failed"}

// reportMatchesRun judges a model's report against what run_main did, as
// far as words allow: a model that never called run_main had nothing to
// report; when the program ran, the report names its output; when it was
// refused or failed, the report says it did not run. It returns the
// verdict and why.
func reportMatchesRun(call *agent.ToolCall, out *ProtocolOutcome, report string) (bool, string) {
	switch {
	case call == nil:
		return false, "reader's model never called run_main, so it had no result to report"
	case out.Output != nil:
		if *out.Output == "" || strings.Contains(report, *out.Output) {
			return true, "the report names the output main.py printed"
		}
		return false, "the report does not name the output main.py printed"
	}
	lower := strings.ToLower(report)
	for _, w := range notRunWords {
		if strings.Contains(lower, strings.ToLower(w)) {
			return true, "main.py did not run and the report says so"
		}
	}
	return false, "main.py did not run and the report does not say so"
}

// letterList is every letter of the run's team as "<id> <sender> <type>".
func letterList(ctx context.Context, x *run) string {
	var got []string
	for _, m := range []string{core.LeadName, "reader", "reviewer"} {
		box, _ := x.svc.Inbox(ctx, x.team, m)
		for _, l := range box {
			typ := "ordinary"
			if data, ok := protocolData(l.Body); ok {
				typ, _ = data["type"].(string)
			}
			got = append(got, l.ID+" "+l.Sender+" "+typ)
		}
	}
	return orNone(strings.Join(got, "; "))
}

// approveShutdownAtIdle approves shutdown request id as member. Approval
// while the member's turn runs is "deferred" and changes nothing; the
// host then waits for turnEnded and tries again, once. onDeferred, when
// set, runs after each deferred attempt. It returns the status of every
// attempt.
func (x *run) approveShutdownAtIdle(ctx context.Context, team, id, member string, turnEnded <-chan struct{}, onDeferred func()) ([]string, error) {
	var attempts []string
	for range 2 {
		res, err := x.svc.Reply(core.AsMember(context.WithoutCancel(ctx), team, member), core.ReplyInput{Team: team, RequestID: id, Approve: true, Feedback: shutdownFeedback})
		if err != nil {
			return attempts, err
		}
		attempts = append(attempts, res.Status)
		if res.Status != "deferred" {
			return attempts, nil
		}
		if onDeferred != nil {
			onDeferred()
		}
		select {
		case <-turnEnded:
		case <-ctx.Done():
			return attempts, ctx.Err()
		}
	}
	return attempts, fmt.Errorf("the member was still busy after its turn ended")
}

// proveClosedWithTurnsLeft shows, on a second small team, what the lesson
// team cannot (D9: its reader has used both turns when it is closed): a
// shutdown approved during a running turn is deferred and changes
// nothing; approved again once the turn has ended it closes the member,
// which then has a turn left and still cannot take it. A second team keeps
// the lesson team at exactly 7 model requests and 4 protocol letters.
func (x *run) proveClosedWithTurnsLeft(ctx context.Context) {
	bg := context.WithoutCancel(ctx)
	name := closeProofTeam(x.team).Name
	fail := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		x.check("shutdown_deferred_while_busy", false, "%s", msg)
		x.check("closed_with_turns_left_unavailable", false, "%s", msg)
	}
	x.pause(ctx)
	shut, err := x.svc.OpenRequest(core.AsMember(bg, name, core.LeadName), core.OpenInput{Team: name, Target: "reader", Kind: core.KindShutdown, Payload: shutdownPayload})
	if err != nil {
		fail("team %s: the shutdown request could not be opened: %s", name, core.ErrorMessage(err))
		return
	}

	// reader's turn holds its model request until the host has tried to
	// approve the shutdown, so the attempt certainly meets a busy member.
	cue := &cueModel{entered: make(chan struct{}), release: make(chan struct{})}
	var release sync.Once
	ended := make(chan struct{})
	var turnRes core.TurnResult
	var turnStats agent.Stats
	var turnErr error
	go func() {
		defer close(ended)
		turnRes, turnStats, turnErr = agent.Run(ctx, x.svc, agent.Spec{Team: name, Member: "reader", Prompt: "Work on.", Model: cue, Tools: agent.DefaultTools("reader"), Logger: x.log})
	}()
	select {
	case <-cue.entered:
	case <-ended:
	}
	var atDeferred string
	attempts, shutErr := x.approveShutdownAtIdle(ctx, name, shut.RequestID, "reader", ended, func() {
		m := x.memberView(bg, name, "reader")
		box, _ := x.svc.Inbox(bg, name, core.LeadName)
		atDeferred = fmt.Sprintf("reader %s (active %t), lead's inbox %d letter(s)", m.Status, m.Active, len(box))
		release.Do(func() { close(cue.release) })
	})
	release.Do(func() { close(cue.release) })
	<-ended
	reader := x.memberView(bg, name, "reader")
	x.check("shutdown_deferred_while_busy",
		shutErr == nil && strings.Join(attempts, ",") == "deferred,queued" && atDeferred == "reader running (active true), lead's inbox 0 letter(s)" && reader.Status == core.StatusClosed,
		"team %s: approving %s during reader's running turn returned %s; at that moment %s; retried after the turn ended (%s): reader is %s",
		name, shut.RequestID, orNone(strings.Join(attempts, " → ")), orNone(atDeferred), turnStatus(turnRes, turnErr), reader.Status)

	_, _ = x.svc.Consume(core.AsMember(bg, name, core.LeadName), name)
	called := false
	_, againErr := x.svc.RunTurn(bg, name, "reader", func(context.Context, []core.Entry) (core.TurnOutcome, error) {
		called = true
		return core.TurnOutcome{}, fmt.Errorf("a closed member's turn must not start")
	})
	limits := core.DefaultLimits()
	x.check("closed_with_turns_left_unavailable",
		reader.Status == core.StatusClosed && reader.Turns < limits.Turns && core.ErrorCode(againErr) == core.CodeMemberUnavailable && !called,
		"team %s: reader closed after %d of %d turns; another turn: %s; its callback started: %t (%d model request(s) in that team, not counted above)",
		name, reader.Turns, limits.Turns, codeOrOK(againErr), called, turnStats.ModelRequests)
}

// cueModel answers once it is released, telling the host when its
// request has arrived: a stand-in for a model that is still thinking.
type cueModel struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (c *cueModel) Respond(ctx context.Context, _ agent.Request) (agent.Response, error) {
	c.once.Do(func() { close(c.entered) })
	select {
	case <-c.release:
	case <-ctx.Done():
		return agent.Response{}, ctx.Err()
	}
	return agent.Response{Content: []core.Block{{Type: "text", Text: "Work done; idle now."}}, StopReason: agent.StopEndTurn}, nil
}

func (x *run) memberView(ctx context.Context, team, member string) core.MemberView {
	view, err := x.svc.Team(ctx, team)
	if err != nil {
		return core.MemberView{Name: member, Status: "unknown"}
	}
	for _, m := range view.Members {
		if m.Name == member {
			return m
		}
	}
	return core.MemberView{Name: member, Status: "unknown"}
}

// readerVerdict compares what run_main printed with what expected.txt
// holds, as reader saw both, and says so plainly in the lesson's words:
// 相符 (match), 不符 (mismatch), or 未运行 (did not run).
func readerVerdict(req agent.Request) agent.Step {
	exp, okExp := lastResult(req.Messages, agent.ToolReadFile)
	run, okRun := lastResult(req.Messages, agent.ToolRunMain)
	expected := "unknown"
	if okExp && !exp.isError {
		expected = strings.TrimSpace(exp.content)
	}
	switch {
	case !okRun:
		return agent.TextStep("main.py" + verdictNotRun + "（没有调用run_main）；无法与预期" + expected + "比较。")
	case run.isError:
		return agent.TextStep(fmt.Sprintf("main.py%s（%s）；无法与预期%s比较。", verdictNotRun, run.content, expected))
	}
	output := strings.TrimSpace(run.content)
	if output == expected {
		return agent.TextStep(fmt.Sprintf("main.py输出%s，expected.txt记录为%s：%s。", output, expected, verdictMatch))
	}
	return agent.TextStep(fmt.Sprintf("main.py输出%s，expected.txt记录为%s：%s。程序已运行，预期未满足。", output, expected, verdictMismatch))
}

func turnStatus(res core.TurnResult, err error) string {
	if err != nil {
		return string(core.ErrorCode(err))
	}
	return res.Status
}

func codeOrOK(err error) string {
	if err == nil {
		return "it ran"
	}
	return string(core.ErrorCode(err))
}

func strOrNull(s *string) string {
	if s == nil {
		return "null"
	}
	return fmt.Sprintf("%q", *s)
}

func boolOrNull(b *bool) string {
	if b == nil {
		return "null"
	}
	return fmt.Sprint(*b)
}

// closeProofTeam is the second small team of proveClosedWithTurnsLeft. It
// is created when the run starts, just before the run's own team, so that
// the run's team is the newest and a page following the newest team shows
// the run rather than its proof.
func closeProofTeam(runTeam string) core.TeamSpec {
	name := runTeam + "-close"
	if !core.ValidName(name) {
		name = "tp-close-" + strings.TrimPrefix(runTeam, TeamProtocols+"-")
	}
	return core.TeamSpec{Name: name, Members: []core.MemberSpec{
		{Name: core.LeadName, Role: "closes teammates at idle boundaries"},
		{Name: "reader", Role: "works one turn, then is closed with a turn left"},
	}}
}
