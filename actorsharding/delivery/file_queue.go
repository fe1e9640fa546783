package delivery

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/protoshard/protoshard/internal/deliveryqueue"
	"github.com/protoshard/protoshard/internal/guard"
	"github.com/protoshard/protoshard/internal/option"
	"github.com/protoshard/protoshard/internal/pathseg"
	"github.com/protoshard/protoshard/messages"
)

// fileQueueOptions are what the FileQueueOption values set.
type fileQueueOptions struct {
	maxMessageSentBytes int
	compactAfterEvents  int
}

// FileQueueOption configures OpenFileQueue.
type FileQueueOption func(*fileQueueOptions) error

// WithMaxMessageSentBytes sets the largest encoded messages.MessageSent
// the queue stores. Default guard.DefaultMaxMessageSize (4 MiB less 64
// KiB): a larger message could not reach an entity on another node anyway.
func WithMaxMessageSentBytes(n int) FileQueueOption {
	return func(o *fileQueueOptions) error {
		o.maxMessageSentBytes = n
		return positiveInt("WithMaxMessageSentBytes", n)
	}
}

// WithCompactAfterEvents: the log is rewritten as one snapshot once it
// holds more than n events and more than twice the live ones (Akka's
// snapshot-every). Default 1000.
func WithCompactAfterEvents(n int) FileQueueOption {
	return func(o *fileQueueOptions) error {
		o.compactAfterEvents = n
		return positiveInt("WithCompactAfterEvents", n)
	}
}

// fileQueue is the DurableProducerQueue of OpenFileQueue.
type fileQueue struct {
	dir, path, lockPath string
	maxMessageBytes     int
	compactAfter        int

	// syncDir fsyncs a directory; a field so that a test can make it fail.
	syncDir func(dir string) error

	mu        sync.Mutex
	lock      *os.File // the claim; nil before LoadState and after Close
	log       *os.File
	size      int64 // bytes of the log
	logEvents int   // events the log holds, its snapshot's included
	state     *deliveryqueue.Content
	// broken: a failed write could not be undone; the log's tail is
	// unknown, so nothing more is written until a new holder loads it.
	broken error
	// renameUnsynced: a compaction renamed its snapshot over the log but
	// the directory's fsync failed, so a crash may bring the old log back.
	// The old log holds everything acknowledged up to the compaction, so
	// no write is acknowledged until the directory is synced.
	renameUnsynced bool
}

var _ DurableProducerQueue = (*fileQueue)(nil)

// OpenFileQueue returns the queue of producerID in dir, creating dir if
// needed. The queue is claimed, and its file read, by LoadState. An
// option with a value it does not accept fails with ErrInvalidOption.
// It is a DurableProducerQueue in one local file: it survives the
// process and the machine's crash, not the loss of its disk.
//
// The log <dir>/<producer ID>.queue (the ID escaped as one file name) is a
// sequence of records, each a uvarint length, the CRC-32C of the payload
// (4 bytes, little endian) and the payload. The first record is a
// messages.DurableProducerQueueState, the rest each hold the events of one
// write (length-prefixed messages.DurableProducerQueueEvent), so that a
// batch is stored all or none. Each write is one append and one fsync. A
// last record cut short by a crash, or whose CRC does not match, was never
// acknowledged: LoadState truncates the log there. A bad record with a
// whole one anywhere after it is no torn write but damage that would cost
// acknowledged records: LoadState fails and leaves the file as it is.
// Once the log holds more events than WithCompactAfterEvents allows and
// twice the live ones, it is replaced by a
// snapshot written to <file>.tmp, fsynced and renamed over it, and the
// directory is fsynced; should that fsync fail, writes go on in the new
// log but each fails until the directory is synced, since a crash could
// bring the old log back.
//
// LoadState claims the queue with an exclusive flock on <dir>/<producer
// ID>.lock, which the kernel releases when the process dies: while it is
// held, another holder's LoadState fails with ErrQueueFenced, and so does
// a second LoadState of the value that holds it. Close releases only the
// flock this value's LoadState took. It is safe for concurrent use.
func OpenFileQueue(dir, producerID string, opts ...FileQueueOption) (DurableProducerQueue, error) {
	q, err := openFileQueue(dir, producerID, opts...)
	if err != nil {
		return nil, err // not a nil *fileQueue in a non-nil interface
	}
	return q, nil
}

func openFileQueue(dir, producerID string, opts ...FileQueueOption) (*fileQueue, error) {
	if producerID == "" {
		return nil, errors.New("delivery: file queue: empty producer ID")
	}
	o := fileQueueOptions{maxMessageSentBytes: guard.DefaultMaxMessageSize, compactAfterEvents: 1000}
	if err := option.Apply(&o, opts, ErrInvalidOption); err != nil {
		return nil, fmt.Errorf("delivery: file queue of %q: %w", producerID, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("delivery: file queue of %q: %w", producerID, err)
	}
	name := pathseg.Escape(producerID)
	return &fileQueue{
		dir:             dir,
		path:            filepath.Join(dir, name+".queue"),
		lockPath:        filepath.Join(dir, name+".lock"),
		maxMessageBytes: o.maxMessageSentBytes,
		compactAfter:    o.compactAfterEvents,
		syncDir:         syncDir,
	}, nil
}

// MaxMessageSentBytes is the largest encoded MessageSent the queue stores.
func (q *fileQueue) MaxMessageSentBytes() int { return q.maxMessageBytes }

// errCorruptQueue: a record whose CRC matches does not decode or does not
// fit what came before, or a bad record is followed by whole ones: not a
// torn write, so LoadState refuses the file rather than cutting it.
var errCorruptQueue = errors.New("delivery: corrupt durable producer queue file")

// castagnoli is CRC-32C, as the records carry it.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// appendRecord appends one record holding payload to buf.
func appendRecord(buf, payload []byte) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(payload)))
	buf = binary.LittleEndian.AppendUint32(buf, crc32.Checksum(payload, castagnoli))
	return append(buf, payload...)
}

// nextRecord reads the record at the start of data; ok is false when
// data ends before it does or its CRC does not match.
func nextRecord(data []byte) (payload []byte, n int, ok bool) {
	crc, payload, n, ok := splitRecord(data)
	if !ok || crc32.Checksum(payload, castagnoli) != crc {
		return nil, 0, false
	}
	return payload, n, true
}

// splitRecord reads the framing of the record at the start of data,
// without checking its CRC; ok is false when data ends before it does.
func splitRecord(data []byte) (crc uint32, payload []byte, n int, ok bool) {
	length, ln := binary.Uvarint(data)
	if ln <= 0 || length > uint64(len(data)-ln) || uint64(len(data)-ln)-length < 4 {
		return 0, nil, 0, false
	}
	crc = binary.LittleEndian.Uint32(data[ln:])
	return crc, data[ln+4 : ln+4+int(length)], ln + 4 + int(length), true
}

// eventRecord reports whether payload is what append writes: one or more
// length-prefixed events filling it exactly.
func eventRecord(payload []byte) bool {
	if len(payload) == 0 {
		return false
	}
	for len(payload) > 0 {
		_, n := protowire.ConsumeBytes(payload)
		if n < 0 {
			return false
		}
		payload = payload[n:]
	}
	return true
}

// recordAfter reports whether a whole event record starts anywhere in
// data after offset from. An append writes one record at the end of the
// log, so a crash damages the last record only: a bad record with a whole
// one after it was damaged otherwise (or its length was), and records
// after it were acknowledged. Every offset is tried, since a damaged
// length says nothing of where the next record starts; the framing and
// event checks come before the CRC, so that the scan stays cheap.
func recordAfter(data []byte, from int) bool {
	for p := from + 1; p < len(data); p++ {
		crc, payload, _, ok := splitRecord(data[p:])
		if ok && eventRecord(payload) && crc32.Checksum(payload, castagnoli) == crc {
			return true
		}
	}
	return false
}

// LoadState implements DurableProducerQueue: it takes the flock, reads the
// log, and cuts a torn tail off it; a log damaged before its end is
// refused.
func (q *fileQueue) LoadState(ctx context.Context) (*messages.DurableProducerQueueState, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.lock != nil {
		// This value holds the claim: whoever calls is not its holder (or
		// is, and must not start over on what it wrote).
		return nil, fmt.Errorf("delivery: file queue %s: loaded already: %w", q.path, ErrQueueFenced)
	}
	lock, err := claimFile(q.lockPath)
	if err != nil {
		return nil, fmt.Errorf("delivery: file queue %s: %w", q.path, err)
	}
	if err := q.load(); err != nil {
		q.release()
		_ = lock.Close()
		return nil, fmt.Errorf("delivery: file queue %s: %w", q.path, err)
	}
	q.lock = lock
	return q.state.State(), nil
}

// load reads the log into q.state, creating it when there is none.
func (q *fileQueue) load() error {
	// A snapshot that was never renamed is a compaction cut short.
	if err := os.Remove(q.path + ".tmp"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	data, err := os.ReadFile(q.path)
	if errors.Is(err, os.ErrNotExist) {
		if err := q.writeSnapshot(deliveryqueue.Empty()); err != nil {
			return err
		}
		if err := q.syncDir(q.dir); err != nil {
			return err
		}
		data, err = os.ReadFile(q.path)
	}
	if err != nil {
		return err
	}
	header, n, ok := nextRecord(data)
	if !ok {
		return fmt.Errorf("%w: no complete snapshot at its start", errCorruptQueue)
	}
	var snap messages.DurableProducerQueueState
	if err := proto.Unmarshal(header, &snap); err != nil {
		return fmt.Errorf("%w: snapshot: %w", errCorruptQueue, err)
	}
	state, err := deliveryqueue.New(&snap)
	if err != nil {
		return fmt.Errorf("%w: snapshot: %w", errCorruptQueue, err)
	}
	events := state.Events()
	off := n
	for off < len(data) {
		payload, n, ok := nextRecord(data[off:])
		if !ok || !eventRecord(payload) {
			if recordAfter(data, off) {
				return fmt.Errorf("%w: bad record at offset %d before the end of the log", errCorruptQueue, off)
			}
			break
		}
		count, err := replay(state, payload)
		if err != nil {
			return fmt.Errorf("%w: record at offset %d: %w", errCorruptQueue, off, err)
		}
		events += count
		off += n
	}
	log, err := os.OpenFile(q.path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if off < len(data) {
		// A write cut short: it was never acknowledged, so it is dropped.
		if err := log.Truncate(int64(off)); err != nil {
			_ = log.Close()
			return fmt.Errorf("cutting the torn tail at offset %d: %w", off, err)
		}
		if err := log.Sync(); err != nil {
			_ = log.Close()
			return err
		}
	}
	q.log, q.size, q.logEvents, q.state, q.broken, q.renameUnsynced = log, int64(off), events, state, nil, false
	return nil
}

// replay applies the events of one record and returns how many it held.
func replay(state *deliveryqueue.Content, payload []byte) (int, error) {
	n := 0
	for len(payload) > 0 {
		event, ln := protowire.ConsumeBytes(payload)
		if ln < 0 {
			return n, protowire.ParseError(ln)
		}
		payload = payload[ln:]
		var ev messages.DurableProducerQueueEvent
		if err := proto.Unmarshal(event, &ev); err != nil {
			return n, err
		}
		var err error
		switch e := ev.GetEvent().(type) {
		case *messages.DurableProducerQueueEvent_MessageSent:
			_, err = state.StoreSent([]*messages.MessageSent{e.MessageSent})
		case *messages.DurableProducerQueueEvent_Confirmed:
			_, err = state.StoreConfirmed([]*messages.Confirmed{e.Confirmed})
		case *messages.DurableProducerQueueEvent_Cleanup:
			state.Cleanup(e.Cleanup.GetEntityIds())
		default:
			err = fmt.Errorf("unknown event %T", e)
		}
		if err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// writeSnapshot replaces the log by one holding state's snapshot only:
// written aside, fsynced and renamed over it, so that a crash leaves the
// old log or the new one. The rename lasts once the caller fsynced the
// directory.
func (q *fileQueue) writeSnapshot(state *deliveryqueue.Content) error {
	payload, err := proto.Marshal(state.Snapshot())
	if err != nil {
		return err
	}
	tmp := q.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(appendRecord(nil, payload))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, q.path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// syncDir fsyncs dir, so that a rename in it lasts a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// append writes events as one record and fsyncs, then commit changes the
// content; a failed append is cut off again, so the log's tail stays whole.
func (q *fileQueue) append(events []*messages.DurableProducerQueueEvent, commit func()) error {
	if len(events) == 0 {
		return nil
	}
	var payload []byte
	for _, ev := range events {
		b, err := proto.Marshal(ev)
		if err != nil {
			return err
		}
		payload = protowire.AppendBytes(payload, b)
	}
	record := appendRecord(nil, payload)
	_, err := q.log.WriteAt(record, q.size)
	if err == nil {
		err = q.log.Sync()
	}
	if err != nil {
		if terr := q.log.Truncate(q.size); terr != nil {
			q.broken = fmt.Errorf("a failed write (%w) could not be cut off: %w", err, terr)
		}
		return err
	}
	q.size += int64(len(record))
	q.logEvents += len(events)
	commit()
	if q.logEvents > q.compactAfter && q.logEvents > 2*q.state.Events() {
		// A compaction that fails leaves the log as it is; the next write
		// tries again.
		_ = q.compact()
	}
	return nil
}

// compact replaces the log by a snapshot of the content and reopens it.
// Once the rename is done the old log is unlinked: whatever the
// directory's fsync returns, later writes must go to the new one.
func (q *fileQueue) compact() error {
	if err := q.writeSnapshot(q.state); err != nil {
		return err
	}
	q.renameUnsynced = q.syncDir(q.dir) != nil
	log, err := os.OpenFile(q.path, os.O_RDWR, 0)
	if err != nil {
		q.broken = fmt.Errorf("reopening the log after compaction: %w", err)
		return err
	}
	size, err := log.Seek(0, io.SeekEnd)
	if err != nil {
		_ = log.Close()
		q.broken = fmt.Errorf("reopening the log after compaction: %w", err)
		return err
	}
	_ = q.log.Close()
	q.log, q.size, q.logEvents = log, size, q.state.Events()
	return nil
}

// write runs f while the queue is claimed and whole.
func (q *fileQueue) write(ctx context.Context, f func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.lock == nil:
		return fmt.Errorf("file queue %s: %w", q.path, errQueueNotClaimed)
	case q.broken != nil:
		return fmt.Errorf("delivery: file queue %s: %w", q.path, q.broken)
	case q.renameUnsynced:
		if err := q.syncDir(q.dir); err != nil {
			return fmt.Errorf("delivery: file queue %s: syncing the directory after compaction: %w", q.path, err)
		}
		q.renameUnsynced = false
	}
	if err := f(); err != nil {
		return fmt.Errorf("delivery: file queue %s: %w", q.path, err)
	}
	return nil
}

// StoreMessageSent implements DurableProducerQueue.
func (q *fileQueue) StoreMessageSent(ctx context.Context, sent []*messages.MessageSent) error {
	for _, m := range sent {
		if n := proto.Size(m); n > q.maxMessageBytes {
			return fmt.Errorf("delivery: file queue %s: entity %q seqNr %d: %d bytes, over %d: %w", q.path,
				m.GetEntityId(), m.GetSeqNr(), n, q.maxMessageBytes, ErrMessageTooLarge)
		}
	}
	clones := deliveryqueue.CloneSent(sent)
	return q.write(ctx, func() error {
		change, err := q.state.PlanSent(clones)
		if err != nil {
			return err
		}
		events := make([]*messages.DurableProducerQueueEvent, len(change.Added))
		for i, m := range change.Added {
			events[i] = &messages.DurableProducerQueueEvent{Event: &messages.DurableProducerQueueEvent_MessageSent{MessageSent: m}}
		}
		return q.append(events, func() { q.state.Commit(change) })
	})
}

// StoreMessageConfirmed implements DurableProducerQueue.
func (q *fileQueue) StoreMessageConfirmed(ctx context.Context, confirmed []*messages.Confirmed) error {
	return q.write(ctx, func() error {
		change, err := q.state.PlanConfirmed(confirmed)
		if err != nil {
			return err
		}
		events := make([]*messages.DurableProducerQueueEvent, len(change.Confirmed))
		for i, c := range change.Confirmed {
			events[i] = &messages.DurableProducerQueueEvent{Event: &messages.DurableProducerQueueEvent_Confirmed{Confirmed: c}}
		}
		return q.append(events, func() { q.state.Commit(change) })
	})
}

// Cleanup implements DurableProducerQueue.
func (q *fileQueue) Cleanup(ctx context.Context, entityIDs []string) error {
	return q.write(ctx, func() error {
		held := q.state.Held(entityIDs)
		if len(held) == 0 {
			return nil
		}
		ev := &messages.DurableProducerQueueEvent{Event: &messages.DurableProducerQueueEvent_Cleanup{Cleanup: &messages.Cleanup{EntityIds: held}}}
		return q.append([]*messages.DurableProducerQueueEvent{ev}, func() { q.state.Cleanup(held) })
	})
}

// release closes the log.
func (q *fileQueue) release() {
	if q.log != nil {
		_ = q.log.Close()
	}
	q.log, q.state = nil, nil
}

// Close implements DurableProducerQueue: it closes the log and releases
// the flock, if this value's LoadState took it.
func (q *fileQueue) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.lock == nil {
		return nil
	}
	q.release()
	err := q.lock.Close() // closing the file releases its flock
	q.lock = nil
	return err
}
