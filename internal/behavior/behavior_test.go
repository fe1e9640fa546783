package behavior

import (
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/internal/testsupport"
)

// switcher answers each string with the name of the state that received
// it and of the current state, then becomes the state the string names.
type switcher struct{ states States }

func (s *switcher) Receive(ctx actor.Context) {
	if s.states.Name() == "" {
		s.become(ctx, "a")
	}
	s.states.Receive(ctx)
}

func (s *switcher) become(ctx actor.Context, name string) {
	s.states.Become(ctx, "switcher", name, func(ctx actor.Context) {
		if next, ok := ctx.Message().(string); ok {
			ctx.Respond(name + ":" + s.states.Name())
			s.become(ctx, next)
		}
	}, slog.String("actor", "test"))
}

// TestStates: each message reaches the current state, and each change of
// state, but neither the first state nor a Become to the current one, is
// logged once at DEBUG with from, to and the caller's attributes.
func TestStates(t *testing.T) {
	logs := &testsupport.Logs{}
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return logs.Logger() }))
	defer system.Shutdown()
	pid := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &switcher{} }))
	steps := []struct{ next, answeredBy string }{
		{"b", "a:a"},
		{"b", "b:b"}, // b to b: no change
		{"c", "b:b"},
		{"a", "c:c"},
		{"a", "a:a"},
	}
	for _, step := range steps {
		res, err := system.Root.RequestFuture(pid, step.next, 10*time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		if res != step.answeredBy {
			t.Fatalf("sent %q: answered %v, want %q", step.next, res, step.answeredBy)
		}
	}
	want := [][2]string{{"a", "b"}, {"b", "c"}, {"c", "a"}}
	var got []testsupport.LogLine
	for _, l := range logs.Lines() {
		if l.Message == "switcher state change" {
			got = append(got, l)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("logged %d state changes, want %d: %v", len(got), len(want), got)
	}
	for i, l := range got {
		if l.Level != slog.LevelDebug || l.Attrs["from"] != want[i][0] || l.Attrs["to"] != want[i][1] || l.Attrs["actor"] != "test" {
			t.Errorf("change %d logged as %s, want DEBUG from=%s to=%s actor=test", i, l, want[i][0], want[i][1])
		}
	}
}
