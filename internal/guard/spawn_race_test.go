package guard

import (
	"sync"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

// invoker records what the mailbox hands it.
type invoker struct {
	mu   sync.Mutex
	user []any
}

func (i *invoker) InvokeSystemMessage(any) {}
func (i *invoker) InvokeUserMessage(m any) {
	i.mu.Lock()
	i.user = append(i.user, m)
	i.mu.Unlock()
}
func (i *invoker) EscalateFailure(any, any) {}

// A message that reaches the mailbox before proto.actor gave it its
// dispatcher (a PID is reachable before that, and may be an earlier
// actor's name) is refused, not a nil dereference in proto.actor's
// scheduling; once registered, messages are delivered.
func TestMailboxRefusesMessagesBeforeItsActorStarted(t *testing.T) {
	m := &mailbox{Mailbox: unbounded()}
	m.PostUserMessage("early")
	m.PostSystemMessage(&actor.Stop{})
	inv := &invoker{}
	m.RegisterHandlers(inv, actor.NewSynchronizedDispatcher(10))
	m.Start()
	m.PostUserMessage("late")
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if len(inv.user) != 1 || inv.user[0] != "late" {
		t.Fatalf("delivered %v, want only the message posted after registration", inv.user)
	}
}
