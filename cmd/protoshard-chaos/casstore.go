package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/protoshard/protoshard/internal/backoff"
	"github.com/protoshard/protoshard/internal/shard"
)

// casStore keeps one value per key in a directory, each replaced only by a
// compare-and-set on its version: the entities' database in a reliable
// run. It lives in the run's directory, so it survives kill -9 of a node
// and Consul restarts (Consul KV would lose it).
//
// A value is the file <key>.state: a header (magic, version, CRC-32C and
// length of the data) and the data. It is replaced by writing
// <key>.state.tmp, fsync and rename, so a reader sees the old file or the
// new one, whole; a tmp file torn by a kill is overwritten by the next
// writer. Writers of one key take flock on <key>.lock, which is never
// replaced (a lock on the state file would be lost with its inode at the
// rename). The lock is held only for one read-compare-write, and taken
// without blocking, retried for at most lockWait: a writer frozen by
// SIGSTOP while it holds the lock makes the others fail with errStoreBusy
// until it is thawed (or killed: the kernel drops its locks), never wait
// for ever.
type casStore struct {
	dir      string
	lockWait time.Duration
}

var (
	// errStoreConflict: the stored version is not the one the writer read;
	// another writer (another incarnation of the entity) wrote since.
	errStoreConflict = errors.New("state store: version conflict")
	// errStoreBusy: the key's lock stayed taken for lockWait.
	errStoreBusy = errors.New("state store: lock busy")
	// errStoreCorrupt: a state file whose header or checksum is wrong.
	errStoreCorrupt = errors.New("state store: corrupt state file")
)

const (
	casMagic     = "PSCHAOS1"
	casHeaderLen = len(casMagic) + 8 + 4 + 4 // magic, version, crc, length
	stateSuffix  = ".state"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// lockRetry spaces the attempts to take a busy lock.
var lockRetry = backoff.Exponential{Min: time.Millisecond, Max: 50 * time.Millisecond, RandomFactor: 0.5}

func openCASStore(dir string, lockWait time.Duration) (*casStore, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("state store: %w", err)
	}
	return &casStore{dir: dir, lockWait: lockWait}, nil
}

// path is the file of key with suffix; shard.EntityName escapes '/'
// and '%', so every key has a file of its own.
func (s *casStore) path(key, suffix string) string {
	return filepath.Join(s.dir, shard.EntityName(key)+suffix)
}

// Load returns key's data and version; version 0 and no data when it was
// never written.
func (s *casStore) Load(key string) ([]byte, uint64, error) {
	return readStateFile(s.path(key, stateSuffix))
}

func readStateFile(path string) ([]byte, uint64, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("state store: %w", err)
	}
	return decodeStateFile(b, path)
}

func decodeStateFile(b []byte, path string) ([]byte, uint64, error) {
	if len(b) < casHeaderLen || string(b[:len(casMagic)]) != casMagic {
		return nil, 0, fmt.Errorf("%s: bad header: %w", path, errStoreCorrupt)
	}
	h := b[len(casMagic):casHeaderLen]
	version := binary.BigEndian.Uint64(h[0:8])
	sum := binary.BigEndian.Uint32(h[8:12])
	n := binary.BigEndian.Uint32(h[12:16])
	data := b[casHeaderLen:]
	if uint32(len(data)) != n || crc32.Checksum(data, castagnoli) != sum {
		return nil, 0, fmt.Errorf("%s: length or checksum wrong: %w", path, errStoreCorrupt)
	}
	return data, version, nil
}

func encodeStateFile(version uint64, data []byte) []byte {
	b := make([]byte, casHeaderLen, casHeaderLen+len(data))
	copy(b, casMagic)
	h := b[len(casMagic):]
	binary.BigEndian.PutUint64(h[0:8], version)
	binary.BigEndian.PutUint32(h[8:12], crc32.Checksum(data, castagnoli))
	binary.BigEndian.PutUint32(h[12:16], uint32(len(data)))
	return append(b, data...)
}

// CompareAndSet stores data as key's value if its version is still
// expected, and returns the new version (expected+1). errStoreConflict:
// another writer came first; errStoreBusy: the lock stayed taken.
func (s *casStore) CompareAndSet(key string, expected uint64, data []byte) (uint64, error) {
	unlock, err := s.lock(key)
	if err != nil {
		return 0, err
	}
	defer unlock()
	path := s.path(key, stateSuffix)
	_, current, err := readStateFile(path)
	if err != nil {
		return 0, err
	}
	if current != expected {
		return 0, fmt.Errorf("%s: stored version %d, expected %d: %w", key, current, expected, errStoreConflict)
	}
	next := expected + 1
	if err := writeFileSynced(path+".tmp", encodeStateFile(next, data)); err != nil {
		return 0, err
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return 0, fmt.Errorf("state store: %w", err)
	}
	return next, nil
}

func writeFileSynced(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("state store: %w", err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("state store: %w", err)
	}
	return nil
}

// lock takes key's lock within lockWait and returns its release.
func (s *casStore) lock(key string) (func(), error) {
	f, err := os.OpenFile(s.path(key, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("state store: %w", err)
	}
	deadline := time.Now().Add(s.lockWait)
	for attempt := 0; ; attempt++ {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				_ = f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			_ = f.Close()
			return nil, fmt.Errorf("state store: lock %s: %w", key, err)
		}
		wait := lockRetry.Delay(attempt)
		if time.Now().Add(wait).After(deadline) {
			_ = f.Close()
			return nil, fmt.Errorf("state store: %s locked for %v: %w", key, s.lockWait, errStoreBusy)
		}
		time.Sleep(wait)
	}
}
