package scenario

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"mailroom/internal/agent"
	"mailroom/internal/core"
)

// agentTeams runs lesson 15 (docs/spec.md §7, first reconstruction): reader and
// reviewer take turn 1 at the same time, reader continues in turn 2 from
// its own record, and lead summarises. Nothing runs main.py.
func (x *run) agentTeams(ctx context.Context) *TeamsOutcome {
	tools := agent.ToolSet{Names: []string{agent.ToolReadFile, agent.ToolSendMessage}, Workspace: x.ws}

	var readerT1, reviewerT1 turnRecord
	var wg sync.WaitGroup
	wg.Go(func() {
		readerT1 = x.turn(ctx, "reader", "Inspect main.py and report to lead. Do not run it.", tools, nil,
			agent.CallStep(agent.ToolReadFile, map[string]string{"path": "main.py"}),
			agent.ComputedStep(readerFirstReport),
			agent.TextStep("Source read and reported to lead; main.py was not run."),
		)
	})
	wg.Go(func() {
		reviewerT1 = x.turn(ctx, "reviewer", "Read expected.txt and tell reader the expected value.", tools, nil,
			agent.CallStep(agent.ToolReadFile, map[string]string{"path": "expected.txt"}),
			agent.ComputedStep(reviewerNote),
			agent.TextStep("Expected value sent to reader."),
		)
	})
	wg.Wait()

	x.pause(ctx)
	readerT2 := x.turn(ctx, "reader", "Write lead a supplementary report from your earlier record and any new mail.", tools, nil,
		agent.ComputedStep(readerSupplement),
		agent.TextStep("Supplementary report sent to lead; main.py was not run."),
	)
	x.pause(ctx)
	leadT := x.turn(ctx, core.LeadName, "Summarise the reports you received.", tools, nil,
		agent.ComputedStep(leadSummary),
	)

	out := &TeamsOutcome{}
	bg := context.WithoutCancel(ctx)
	boxes := map[string][]core.Message{}
	for _, m := range []string{core.LeadName, "reader", "reviewer"} {
		box, err := x.svc.Inbox(bg, x.team, m)
		if err != nil {
			x.check("mailboxes_readable", false, "the inbox of %s could not be read: %s", m, core.ErrorMessage(err))
		}
		boxes[m] = box
	}
	out.LeadLetters, out.ReaderLetters, out.ReviewerLetters = len(boxes[core.LeadName]), len(boxes["reader"]), len(boxes["reviewer"])

	ok, detail := x.answered(readerT1, reviewerT1, readerT2, leadT)
	x.check("turn_outcomes", ok, "%s (reader and reviewer took turn 1 concurrently)", detail)

	requests := fmt.Sprintf("%d model requests (reader turn 1: %d, reviewer: %d, reader turn 2: %d, lead: %d)",
		x.modelRequests, readerT1.stats.ModelRequests, reviewerT1.stats.ModelRequests, readerT2.stats.ModelRequests, leadT.stats.ModelRequests)
	letters := fmt.Sprintf("lead %d, reader %d, reviewer %d letters", out.LeadLetters, out.ReaderLetters, out.ReviewerLetters)
	if x.scripted() {
		x.check("model_requests", x.modelRequests == 9, "%s; the lesson makes 9", requests)
		x.check("mailbox_counts", out.LeadLetters == 2 && out.ReaderLetters == 1 && out.ReviewerLetters == 0,
			"%s; the lesson leaves 2 / 1 / 0", letters)
	} else {
		x.notApplicable("model_requests", "the lesson's 9 requests are the script's; a model asks as often as it needs: %s", requests)
		x.notApplicable("mailbox_counts", "the lesson's 2 / 1 / 0 letters are the script's; a model writes the letters it chooses: %s", letters)
	}
	x.lettersValid(bg)

	// The reader's turn-2 request must carry the very tool result its
	// turn-1 read_file produced: the history was continued, not rebuilt.
	var first agent.ToolCall
	for _, c := range readerT1.stats.Calls {
		if c.Name == agent.ToolReadFile && readPath(c.Input) == "main.py" && !c.IsError {
			first = c
			break
		}
	}
	kept := false
	if reqs := readerT2.requests; first.ID != "" && len(reqs) > 0 {
		for _, r := range toolResults(reqs[0].Messages) {
			if r.id == first.ID && r.content == first.Content && !r.isError {
				kept = true
			}
		}
	}
	// Reading main.py in turn 1 is the lesson's flow, whoever drives it:
	// a model that did not read it has nothing to carry and fails.
	if first.ID == "" {
		x.check("reader_context_kept", false, "reader's model did not read main.py in turn 1, so there is no tool result to carry into turn 2")
	} else {
		x.check("reader_context_kept", kept,
			"reader's first turn-2 model request contains tool result %s (read_file main.py, %d bytes) from turn 1", orNone(first.ID), len(first.Content))
	}

	for _, c := range readerT2.stats.Calls {
		if c.Name == agent.ToolReadFile && readPath(c.Input) == "main.py" {
			out.ReaderRereadSource = true
		}
	}
	if x.scripted() {
		x.check("reader_no_reread", !out.ReaderRereadSource && len(readerT2.requests) > 0,
			"reader's turn 2 made %d tool call(s) and read main.py again: %t", len(readerT2.stats.Calls), out.ReaderRereadSource)
	} else {
		x.notApplicable("reader_no_reread", "whether reader reads main.py again is its model's choice: its turn 2 made %d tool call(s) and read main.py again: %t",
			len(readerT2.stats.Calls), out.ReaderRereadSource)
	}

	// What lead's model was actually shown, not what its inbox holds.
	var leadInput []core.Entry
	if reqs := leadT.requests; len(reqs) > 0 {
		leadInput = reqs[len(reqs)-1].Messages
	}
	var seen []string
	reports := 0
	for _, m := range boxes[core.LeadName] {
		if m.Sender != "reader" {
			continue
		}
		reports++
		if containsText(leadInput, core.HistoryText(m)) {
			out.LeadSawReports++
			seen = append(seen, m.ID)
		}
	}
	if x.scripted() {
		x.check("lead_saw_both_reports", out.LeadSawReports == 2,
			"lead's model input contains %d report(s) from reader: %s", out.LeadSawReports, orNone(strings.Join(seen, ", ")))
	} else {
		// reader reports in each of its two turns, as the lesson's flow
		// asks; a model may write more, and every one in lead's inbox
		// must have reached lead's model.
		x.check("lead_saw_both_reports", reports >= 2 && out.LeadSawReports == reports && len(leadT.requests) > 0,
			"lead's model input contains %d of the %d report(s) from reader in its inbox (the lesson's flow has at least 2): %s", out.LeadSawReports, reports, orNone(strings.Join(seen, ", ")))
	}

	var ids []string
	for _, tr := range []turnRecord{readerT1, reviewerT1, readerT2, leadT} {
		for _, c := range tr.stats.Calls {
			ids = append(ids, c.ID)
		}
	}
	if x.scripted() {
		want := "reader-t1-1,reader-t1-2,reviewer-t1-1,reviewer-t1-2,reader-t2-1"
		x.check("tool_use_ids", strings.Join(ids, ",") == want,
			"tool-use ids are <member>-t<turn>-<n>: %s", orNone(strings.Join(ids, ", ")))
	} else {
		x.check("tool_use_ids", idsInOrder(readerT1, 1) && idsInOrder(reviewerT1, 1) && idsInOrder(readerT2, 2) && idsInOrder(leadT, 1),
			"tool-use ids are <member>-t<turn>-<n>, numbered from 1 in each turn: %s", orNone(strings.Join(ids, ", ")))
	}
	return out
}

// idsInOrder reports whether the tool-use ids of tr, the member's turn
// turnNo, are <member>-t<turnNo>-1, -2, ... in order.
func idsInOrder(tr turnRecord, turnNo int) bool {
	for i, c := range tr.stats.Calls {
		if c.ID != fmt.Sprintf("%s-t%d-%d", tr.member, turnNo, i+1) {
			return false
		}
	}
	return true
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// readerFirstReport mails lead what reader's read_file returned.
func readerFirstReport(req agent.Request) agent.Step {
	src, ok := lastResult(req.Messages, agent.ToolReadFile)
	body := "reader报告1：main.py无法读取；未运行。"
	if ok && !src.isError {
		body = fmt.Sprintf("reader报告1：已读取main.py（%d行），输出语句为%s，并向counter.txt追加一个x。未运行。",
			strings.Count(src.content, "\n"), printLine(src.content))
	}
	return agent.CallStep(agent.ToolSendMessage, map[string]string{"to": core.LeadName, "body": body})
}

// reviewerNote mails reader the value expected.txt holds.
func reviewerNote(req agent.Request) agent.Step {
	res, ok := lastResult(req.Messages, agent.ToolReadFile)
	body := "expected.txt无法读取；尚未运行。"
	if ok && !res.isError {
		// The lesson's letter, byte for byte: "expected.txt currently
		// records 42; not run yet."
		body = fmt.Sprintf("当前expected.txt记录为%s；尚未运行。", strings.TrimSpace(res.content))
	}
	return agent.CallStep(agent.ToolSendMessage, map[string]string{"to": "reader", "body": body})
}

// readerSupplement writes lead a supplementary report from reader's own
// turn-1 record of main.py and reviewer's letter, without reading again.
func readerSupplement(req agent.Request) agent.Step {
	source := "（上轮没有main.py的源码记录）"
	if src, ok := lastResult(req.Messages, agent.ToolReadFile); ok && !src.isError && readPath(src.input) == "main.py" {
		source = fmt.Sprintf("上轮main.py源码记录（输出语句%s）", printLine(src.content))
	}
	note := "（没有reviewer的说明）"
	for _, m := range teamMessages(req.Messages) {
		if m.Sender == "reviewer" {
			note = fmt.Sprintf("reviewer的说明「%s」", m.Body)
		}
	}
	body := fmt.Sprintf("reader报告2（补充）：结合%s与%s。仍没有运行。", source, note)
	return agent.CallStep(agent.ToolSendMessage, map[string]string{"to": core.LeadName, "body": body})
}

// leadSummary answers with a summary of the reports lead was shown.
func leadSummary(req agent.Request) agent.Step {
	var reports []string
	for _, m := range teamMessages(req.Messages) {
		if m.Sender == "reader" {
			reports = append(reports, m.ID)
		}
	}
	return agent.TextStep(fmt.Sprintf("Summary: %d report(s) from reader (%s); the source and the expected value were read, main.py was not run.",
		len(reports), orNone(strings.Join(reports, ", "))))
}

// printLine returns the first line of src that calls print, or "unknown".
func printLine(src string) string {
	for line := range strings.Lines(src) {
		if l := strings.TrimSpace(line); strings.HasPrefix(l, "print(") {
			return l
		}
	}
	return "unknown"
}
