package membership

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// inboundStream is a gRPC server stream that delivers a ConnectRequest
// from an actor system, then each message put on msgs, then ends when
// msgs is closed.
type inboundStream struct {
	systemID  string
	connected bool
	msgs      chan *remote.RemoteMessage
}

func (s *inboundStream) RecvMsg(m any) error {
	if !s.connected {
		s.connected = true
		m.(*remote.RemoteMessage).MessageType = &remote.RemoteMessage_ConnectRequest{ConnectRequest: &remote.ConnectRequest{
			ConnectionType: &remote.ConnectRequest_ServerConnection{ServerConnection: &remote.ServerConnection{SystemId: s.systemID}},
		}}
		return nil
	}
	next, ok := <-s.msgs
	if !ok {
		return io.EOF
	}
	m.(*remote.RemoteMessage).MessageType = next.MessageType
	return nil
}

func (s *inboundStream) SetHeader(metadata.MD) error  { return nil }
func (s *inboundStream) SendHeader(metadata.MD) error { return nil }
func (s *inboundStream) SetTrailer(metadata.MD)       {}
func (s *inboundStream) Context() context.Context     { return context.Background() }
func (s *inboundStream) SendMsg(any) error            { return nil }

// A quarantined actor system whose connection is still open (a process
// paused with its connection up, whose queued messages would come on it
// when it resumes) stays quarantined past the window, as Akka keeps a
// quarantined association in use; once the connection has ended, it gets
// a window more, then ends with the next write.
func TestQuarantineLastsWhileConnected(t *testing.T) {
	system := actor.NewActorSystem()
	q := NewQuarantine()
	q.install(system, time.Hour)
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0
	q.now = func() time.Time { return now }
	paused := Member{ID: "paused", Address: "10.0.0.1:7000", SystemID: "paused-system"}
	crashed := Member{ID: "crashed", Address: "10.0.0.2:7000", SystemID: "crashed-system"}

	stream := &inboundStream{systemID: paused.SystemID, msgs: make(chan *remote.RemoteMessage)}
	received := make(chan error, 1)
	ended := make(chan error, 1)
	go func() {
		ended <- q.serverInterceptor(nil, stream, &grpc.StreamServerInfo{}, func(_ any, ss grpc.ServerStream) error {
			for {
				err := ss.RecvMsg(&remote.RemoteMessage{})
				received <- err
				if err != nil {
					return err
				}
			}
		})
	}()
	if err := <-received; err != nil { // the ConnectRequest
		t.Fatal(err)
	}
	q.removed(paused, false)
	q.removed(crashed, false)

	now = t0.Add(2 * time.Hour)
	q.removed(Member{ID: "later", SystemID: "later-system"}, false) // a write: prunes
	if !q.systemBlocked(paused.SystemID) {
		t.Fatal("the quarantine of a system with an open connection ended")
	}
	if q.systemBlocked(crashed.SystemID) || q.addressBlocked(crashed.Address) {
		t.Fatal("the quarantine of a system without a connection outlived its window")
	}
	if q.addressBlocked(paused.Address) {
		t.Fatal("an address stayed blocked past its window (only inbound connections keep a quarantine)")
	}
	// What the paused process sends when it resumes is refused.
	stream.msgs <- &remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: &remote.MessageBatch{}}}
	if err := <-received; err == nil {
		t.Fatal("a message from the quarantined system was let through")
	}
	if err := <-ended; err == nil {
		t.Fatal("the stream of the quarantined system did not fail")
	}
	q.mu.RLock()
	open := len(q.inbound)
	q.mu.RUnlock()
	if open != 0 {
		t.Fatalf("%d connections counted after the stream ended", open)
	}

	// Pinned at the prune of t0+2h, it has a window from then.
	now = t0.Add(2*time.Hour + 59*time.Minute)
	q.removed(Member{ID: "later2", SystemID: "later2-system"}, false)
	if !q.systemBlocked(paused.SystemID) {
		t.Fatal("the quarantine ended less than a window after it was last kept")
	}
	now = t0.Add(3 * time.Hour)
	q.removed(Member{ID: "later3", SystemID: "later3-system"}, false)
	if q.systemBlocked(paused.SystemID) {
		t.Fatal("the quarantine outlived its window after the connection ended")
	}
}
