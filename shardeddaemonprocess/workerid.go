package shardeddaemonprocess

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// errMalformedWorkerID: an entity ID of a daemon process's type is not
// "revision|count|index" with 0 <= index < count.
var errMalformedWorkerID = errors.New("shardeddaemonprocess: malformed worker ID")

// workerID names one worker of one revision, as Akka's entity IDs of a
// sharded daemon process do: "revision|count|index". Carrying the
// revision and the count lets a worker tell, from its own ID, which
// revision it belongs to; a worker of another revision than the current
// one is not allowed to run.
type workerID struct {
	revision int64
	count    int
	index    int
}

func (w workerID) String() string {
	return strconv.FormatInt(w.revision, 10) + "|" + strconv.Itoa(w.count) + "|" + strconv.Itoa(w.index)
}

// parseWorkerID is the inverse of workerID.String.
func parseWorkerID(id string) (workerID, error) {
	parts := strings.Split(id, "|")
	if len(parts) != 3 {
		return workerID{}, fmt.Errorf("%q: %w", id, errMalformedWorkerID)
	}
	rev, err1 := strconv.ParseInt(parts[0], 10, 64)
	count, err2 := strconv.Atoi(parts[1])
	index, err3 := strconv.Atoi(parts[2])
	if err := errors.Join(err1, err2, err3); err != nil {
		return workerID{}, fmt.Errorf("%q: %w: %w", id, errMalformedWorkerID, err)
	}
	w := workerID{revision: rev, count: count, index: index}
	if rev < 1 || count < 1 || index < 0 || index >= count || w.String() != id {
		return workerID{}, fmt.Errorf("%q: %w", id, errMalformedWorkerID)
	}
	return w, nil
}

// workerIDs returns the IDs of every worker of revision rev with count
// workers.
func workerIDs(rev int64, count int) []string {
	ids := make([]string, count)
	for i := range ids {
		ids[i] = workerID{revision: rev, count: count, index: i}.String()
	}
	return ids
}
