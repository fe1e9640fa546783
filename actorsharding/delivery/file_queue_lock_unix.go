//go:build unix

package delivery

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// claimFile takes an exclusive flock on path, which the kernel releases
// when the file is closed or the process dies; held elsewhere, it fails
// with ErrQueueFenced.
func claimFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s is locked: %w", path, ErrQueueFenced)
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return f, nil
}
