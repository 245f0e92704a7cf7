package httpapi

import "mailroom/internal/core"

// Conversions between core's types and the generated API types. Generated
// types never enter core; lists are always non-nil so they encode as [].

func teamSpecFrom(b *TeamCreate) core.TeamSpec {
	spec := core.TeamSpec{Name: b.Name}
	if b.Members != nil {
		for _, m := range *b.Members {
			ms := core.MemberSpec{Name: m.Name, Role: deref(m.Role), Wake: deref(m.Wake)}
			if m.Skills != nil {
				ms.Skills = *m.Skills
			}
			if m.Model != nil {
				ms.Model = coreModelOf(modelConfigFrom(m.Model))
			}
			spec.Members = append(spec.Members, ms)
		}
	}
	if b.Limits != nil {
		// A field left out keeps the lesson value; the validator injects the
		// spec's defaults, and this covers callers that bypass it.
		l := core.DefaultLimits()
		in := b.Limits
		set := func(dst *int, src *int) {
			if src != nil {
				*dst = *src
			}
		}
		set(&l.InboxMessages, in.InboxMessages)
		set(&l.InboxBytes, in.InboxBytes)
		set(&l.BodyChars, in.BodyChars)
		set(&l.Requests, in.Requests)
		set(&l.PayloadChars, in.PayloadChars)
		set(&l.FeedbackChars, in.FeedbackChars)
		set(&l.Turns, in.Turns)
		set(&l.HistoryEntries, in.HistoryEntries)
		set(&l.PermissionTimeoutS, in.PermissionTimeoutS)
		set(&l.Tasks, in.Tasks)
		set(&l.ToolCalls, in.ToolCalls)
		set(&l.WakeDelayMS, in.WakeDelayMs)
		set(&l.ModelRequests, in.ModelRequests)
		if in.ModelTokens != nil {
			l.ModelTokens = *in.ModelTokens
		}
		if in.WorkspaceBytes != nil {
			l.WorkspaceBytes = *in.WorkspaceBytes
		}
		set(&l.WorkspaceFiles, in.WorkspaceFiles)
		set(&l.Reservations, in.Reservations)
		spec.Limits = &l
	}
	spec.Purpose = deref(b.Purpose)
	if b.Workspace != nil {
		spec.Workspace = *b.Workspace
	}
	if b.HostPermission != nil {
		spec.HostPermission = string(*b.HostPermission)
	}
	return spec
}

func limitsUpdateFrom(in LimitsUpdate) core.LimitsUpdate {
	return core.LimitsUpdate{
		InboxMessages:      in.InboxMessages,
		InboxBytes:         in.InboxBytes,
		BodyChars:          in.BodyChars,
		PayloadChars:       in.PayloadChars,
		FeedbackChars:      in.FeedbackChars,
		HistoryEntries:     in.HistoryEntries,
		Requests:           in.Requests,
		Turns:              in.Turns,
		ModelTokens:        in.ModelTokens,
		PermissionTimeoutS: in.PermissionTimeoutS,
		Tasks:              in.Tasks,
		ToolCalls:          in.ToolCalls,
		WakeDelayMS:        in.WakeDelayMs,
		ModelRequests:      in.ModelRequests,
		WorkspaceBytes:     in.WorkspaceBytes,
		WorkspaceFiles:     in.WorkspaceFiles,
		Reservations:       in.Reservations,
	}
}

func limitsOf(l core.Limits) Limits {
	return Limits{
		InboxMessages:  l.InboxMessages,
		InboxBytes:     l.InboxBytes,
		BodyChars:      l.BodyChars,
		Requests:       l.Requests,
		PayloadChars:   l.PayloadChars,
		FeedbackChars:  l.FeedbackChars,
		Turns:          l.Turns,
		HistoryEntries: l.HistoryEntries,

		ModelTokens:        l.ModelTokens,
		PermissionTimeoutS: l.PermissionTimeoutS,
		Tasks:              l.TaskLimit(),
		ToolCalls:          l.ToolCalls,
		WakeDelayMs:        l.WakeDelayMS,
		ModelRequests:      l.ModelRequests,
		WorkspaceBytes:     l.WorkspaceBytes,
		WorkspaceFiles:     l.WorkspaceFiles,
		Reservations:       l.ReservationLimit(),
	}
}

func createdTeamOf(v core.TeamView, created []core.CreatedMember) CreatedTeam {
	out := CreatedTeam{
		Name:      v.Name,
		CreatedAt: v.CreatedAt,
		Limits:    limitsOf(v.Limits),
		Members:   make([]CreatedMember, 0, len(created)),

		Purpose:        v.Purpose,
		Model:          modelSettingsOf(v.Model),
		Workspace:      v.Workspace,
		HostPermission: CreatedTeamHostPermission(v.HostPermission),
	}
	for _, m := range created {
		out.Members = append(out.Members, CreatedMember{Name: m.Name, Role: m.Role, Status: MemberStatus(m.Status), Skills: nonNil(m.Skills), Token: m.Token})
	}
	return out
}

func memberOf(m core.MemberView) Member {
	out := Member{
		Name:          m.Name,
		Role:          m.Role,
		Status:        MemberStatus(m.Status),
		Active:        m.Active,
		Turns:         m.Turns,
		HistoryLength: m.HistoryLength,
		InboxLength:   m.InboxLength,
		Usage:         usageOf(m.Usage),
		McpSessions:   m.MCPSessions,
		McpLastSeen:   m.MCPLastSeen,
		ReadThrough:   m.ReadThrough,
		Unread:        m.Unread,
		Wake:          m.Wake,
		WakeHeld:      m.WakeHeld,
		// Present while the wake is held: why (docs/api.md).
		WakeHeldReason: m.WakeHeldReason,
		Skills:         nonNil(m.Skills),
	}
	if m.Model != nil {
		model := modelSettingsOf(*m.Model)
		out.Model = &model
	}
	return out
}

func teamOf(v core.TeamView) Team {
	out := Team{
		Name:      v.Name,
		CreatedAt: v.CreatedAt,
		Limits:    limitsOf(v.Limits),
		Members:   make([]Member, 0, len(v.Members)),
		Requests:  requestsOf(v.Requests),
		Damaged:   v.Damaged,

		Purpose:        v.Purpose,
		Model:          modelSettingsOf(v.Model),
		Workspace:      v.Workspace,
		HostPermission: TeamHostPermission(v.HostPermission),
		Usage:          usageOf(v.Usage),
	}
	for _, m := range v.Members {
		out.Members = append(out.Members, memberOf(m))
	}
	return out
}

func requestOf(r core.Request) Request {
	out := Request{
		RequestID: r.ID,
		Kind:      RequestKind(r.Kind),
		Sender:    r.Sender,
		Target:    r.Target,
		Payload:   r.Payload,
		Status:    RequestStatus(r.Status),
		Receipt:   r.Receipt,
	}
	if r.Reply != nil {
		out.Reply = &Reply{Type: ReplyType(r.Reply.Type), RequestID: r.Reply.RequestID, Approve: r.Reply.Approve, Feedback: r.Reply.Feedback}
	}
	return out
}

func requestsOf(rs []core.Request) []Request {
	out := make([]Request, 0, len(rs))
	for _, r := range rs {
		out = append(out, requestOf(r))
	}
	return out
}

func messagesOf(ms []core.Message) []Message {
	out := make([]Message, 0, len(ms))
	for _, m := range ms {
		out = append(out, messageOf(m))
	}
	return out
}

func matchResultsOf(rs []core.MatchResult) []MatchResult {
	out := make([]MatchResult, 0, len(rs))
	for _, r := range rs {
		m := MatchResult{MessageID: r.MessageID, Status: MatchResultStatus(r.Status)}
		if r.RequestID != "" {
			id := r.RequestID
			m.RequestID = &id
		}
		if r.Reason != "" {
			reason := MatchResultReason(r.Reason)
			m.Reason = &reason
		}
		out = append(out, m)
	}
	return out
}

func usageOf(u core.Usage) Usage {
	return Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens}
}

// modelSettingsOf shows a team's model: provider, name and bound, never
// a credential (a team holds none).
func modelSettingsOf(m core.ModelSettings) ModelSettings {
	out := ModelSettings{Provider: ModelSettingsProvider(m.Provider)}
	if m.Name != "" {
		name := m.Name
		out.Name = &name
	}
	if m.MaxTokens != 0 {
		n := m.MaxTokens
		out.MaxTokens = &n
	}
	return out
}
