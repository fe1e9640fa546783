package delivery

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/protoshard/protoshard/internal/deliveryqueue"
	"github.com/protoshard/protoshard/messages"
)

func sentFor(entity string, seq int64) *messages.MessageSent {
	a, _ := anypb.New(wrapperspb.String(fmt.Sprintf("%s-%d", entity, seq)))
	return &messages.MessageSent{EntityId: entity, ProducerIncarnation: 5, SeqNr: seq, TimestampMs: seq, Message: a}
}

func openLoaded(t *testing.T, dir string, opts ...FileQueueOption) (*fileQueue, *messages.DurableProducerQueueState) {
	t.Helper()
	q, err := openFileQueue(dir, "p/1", opts...)
	if err != nil {
		t.Fatal(err)
	}
	st, err := q.LoadState(context.Background())
	if err != nil {
		t.Fatalf("LoadState: %v", err)
	}
	t.Cleanup(func() { _ = q.Close() })
	return q, st
}

func seqsOf(st *messages.DurableProducerQueueState) []string {
	var out []string
	for _, m := range st.GetUnconfirmed() {
		out = append(out, fmt.Sprintf("%s/%d", m.GetEntityId(), m.GetSeqNr()))
	}
	return out
}

// A write cut short by a crash is dropped at load, the log is cut there,
// and later writes append after the cut.
func TestFileQueueTornTail(t *testing.T) {
	ctx := context.Background()
	for _, damage := range []struct {
		name string
		// do damages the log, whose last record spans [start, size).
		do func(t *testing.T, path string, start, size int64)
	}{
		{"record cut short", func(t *testing.T, path string, start, size int64) {
			if err := os.Truncate(path, size-3); err != nil {
				t.Fatal(err)
			}
		}},
		{"bytes of the last record changed", func(t *testing.T, path string, start, size int64) {
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt([]byte{0xff, 0xfe}, size-5); err != nil {
				t.Fatal(err)
			}
		}},
		{"last record zeroed", func(t *testing.T, path string, start, size int64) {
			// Blocks allocated for the write but never written read as zeros,
			// which frame as empty records.
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt(make([]byte, size-start), start); err != nil {
				t.Fatal(err)
			}
		}},
		{"garbage appended", func(t *testing.T, path string, start, size int64) {
			f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.Write([]byte{0x80, 0x80, 0x80}); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(damage.name, func(t *testing.T) {
			dir := t.TempDir()
			q, _ := openLoaded(t, dir)
			if err := q.StoreMessageSent(ctx, []*messages.MessageSent{sentFor("a", 1), sentFor("b", 1)}); err != nil {
				t.Fatal(err)
			}
			sizeBefore := q.size
			if err := q.StoreMessageSent(ctx, []*messages.MessageSent{sentFor("a", 2), sentFor("a", 3)}); err != nil {
				t.Fatal(err)
			}
			size := q.size
			if err := q.Close(); err != nil {
				t.Fatal(err)
			}
			damage.do(t, q.path, sizeBefore, size)
			want := []string{"a/1", "a/2", "a/3", "b/1"}
			wantSize := size
			if damage.name != "garbage appended" {
				// The last batch goes as a whole.
				want, wantSize = []string{"a/1", "b/1"}, sizeBefore
			}
			q2, st := openLoaded(t, dir)
			if got := seqsOf(st); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("loaded %v, want %v", got, want)
			}
			if fi, err := os.Stat(q.path); err != nil || fi.Size() != wantSize {
				t.Fatalf("log of %v bytes (%v), want cut to %d", fi.Size(), err, wantSize)
			}
			next := int64(len(want)) // want holds b/1 and a/1.., so a continues at len(want)
			if err := q2.StoreMessageSent(ctx, []*messages.MessageSent{sentFor("a", next)}); err != nil {
				t.Fatal(err)
			}
			_ = q2.Close()
			_, st = openLoaded(t, dir)
			if got := len(st.GetUnconfirmed()); got != len(want)+1 {
				t.Fatalf("after a write behind the cut: %v", seqsOf(st))
			}
		})
	}
}

// A bad record with a whole record after it is no torn write: the
// records after it were acknowledged, so LoadState refuses the log and
// leaves it as it is, whether the damage is in the payload or in the
// length, which then points anywhere.
func TestFileQueueDamageBeforeTheEndIsRefused(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		// damage changes the log, whose second event record spans
		// [start, end).
		damage func(log []byte, start, end int64)
	}{
		{"payload byte changed", func(log []byte, start, end int64) { log[(start+end)/2] ^= 0xAA }},
		{"CRC changed", func(log []byte, start, end int64) { log[start+1] ^= 0x01 }},
		{"length grown past the end of the log", func(log []byte, start, end int64) { log[start] = 0x7f }},
		{"length shrunk", func(log []byte, start, end int64) { log[start] = 0x02 }},
		{"record zeroed", func(log []byte, start, end int64) { clear(log[start:end]) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			q, _ := openLoaded(t, dir)
			var ends []int64
			for seq := int64(1); seq <= 3; seq++ {
				if err := q.StoreMessageSent(ctx, []*messages.MessageSent{sentFor("a", seq)}); err != nil {
					t.Fatal(err)
				}
				ends = append(ends, q.size)
			}
			if err := q.Close(); err != nil {
				t.Fatal(err)
			}
			if ends[1]-ends[0] >= 0x7f {
				t.Fatalf("a record of %d bytes: its length does not fit the one byte the test changes", ends[1]-ends[0])
			}
			log, err := os.ReadFile(q.path)
			if err != nil {
				t.Fatal(err)
			}
			tc.damage(log, ends[0], ends[1])
			if err := os.WriteFile(q.path, log, 0o644); err != nil {
				t.Fatal(err)
			}
			q2, err := openFileQueue(dir, "p/1")
			if err != nil {
				t.Fatal(err)
			}
			if st, err := q2.LoadState(ctx); !errors.Is(err, errCorruptQueue) {
				t.Fatalf("LoadState: %v, %v; want errCorruptQueue", seqsOf(st), err)
			}
			if after, err := os.ReadFile(q.path); err != nil || !bytes.Equal(after, log) {
				t.Fatalf("the refused log changed: %d bytes, was %d (%v)", len(after), len(log), err)
			}
			// The failed load released the claim.
			q3, err := openFileQueue(dir, "p/1")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := q3.LoadState(ctx); !errors.Is(err, errCorruptQueue) {
				t.Fatalf("LoadState again: %v, want errCorruptQueue", err)
			}
		})
	}
}

// A damaged snapshot is no torn tail: the file is refused, not emptied.
func TestFileQueueCorruptSnapshotIsRefused(t *testing.T) {
	dir := t.TempDir()
	q, _ := openLoaded(t, dir)
	_ = q.Close()
	if err := os.WriteFile(q.path, []byte{0x05, 1, 2, 3}, 0o644); err != nil {
		t.Fatal(err)
	}
	q2, err := openFileQueue(dir, "p/1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q2.LoadState(context.Background()); !errors.Is(err, errCorruptQueue) {
		t.Fatalf("LoadState of a damaged snapshot: %v, want errCorruptQueue", err)
	}
	// The failed load released the claim.
	_ = os.WriteFile(q.path, nil, 0o644)
	if err := os.Remove(q.path); err != nil {
		t.Fatal(err)
	}
	openLoaded(t, dir)
}

// The log is rewritten as a snapshot once it holds more than
// WithCompactAfterEvents events and twice the live ones; the content stays,
// and a compaction cut short before its rename is ignored.
func TestFileQueueCompaction(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	opts := WithCompactAfterEvents(20)
	q, _ := openLoaded(t, dir, opts)
	maxSize := int64(0)
	for seq := int64(1); seq <= 200; seq++ {
		if err := q.StoreMessageSent(ctx, []*messages.MessageSent{sentFor("a", seq), sentFor("b", seq)}); err != nil {
			t.Fatal(err)
		}
		if seq > 1 {
			if err := q.StoreMessageConfirmed(ctx, []*messages.Confirmed{{EntityId: "a", ProducerIncarnation: 5, SeqNr: seq - 1}}); err != nil {
				t.Fatal(err)
			}
		}
		maxSize = max(maxSize, q.size)
	}
	// Live: a/200 and b/1..200 = 203 events; the log never holds much more
	// than twice that.
	if q.logEvents > 2*q.state.Events()+3 {
		t.Fatalf("log holds %d events for %d live", q.logEvents, q.state.Events())
	}
	one := int64(proto.Size(sentFor("b", 100)))
	if maxSize > 3*203*(one+8) {
		t.Fatalf("log grew to %d bytes for 203 live events of about %d bytes", maxSize, one)
	}
	_ = q.Close()
	// A snapshot left aside by a crash before its rename.
	if err := os.WriteFile(q.path+".tmp", []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, st := openLoaded(t, dir, opts)
	if n := len(st.GetUnconfirmed()); n != 201 {
		t.Fatalf("loaded %d unconfirmed, want 201", n)
	}
	if st.GetEntities()[0].GetConfirmedSeqNr() != 199 || st.GetUnconfirmed()[0].GetSeqNr() != 200 {
		t.Fatalf("entity a: %v, first unconfirmed %v", st.GetEntities()[0], st.GetUnconfirmed()[0])
	}
	if _, err := os.Stat(q.path + ".tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the leftover snapshot is still there: %v", err)
	}
}

// The flock fences a second holder until the first closes, and a holder
// that did not load cannot write.
func TestFileQueueClaim(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	first, _ := openLoaded(t, dir)
	second, err := openFileQueue(dir, "p/1")
	if err != nil {
		t.Fatal(err)
	}
	if err := second.StoreMessageSent(ctx, []*messages.MessageSent{sentFor("a", 1)}); err == nil {
		t.Fatal("a write without LoadState succeeded")
	}
	if _, err := second.LoadState(ctx); !errors.Is(err, ErrQueueFenced) {
		t.Fatalf("second LoadState: %v, want ErrQueueFenced", err)
	}
	// Another producer ID is another queue.
	other, err := openFileQueue(dir, "p/2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.LoadState(ctx); err != nil {
		t.Fatalf("LoadState of another producer's queue: %v", err)
	}
	_ = other.Close()
	_ = first.Close()
	if _, err := second.LoadState(ctx); err != nil {
		t.Fatalf("LoadState after the first closed: %v", err)
	}
	_ = second.Close()
}

// A compaction whose directory fsync fails after the rename still moves
// the queue to the new log, and no write is acknowledged until the
// directory is synced: what a later load finds is exactly what was
// acknowledged.
func TestFileQueueCompactionWithFailingDirectorySync(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name        string
		failures    int // directory syncs that fail; -1: until the end of the writes
		wantRefused bool
	}{
		{"sync fails once", 1, false},
		{"sync keeps failing", -1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			q, _ := openLoaded(t, dir, WithCompactAfterEvents(4))
			var mu sync.Mutex
			failures, calls := tc.failures, 0
			q.syncDir = func(dir string) error {
				mu.Lock()
				defer mu.Unlock()
				calls++
				if failures != 0 {
					failures--
					return errors.New("opening the directory: too many open files")
				}
				return syncDir(dir)
			}
			acked := deliveryqueue.Empty()
			refused := 0
			sent := func(batch ...*messages.MessageSent) {
				if err := q.StoreMessageSent(ctx, batch); err != nil {
					refused++
					return
				}
				if _, err := acked.StoreSent(batch); err != nil {
					t.Fatal(err)
				}
			}
			confirmed := func(c *messages.Confirmed) {
				if err := q.StoreMessageConfirmed(ctx, []*messages.Confirmed{c}); err != nil {
					refused++
					return
				}
				if _, err := acked.StoreConfirmed([]*messages.Confirmed{c}); err != nil {
					t.Fatal(err)
				}
			}
			// The fifth event compacts: five in the log, two live.
			for seq := int64(1); seq <= 3; seq++ {
				sent(sentFor("a", seq))
				confirmed(&messages.Confirmed{EntityId: "a", ProducerIncarnation: 5, SeqNr: seq})
			}
			for seq := int64(1); seq <= 6; seq++ {
				sent(sentFor("b", seq))
			}
			if calls == 0 {
				t.Fatal("no compaction ran")
			}
			if (refused > 0) != tc.wantRefused {
				t.Fatalf("%d writes refused while the directory sync failed", refused)
			}
			mu.Lock()
			failures = 0
			mu.Unlock()
			var all []*messages.MessageSent
			for seq := int64(1); seq <= 7; seq++ {
				all = append(all, sentFor("b", seq))
			}
			if err := q.StoreMessageSent(ctx, all); err != nil {
				t.Fatalf("write after the directory synced again: %v", err)
			}
			if _, err := acked.StoreSent(all); err != nil {
				t.Fatal(err)
			}
			if err := q.Close(); err != nil {
				t.Fatal(err)
			}
			_, st := openLoaded(t, dir, WithCompactAfterEvents(4))
			if want := acked.Snapshot(); !proto.Equal(st, want) {
				t.Fatalf("loaded %v, want what was acknowledged: %v", seqsOf(st), seqsOf(want))
			}
		})
	}
}
