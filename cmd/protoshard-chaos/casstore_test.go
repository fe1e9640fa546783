package main

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestCASStoreConflict(t *testing.T) {
	s, err := openCASStore(t.TempDir(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	data, v, err := s.Load("e-1")
	if err != nil || v != 0 || data != nil {
		t.Fatalf("a key never written: %q version %d, %v", data, v, err)
	}
	v1, err := s.CompareAndSet("e-1", 0, []byte("one"))
	if err != nil || v1 != 1 {
		t.Fatalf("first write: version %d, %v", v1, err)
	}
	// A writer that read version 0 (an older incarnation) is refused.
	if _, err := s.CompareAndSet("e-1", 0, []byte("stale")); !errors.Is(err, errStoreConflict) {
		t.Fatalf("stale write: %v, want a conflict", err)
	}
	// So is one from the future.
	if _, err := s.CompareAndSet("e-1", 5, []byte("future")); !errors.Is(err, errStoreConflict) {
		t.Fatalf("write at version 5: %v, want a conflict", err)
	}
	v2, err := s.CompareAndSet("e-1", 1, []byte("two"))
	if err != nil || v2 != 2 {
		t.Fatalf("second write: version %d, %v", v2, err)
	}
	data, v, err = s.Load("e-1")
	if err != nil || v != 2 || string(data) != "two" {
		t.Fatalf("load: %q version %d, %v; want \"two\" version 2", data, v, err)
	}
	// Keys are apart; one with a '/' gets a file of its own.
	if _, v, _ := s.Load("e-1/x"); v != 0 {
		t.Fatalf("e-1/x has version %d before any write", v)
	}
	if _, err := s.CompareAndSet("e-1/x", 0, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if data, v, _ := s.Load("e-1"); v != 2 || string(data) != "two" {
		t.Fatalf("e-1 changed by a write of e-1/x: %q version %d", data, v)
	}
}

// TestCASStoreTornTmp: a writer killed while it wrote its tmp file leaves
// it torn; readers never see it and the next writer replaces it.
func TestCASStoreTornTmp(t *testing.T) {
	dir := t.TempDir()
	s, err := openCASStore(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CompareAndSet("e-1", 0, []byte("kept")); err != nil {
		t.Fatal(err)
	}
	torn := encodeStateFile(2, []byte("never renamed"))[:casHeaderLen+3]
	if err := os.WriteFile(s.path("e-1", stateSuffix)+".tmp", torn, 0o644); err != nil {
		t.Fatal(err)
	}
	data, v, err := s.Load("e-1")
	if err != nil || v != 1 || string(data) != "kept" {
		t.Fatalf("load beside a torn tmp file: %q version %d, %v", data, v, err)
	}
	if _, err := s.CompareAndSet("e-1", 1, []byte("next")); err != nil {
		t.Fatalf("write after a torn tmp file: %v", err)
	}
	if data, v, err := s.Load("e-1"); err != nil || v != 2 || string(data) != "next" {
		t.Fatalf("load: %q version %d, %v", data, v, err)
	}
	if _, err := os.Stat(s.path("e-1", stateSuffix) + ".tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the tmp file outlived the rename: %v", err)
	}
}

func TestCASStoreCorruptFile(t *testing.T) {
	s, err := openCASStore(t.TempDir(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CompareAndSet("e-1", 0, []byte("data")); err != nil {
		t.Fatal(err)
	}
	path := s.path("e-1", stateSuffix)
	b, _ := os.ReadFile(path)
	for name, bad := range map[string][]byte{
		"flipped byte": append(append([]byte{}, b[:len(b)-1]...), b[len(b)-1]^1),
		"cut short":    b[:len(b)-2],
		"no header":    []byte("data"),
	} {
		if err := os.WriteFile(path, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Load("e-1"); !errors.Is(err, errStoreCorrupt) {
			t.Errorf("%s: load gave %v, want corrupt", name, err)
		}
		if _, err := s.CompareAndSet("e-1", 1, []byte("over")); !errors.Is(err, errStoreCorrupt) {
			t.Errorf("%s: a write over a corrupt file gave %v, want corrupt", name, err)
		}
	}
}

// TestCASStoreConcurrentWriters: writers that each read, add one and write
// back, retrying on conflicts, lose no increment; flock is per open file,
// so goroutines contend as processes would.
func TestCASStoreConcurrentWriters(t *testing.T) {
	s, err := openCASStore(t.TempDir(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 4, 50
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		conflicts int
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for done := 0; done < each; {
				data, v, err := s.Load("counter")
				if err != nil {
					t.Error(err)
					return
				}
				n := 0
				if data != nil {
					n, _ = strconv.Atoi(string(data))
				}
				_, err = s.CompareAndSet("counter", v, []byte(strconv.Itoa(n+1)))
				switch {
				case errors.Is(err, errStoreConflict):
					mu.Lock()
					conflicts++
					mu.Unlock()
				case err != nil:
					t.Errorf("writer %d: %v", w, err)
					return
				default:
					done++
				}
			}
		}()
	}
	wg.Wait()
	data, v, err := s.Load("counter")
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != strconv.Itoa(writers*each) || v != writers*each {
		t.Fatalf("counter %s at version %d, want %d (%d conflicts)", data, v, writers*each, conflicts)
	}
	t.Logf("%d conflicts", conflicts)
}

// TestCASStoreBusyLock: a writer that holds the lock and does not go on (a
// frozen process) makes the others fail within the bound, not wait.
func TestCASStoreBusyLock(t *testing.T) {
	dir := t.TempDir()
	s, err := openCASStore(dir, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "e-1.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	_, err = s.CompareAndSet("e-1", 0, []byte("x"))
	if !errors.Is(err, errStoreBusy) {
		t.Fatalf("write under a held lock: %v, want busy", err)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("a busy lock took %v to give up, bound 200ms", took)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CompareAndSet("e-1", 0, []byte("x")); err != nil {
		t.Fatalf("write once the lock is free: %v", err)
	}
	if _, err := s.CompareAndSet("e-2", 0, []byte("y")); err != nil {
		t.Fatal(err)
	}
}
