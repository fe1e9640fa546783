package delivery

import (
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/protoshard/protoshard/internal/testpb"
)

// queueStep is one call to the send queue and its result: "offer e"
// (wake, queued, full or closed), "take" and "close" (the entity IDs
// returned, space-separated), "hold n" (no result).
type queueStep struct{ do, want string }

var offerNames = map[offerResult]string{offerQueued: "queued", offerQueuedWake: "wake", offerFull: "full", offerClosed: "closed"}

func runQueue(t *testing.T, limit int, steps []queueStep) {
	t.Helper()
	q := newSendQueue(limit)
	for i, s := range steps {
		verb, arg, _ := strings.Cut(s.do, " ")
		var got string
		switch verb {
		case "offer":
			got = offerNames[q.offer(queuedSend{entityID: arg})]
		case "take", "close":
			batch := q.take
			if verb == "close" {
				batch = q.close
			}
			var ids []string
			for _, g := range batch() {
				ids = append(ids, g.entityID)
			}
			got = strings.Join(ids, " ")
		case "hold":
			n, err := strconv.Atoi(arg)
			if err != nil {
				t.Fatal(err)
			}
			q.hold(n)
		default:
			t.Fatalf("step %d: unknown %q", i, s.do)
		}
		if got != s.want {
			t.Fatalf("step %d: %s = %q, want %q", i, s.do, got, s.want)
		}
	}
}

func TestSendQueue(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit int
		steps []queueStep
	}{
		{"one wake-up until taken, order kept", 10, []queueStep{
			{"offer a", "wake"},
			{"offer b", "queued"},
			{"take", "a b"},
			{"offer c", "wake"},
			{"take", "c"},
			{"take", ""},
		}},
		{"queued, taken and held count against the limit", 3, []queueStep{
			{"offer a", "wake"},
			{"offer b", "queued"},
			{"take", "a b"},
			{"offer c", "wake"}, // a and b not yet accounted for
			{"offer d", "full"},
			{"hold 0", ""}, // both sent
			{"offer d", "queued"},
			{"take", "c d"},
			{"hold 1", ""}, // one of them buffered
			{"offer e", "wake"},
			{"offer f", "queued"},
			{"offer g", "full"},
			{"take", "e f"},
			{"hold 3", ""}, // e and f buffered too
			{"offer g", "full"},
			{"hold 2", ""}, // one sent
			{"offer g", "wake"},
		}},
		{"close returns what waits and admits nothing", 10, []queueStep{
			{"offer a", "wake"},
			{"take", "a"},
			{"offer b", "wake"},
			{"offer c", "queued"},
			{"close", "b c"},
			{"offer d", "closed"},
			{"take", ""},
			{"close", ""},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { runQueue(t, tc.limit, tc.steps) })
	}
}

// TestSendQueueReleasesTakenMessages: the batch taken before is cleared
// when its array is reused, so the queue does not keep messages alive
// that the controller sent long ago.
func TestSendQueueReleasesTakenMessages(t *testing.T) {
	q := newSendQueue(10)
	q.offer(queuedSend{entityID: "a", msg: &testpb.Ping{}, payload: packed{url: "u", value: []byte{1}}})
	first := q.take()
	q.offer(queuedSend{entityID: "b"})
	q.take()
	if s := first[:1][0]; s.msg != nil || s.payload.value != nil {
		t.Fatal("the first batch still holds its message after the next take")
	}
}

// TestSendQueueConcurrent: senders offer while the controller takes and
// holds; every queued send is taken once, each sender's in its order, and
// a wake-up is asked for whenever sends wait with none on its way.
func TestSendQueueConcurrent(t *testing.T) {
	const senders, each = 4, 5000
	q := newSendQueue(100)
	wake := make(chan struct{}, 1)
	done := make(chan struct{})
	for g := range senders {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := 0; i < each; {
				switch q.offer(queuedSend{entityID: strconv.Itoa(g) + "/" + strconv.Itoa(i)}) {
				case offerQueuedWake:
					wake <- struct{}{} // at most one on its way
					i++
				case offerQueued:
					i++
				case offerFull:
					runtime.Gosched()
				case offerClosed:
					t.Error("closed")
					return
				}
			}
		}()
	}
	next := make([]int, senders)
	taken := 0
	for taken < senders*each {
		<-wake
		for _, s := range q.take() {
			g, i, _ := strings.Cut(s.entityID, "/")
			gi, _ := strconv.Atoi(g)
			ii, _ := strconv.Atoi(i)
			if ii != next[gi] {
				t.Fatalf("sender %d: took %d, want %d", gi, ii, next[gi])
			}
			next[gi]++
			taken++
		}
		q.hold(0)
	}
	for range senders {
		<-done
	}
	if rest := q.close(); len(rest) != 0 {
		t.Fatalf("%d sends left", len(rest))
	}
}
