package core

import "context"

// TurnFunc runs one model turn over a copy of the member's committed
// history and returns the full new history. It runs outside the team lock.
type TurnFunc func(ctx context.Context, history []Entry) (TurnOutcome, error)

// Send stores body (trimmed) as the next letter of recipient's inbox (send_message, SPEC §4.4).
func (s *Service) Send(ctx context.Context, teamName, sender, recipient, body, idemKey string) (SendResult, error) {
	panic("todo")
}

// Inbox returns member's letters in order; reading deletes nothing.
func (s *Service) Inbox(ctx context.Context, teamName, member string) ([]Message, error) { panic("todo") }

// PrepareInbox returns history plus every letter not yet in it (prepare_inbox, SPEC §4.5).
func (s *Service) PrepareInbox(ctx context.Context, teamName, member string, history []Entry) ([]Entry, error) {
	panic("todo")
}

// RunTurn runs one turn of member (run_teammate, SPEC §4.6, §13.7, §13.9).
func (s *Service) RunTurn(ctx context.Context, teamName, member string, fn TurnFunc) (TurnResult, error) {
	panic("todo")
}

// OpenRequest opens a plan or shutdown request (open_request, SPEC §4.9).
func (s *Service) OpenRequest(ctx context.Context, teamName, sender, target, kind, payload, idemKey string) (OpenResult, error) {
	panic("todo")
}

// Reply answers a request as actor (reply_request, SPEC §4.10).
func (s *Service) Reply(ctx context.Context, teamName, requestID, actor string, approve bool, feedback, idemKey string) (ReplyResult, error) {
	panic("todo")
}

// Consume matches every letter of member's inbox (consume_responses, SPEC §4.12, §13.6).
func (s *Service) Consume(ctx context.Context, teamName, member string) ([]MatchResult, error) {
	panic("todo")
}

// Requests lists a team's requests in id order.
func (s *Service) Requests(ctx context.Context, teamName string) ([]Request, error) { panic("todo") }

// Request returns one request.
func (s *Service) Request(ctx context.Context, teamName, id string) (Request, error) { panic("todo") }

func (s *Service) recover(ctx context.Context, t *team) error { return nil }

