//go:build !unix

package delivery

import (
	"errors"
	"os"
)

// claimFile: without flock a claim cannot be taken, and so no file queue
// is loaded.
func claimFile(string) (*os.File, error) {
	return nil, errors.New("the file queue needs flock, which this system lacks")
}
