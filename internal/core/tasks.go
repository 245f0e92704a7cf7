package core

import (
	"context"
	"encoding/json"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The task board (docs/api.md, "Tasks"): a team's shared list of work.
// Tasks are kept by the store beside the team's state (TeamTx.Tasks,
// PutTask), one record per task, so that a claim writes one small record
// however large the board is. Every rule and right is here, once, for
// every door: REST, MCP and the agents' own tools.

// Task statuses.
const (
	TaskPending    = "pending"
	TaskInProgress = "in_progress"
	TaskCompleted  = "completed"
	TaskDeleted    = "deleted"
)

// Bounds of a task's texts, in characters after trimming.
const (
	MaxTaskTitle  = 200
	MaxTaskDetail = 4000
	MaxTaskResult = 4000
	// DefaultTaskLimit is limits.tasks when a team names none.
	DefaultTaskLimit = 500
)

// TaskPrefix is put before a task's JSON in a member's history, as
// TeamMessagePrefix is before a letter's.
const TaskPrefix = "[team-task] "

// Task is one task of a team's board. Blocks is derived (the live tasks
// whose BlockedBy names this one): stores keep it empty, core fills it
// in every document it hands out.
type Task struct {
	ID        string   `json:"task_id"`
	Title     string   `json:"title"`
	Detail    string   `json:"detail"`
	Status    string   `json:"status"`
	Owner     *string  `json:"owner"`
	Assignee  *string  `json:"assignee"`
	BlockedBy []string `json:"blocked_by"`
	Blocks    []string `json:"blocks"`
	// Needs are the skills a member must have to claim the task
	// (skills.go); a task stored before needs existed has none.
	Needs     []string  `json:"needs"`
	Result    *string   `json:"result"`
	CreatedBy string    `json:"created_by"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// TaskID is the id of the n-th task of a team.
func TaskID(n int) string { return "task-" + strconv.Itoa(n) }

// TaskNumber is n of an id "task-<n>", 0 for anything else.
func TaskNumber(id string) int {
	rest, ok := strings.CutPrefix(id, "task-")
	if !ok {
		return 0
	}
	n, _ := canonicalNumber(rest) // "task-+1" is no task id
	return n
}

// clone returns a copy of t that shares no slice or pointer with it.
func (t Task) clone() Task {
	t.BlockedBy = append([]string{}, t.BlockedBy...)
	t.Blocks = append([]string{}, t.Blocks...)
	t.Needs = append([]string{}, t.Needs...)
	t.Owner = cloneStr(t.Owner)
	t.Assignee = cloneStr(t.Assignee)
	t.Result = cloneStr(t.Result)
	return t
}

func cloneStr(p *string) *string {
	if p == nil {
		return nil
	}
	s := *p
	return &s
}

func strOf(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func ptr(s string) *string { return &s }

// closed reports whether t takes no more claims or changes.
func (t Task) closed() bool { return t.Status == TaskCompleted || t.Status == TaskDeleted }

// board is a team's tasks inside one unit of work, by number (index n-1).
type board struct {
	tasks []Task
}

func (b *board) get(id string) *Task {
	n := TaskNumber(id)
	if n < 1 || n > len(b.tasks) || b.tasks[n-1].ID != id {
		return nil
	}
	return &b.tasks[n-1]
}

// blockers returns the blockers of t that are not completed yet (deleted
// ones never block).
func (b *board) blockers(t *Task) []string {
	var out []string
	for _, id := range t.BlockedBy {
		if x := b.get(id); x != nil && x.Status != TaskCompleted && x.Status != TaskDeleted {
			out = append(out, id)
		}
	}
	return out
}

// doc is t as clients see it: Blocks filled in.
func (b *board) doc(t *Task) Task {
	out := t.clone()
	out.Blocks = []string{}
	if t.Status != TaskDeleted {
		for i := range b.tasks {
			x := &b.tasks[i]
			if x.Status != TaskDeleted && slices.Contains(x.BlockedBy, t.ID) {
				out.Blocks = append(out.Blocks, x.ID)
			}
		}
	}
	return out
}

// docs returns every task as clients see it, in id order, with one pass
// over the dependencies.
func (b *board) docs(keep func(*Task) bool) []Task {
	blocks := map[string][]string{}
	for i := range b.tasks {
		x := &b.tasks[i]
		if x.Status == TaskDeleted {
			continue
		}
		for _, id := range x.BlockedBy {
			blocks[id] = append(blocks[id], x.ID)
		}
	}
	out := []Task{}
	for i := range b.tasks {
		t := &b.tasks[i]
		if keep != nil && !keep(t) {
			continue
		}
		d := t.clone()
		d.Blocks = []string{}
		if t.Status != TaskDeleted {
			d.Blocks = append(d.Blocks, blocks[t.ID]...)
		}
		out = append(out, d)
	}
	return out
}

// claimable reports whether member, with skills, may claim t now:
// pending, every blocker completed, assigned to member or to nobody, and
// member has every skill t needs.
func (b *board) claimable(t *Task, member string, skills []string) bool {
	return t.Status == TaskPending && (t.Assignee == nil || *t.Assignee == member) &&
		len(missingLabels(t.Needs, skills)) == 0 && len(b.blockers(t)) == 0
}

// reaches reports whether from depends, through blocked_by, on target.
func (b *board) reaches(from, target string) bool {
	seen := map[string]bool{}
	stack := []string{from}
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if id == target {
			return true
		}
		if seen[id] {
			continue
		}
		seen[id] = true
		if t := b.get(id); t != nil && t.Status != TaskDeleted {
			stack = append(stack, t.BlockedBy...)
		}
	}
	return false
}

// ClaimableTasks returns the tasks of tasks (a team's board, in id order)
// assigned to member that member, with skills, could claim now: pending,
// every blocker completed, every skill it needs at hand. What wakes a
// member for its work looks here, so a task wakes only a member that can
// do it.
func ClaimableTasks(tasks []Task, member string, skills []string) []Task {
	b := &board{tasks: tasks}
	var out []Task
	for i := range tasks {
		t := &tasks[i]
		if t.Assignee != nil && *t.Assignee == member && b.claimable(t, member, skills) {
			out = append(out, b.doc(t))
		}
	}
	return out
}

// TaskHistoryText is the text a task becomes in a member's history:
// TaskPrefix and the task's JSON with sorted keys, written as the
// lessons' json.dumps writes a letter's (HistoryText).
func TaskHistoryText(t Task) string {
	data, err := json.Marshal(t)
	if err != nil {
		panic(err) // a task always encodes
	}
	var v any
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		panic(err)
	}
	// A task that needs nothing is written as it was before needs
	// existed, so that a member's attended lines stay attended.
	if doc, ok := v.(map[string]any); ok {
		if needs, ok := doc["needs"].([]any); ok && len(needs) == 0 {
			delete(doc, "needs")
		}
	}
	return TaskPrefix + string(appendSorted(nil, v))
}

// appendSorted writes a decoded JSON value with sorted keys and Python's
// separators.
func appendSorted(dst []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...)
	case bool:
		return strconv.AppendBool(dst, x)
	case json.Number:
		return append(dst, x.String()...)
	case string:
		return appendString(dst, x, false)
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',', ' ')
			}
			dst = appendSorted(dst, e)
		}
		return append(dst, ']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',', ' ')
			}
			dst = appendString(dst, k, false)
			dst = append(dst, ':', ' ')
			dst = appendSorted(dst, x[k])
		}
		return append(dst, '}')
	}
	panic("core: unexpected JSON value")
}

// TaskInput is a new task. Its creator is the caller.
type TaskInput struct {
	Team      string
	Title     string
	Detail    string
	BlockedBy []string
	// Assignee "" means nobody.
	Assignee string
	// Needs are the skills a claimer must have (CheckLabels).
	Needs []string
}

// TaskUpdate changes a task; a nil field is kept. Assignee "" clears it.
type TaskUpdate struct {
	Team      string
	TaskID    string
	Title     *string
	Detail    *string
	BlockedBy *[]string
	Assignee  *string
	Needs     *[]string
}

// TaskFilter selects tasks of a list; an empty field selects all.
type TaskFilter struct {
	Status   string
	Owner    string
	Assignee string
}

// taskCaller is who acts on a board: a member of team, or the admin
// (created_by "admin").
func taskCaller(ctx context.Context, team string) (name string, admin bool, err error) {
	p, ok := PrincipalFrom(ctx)
	if !ok || p.Admin {
		return creatorAdmin, true, nil
	}
	if p.Team != team {
		return "", false, Errorf(CodeForbidden, "The token belongs to another team.")
	}
	return p.Member, false, nil
}

func checkText(s string, lo, hi int, what string) (string, error) {
	t := Trim(s)
	if n := Length(t); !utf8.ValidString(s) || n < lo || n > hi {
		return "", Errorf(CodeBodyLength, "The %s must be %d to %d characters after trimming.", what, lo, hi)
	}
	return t, nil
}

// board opens the team's board inside a unit of work, as a copy the
// unit may change (the store's slice is never changed in place).
func (u *unit) board() (*board, error) {
	tasks, err := u.tx.Tasks()
	if err != nil {
		return nil, asStoreError(err)
	}
	return &board{tasks: slices.Clone(tasks)}, nil
}

// taskIn reads the board and finds task id on it (not_found when the
// team has no such task).
func (u *unit) taskIn(id string) (*board, *Task, error) {
	b, err := u.board()
	if err != nil {
		return nil, nil, err
	}
	t := b.get(id)
	if t == nil {
		return nil, nil, taskNotFound()
	}
	return b, t, nil
}

// putTask stores t and announces it, with the tasks named in touched
// (those whose blocks it may have changed).
func (u *unit) putTask(b *board, t *Task, touched ...string) error {
	t.UpdatedAt = u.now.UTC()
	stored := t.clone()
	stored.Blocks = nil
	if err := u.tx.PutTask(stored); err != nil {
		return asStoreError(err)
	}
	u.emit(EventTask, b.doc(t))
	seen := map[string]bool{t.ID: true}
	for _, id := range touched {
		if x := b.get(id); x != nil && !seen[id] {
			seen[id] = true
			u.emit(EventTask, b.doc(x))
		}
	}
	return nil
}

// checkBlockers validates and deduplicates a blocked_by list.
func (b *board) checkBlockers(ids []string) ([]string, error) {
	out := []string{}
	for _, id := range ids {
		t := b.get(id)
		if t == nil || t.Status == TaskDeleted {
			return nil, Errorf(CodeUnknownTask, "A blocker is no task of this team, or it was deleted.")
		}
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out, nil
}

func (u *unit) checkAssignee(name string) error {
	if name != "" && !u.isMember(name) {
		return memberError(name, u.st)
	}
	return nil
}

// CreateTask adds a pending task to the team's board (a member or the
// admin). Refusals: body_length, validation_failed (needs), unknown_member
// (assignee), unknown_task (a blocker), task_limit, in that order.
func (s *Service) CreateTask(ctx context.Context, in TaskInput) (Task, error) {
	me, _, err := taskCaller(ctx, in.Team)
	if err != nil {
		return Task{}, err
	}
	title, err := checkText(in.Title, 1, MaxTaskTitle, "title")
	if err != nil {
		return Task{}, err
	}
	detail, err := checkText(in.Detail, 0, MaxTaskDetail, "detail")
	if err != nil {
		return Task{}, err
	}
	needs, err := CheckLabels(in.Needs, "needs")
	if err != nil {
		return Task{}, err
	}
	var out Task
	err = s.update(ctx, in.Team, func(u *unit) error {
		if err := u.checkAssignee(in.Assignee); err != nil {
			return err
		}
		b, err := u.board()
		if err != nil {
			return err
		}
		blockedBy, err := b.checkBlockers(in.BlockedBy)
		if err != nil {
			return err
		}
		if len(b.tasks) >= u.st.Limits.TaskLimit() {
			return Errorf(CodeTaskLimit, "The team holds its limit of %d tasks.", u.st.Limits.TaskLimit())
		}
		t := Task{ID: TaskID(len(b.tasks) + 1), Title: title, Detail: detail, Status: TaskPending,
			BlockedBy: blockedBy, Needs: needs, CreatedBy: me, CreatedAt: u.now.UTC()}
		if in.Assignee != "" {
			t.Assignee = ptr(in.Assignee)
		}
		b.tasks = append(b.tasks, t)
		nt := &b.tasks[len(b.tasks)-1]
		if err := u.putTask(b, nt, blockedBy...); err != nil {
			return err
		}
		out = b.doc(nt)
		return nil
	})
	return out, err
}

// Tasks lists a team's tasks in id order (a member or the admin).
func (s *Service) Tasks(ctx context.Context, team string, f TaskFilter) ([]Task, error) {
	if err := CheckReader(ctx, team); err != nil {
		return nil, err
	}
	var out []Task
	err := s.view(ctx, team, false, func(u *unit) error {
		b, err := u.board()
		if err != nil {
			return err
		}
		out = b.docs(func(t *Task) bool {
			return (f.Status == "" || t.Status == f.Status) &&
				(f.Owner == "" || strOf(t.Owner) == f.Owner) &&
				(f.Assignee == "" || strOf(t.Assignee) == f.Assignee)
		})
		return nil
	})
	return out, err
}

// Task returns one task (a member or the admin).
func (s *Service) Task(ctx context.Context, team, id string) (Task, error) {
	if err := CheckReader(ctx, team); err != nil {
		return Task{}, err
	}
	var out Task
	err := s.view(ctx, team, false, func(u *unit) error {
		b, t, err := u.taskIn(id)
		if err != nil {
			return err
		}
		out = b.doc(t)
		return nil
	})
	return out, err
}

func taskNotFound() error { return Errorf(CodeNotFound, "No such task.") }

// creatorAdmin is created_by of a task the admin created.
const creatorAdmin = "admin"

// mayManage reports whether the caller is lead, the admin or one of who.
// A member named "admin" is never taken for the admin: created_by
// "admin" names the admin token, so that member gets no creator's right
// from it.
func mayManage(me string, admin bool, who ...string) bool {
	return admin || me == LeadName || (me != creatorAdmin && slices.Contains(who, me))
}

// UpdateTask changes a task's title, detail, blockers, assignee or needs (its
// creator, lead or the admin). Refusals after the texts' bounds:
// not_found, forbidden, task_closed, unknown_member, unknown_task,
// task_cycle.
func (s *Service) UpdateTask(ctx context.Context, in TaskUpdate) (Task, error) {
	me, admin, err := taskCaller(ctx, in.Team)
	if err != nil {
		return Task{}, err
	}
	var title, detail string
	if in.Title != nil {
		if title, err = checkText(*in.Title, 1, MaxTaskTitle, "title"); err != nil {
			return Task{}, err
		}
	}
	if in.Detail != nil {
		if detail, err = checkText(*in.Detail, 0, MaxTaskDetail, "detail"); err != nil {
			return Task{}, err
		}
	}
	var needs []string
	if in.Needs != nil {
		if needs, err = CheckLabels(*in.Needs, "needs"); err != nil {
			return Task{}, err
		}
	}
	var out Task
	err = s.update(ctx, in.Team, func(u *unit) error {
		b, err := u.board()
		if err != nil {
			return err
		}
		t := b.get(in.TaskID)
		if t == nil {
			return taskNotFound()
		}
		if !mayManage(me, admin, t.CreatedBy) {
			return Errorf(CodeForbidden, "Only the task's creator, lead or the admin may change it.")
		}
		if t.closed() {
			return Errorf(CodeTaskClosed, "The task is %s.", t.Status)
		}
		if in.Assignee != nil {
			if err := u.checkAssignee(*in.Assignee); err != nil {
				return err
			}
		}
		touched := slices.Clone(t.BlockedBy)
		if in.BlockedBy != nil {
			ids, err := b.checkBlockers(*in.BlockedBy)
			if err != nil {
				return err
			}
			for _, id := range ids {
				if id == t.ID || b.reaches(id, t.ID) {
					return Errorf(CodeTaskCycle, "These blockers would make the task wait for itself.")
				}
			}
			t.BlockedBy = ids
			touched = append(touched, ids...)
		}
		if in.Title != nil {
			t.Title = title
		}
		if in.Detail != nil {
			t.Detail = detail
		}
		if in.Needs != nil {
			t.Needs = needs
		}
		if in.Assignee != nil {
			t.Assignee = nil
			if *in.Assignee != "" {
				t.Assignee = ptr(*in.Assignee)
			}
		}
		if err := u.putTask(b, t, touched...); err != nil {
			return err
		}
		out = b.doc(t)
		return nil
	})
	return out, err
}

// claimIn claims t for me on b, or says why not (the order of the
// contract: task_closed, member_closed, task_assigned, task_needs,
// task_claimed, task_blocked). changed is false for the owner claiming
// again. Lead claims as any member does: it too needs the task's skills.
func (u *unit) claimIn(b *board, t *Task, me string) (changed bool, err error) {
	if t.closed() {
		return false, Errorf(CodeTaskClosed, "The task is %s.", t.Status)
	}
	m := u.member(me)
	if m == nil || m.Status == StatusClosed {
		return false, Errorf(CodeMemberClosed, "The member has been shut down.")
	}
	if t.Assignee != nil && *t.Assignee != me {
		return false, Errorf(CodeTaskAssigned, "The task is assigned to another member.")
	}
	if missing := missingLabels(t.Needs, m.Skills); len(missing) > 0 {
		return false, needsError(missing)
	}
	if t.Owner != nil {
		if *t.Owner == me {
			return false, nil
		}
		return false, Errorf(CodeTaskClaimed, "Another member owns the task.")
	}
	if open := b.blockers(t); len(open) > 0 {
		return false, Errorf(CodeTaskBlocked, "The task waits for %s.", strings.Join(open, ", "))
	}
	t.Owner = ptr(me)
	t.Status = TaskInProgress
	return true, nil
}

// ClaimTask makes the caller, a member, the owner of a pending task:
// in_progress. Of concurrent claims of one task exactly one wins (the
// unit of work serialises them); the others get task_claimed.
func (s *Service) ClaimTask(ctx context.Context, team, id string) (Task, error) {
	me, err := actor(ctx, team)
	if err != nil {
		return Task{}, err
	}
	var out Task
	err = s.update(ctx, team, func(u *unit) error {
		b, t, err := u.taskIn(id)
		if err != nil {
			return err
		}
		changed, err := u.claimIn(b, t, me)
		if err != nil {
			return err
		}
		if changed {
			if err := u.putTask(b, t); err != nil {
				return err
			}
		}
		out = b.doc(t)
		return nil
	})
	return out, err
}

// ClaimNextTask claims, for the caller, the lowest-numbered task it could
// claim (ClaimableTasks, or unassigned), skipping those that need a skill
// it lacks; ok is false when there is none.
func (s *Service) ClaimNextTask(ctx context.Context, team string) (Task, bool, error) {
	me, err := actor(ctx, team)
	if err != nil {
		return Task{}, false, err
	}
	var out Task
	found := false
	err = s.update(ctx, team, func(u *unit) error {
		found = false
		m := u.member(me)
		if m == nil {
			return memberError(me, u.st)
		} else if m.Status == StatusClosed {
			return Errorf(CodeMemberClosed, "The member has been shut down.")
		}
		b, err := u.board()
		if err != nil {
			return err
		}
		for i := range b.tasks {
			t := &b.tasks[i]
			if !b.claimable(t, me, m.Skills) {
				continue
			}
			if _, err := u.claimIn(b, t, me); err != nil {
				return err
			}
			if err := u.putTask(b, t); err != nil {
				return err
			}
			out, found = b.doc(t), true
			return nil
		}
		return nil
	})
	return out, found, err
}

// CompleteTask marks an in-progress task completed with an optional
// result (its owner, lead or the admin); the owner is kept. A task that
// is not in progress: task_closed when completed or deleted, else
// task_not_claimed.
func (s *Service) CompleteTask(ctx context.Context, team, id string, result *string) (Task, error) {
	var text *string
	if result != nil {
		r, err := checkText(*result, 0, MaxTaskResult, "result")
		if err != nil {
			return Task{}, err
		}
		text = &r
	}
	return s.settleTask(ctx, team, id, func(u *unit, b *board, t *Task) error {
		if t.closed() {
			return Errorf(CodeTaskClosed, "The task is %s.", t.Status)
		}
		if t.Status != TaskInProgress {
			return Errorf(CodeTaskNotClaimed, "The task is not in progress.")
		}
		t.Status = TaskCompleted
		t.Result = text
		if t.Result == nil {
			t.Result = ptr("")
		}
		// Its dependents' blockers changed: announce them too.
		return u.putTask(b, t, b.doc(t).Blocks...)
	})
}

// ReleaseTask gives an in-progress task back: pending, no owner (its
// owner, lead or the admin). Any other task: task_not_claimed.
func (s *Service) ReleaseTask(ctx context.Context, team, id string) (Task, error) {
	return s.settleTask(ctx, team, id, func(u *unit, b *board, t *Task) error {
		if t.Status != TaskInProgress {
			return Errorf(CodeTaskNotClaimed, "The task is not in progress.")
		}
		t.Status = TaskPending
		t.Owner = nil
		return u.putTask(b, t)
	})
}

// settleTask runs fn on task id for its owner, lead or the admin.
func (s *Service) settleTask(ctx context.Context, team, id string, fn func(u *unit, b *board, t *Task) error) (Task, error) {
	owner := func(t *Task) string { return strOf(t.Owner) }
	return s.manageTask(ctx, team, id, owner, "Only the task's owner, lead or the admin may do this.", fn)
}

// manageTask runs fn on task id, in one unit of work, for the member
// holder names (the task's owner or its creator), lead or the admin;
// anyone else is refused with forbidden and refused as its detail.
func (s *Service) manageTask(ctx context.Context, team, id string, holder func(t *Task) string, refused string, fn func(u *unit, b *board, t *Task) error) (Task, error) {
	me, admin, err := taskCaller(ctx, team)
	if err != nil {
		return Task{}, err
	}
	var out Task
	err = s.update(ctx, team, func(u *unit) error {
		b, t, err := u.taskIn(id)
		if err != nil {
			return err
		}
		if !mayManage(me, admin, holder(t)) {
			return Errorf(CodeForbidden, "%s", refused)
		}
		if err := fn(u, b, t); err != nil {
			return err
		}
		out = b.doc(t)
		return nil
	})
	return out, err
}

// DeleteTask marks a task deleted (its creator, lead or the admin): it is
// kept, with its id, and no longer blocks anything: it leaves the
// blocked_by of every task that named it. Deleting it again changes
// nothing.
func (s *Service) DeleteTask(ctx context.Context, team, id string) (Task, error) {
	creator := func(t *Task) string { return t.CreatedBy }
	return s.manageTask(ctx, team, id, creator, "Only the task's creator, lead or the admin may delete it.", func(u *unit, b *board, t *Task) error {
		if t.Status == TaskDeleted {
			return nil
		}
		dependents := b.doc(t).Blocks
		t.Status = TaskDeleted
		if err := u.putTask(b, t, t.BlockedBy...); err != nil {
			return err
		}
		for _, did := range dependents {
			d := b.get(did)
			d.BlockedBy = slices.DeleteFunc(slices.Clone(d.BlockedBy), func(x string) bool { return x == t.ID })
			if err := u.putTask(b, d); err != nil {
				return err
			}
		}
		return nil
	})
}

// TaskLimit is limits.tasks, its default when unset (a team stored
// before the board existed).
func (l Limits) TaskLimit() int {
	if l.Tasks <= 0 {
		return DefaultTaskLimit
	}
	return l.Tasks
}
