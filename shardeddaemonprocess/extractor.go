package shardeddaemonprocess

import (
	"fmt"
	"strconv"

	"github.com/protoshard/protoshard/messages"
)

// extractor maps a worker to the shard of its index, so that each worker
// is a shard of its own and the shard allocation spreads the workers.
type extractor struct{}

// EntityID implements actorsharding.MessageExtractor for the messages a
// worker receives through its region.
func (extractor) EntityID(message any) (string, error) {
	var id string
	switch m := message.(type) {
	case *messages.DaemonStopWorker:
		id = m.GetEntityId()
	default:
		return "", fmt.Errorf("%T is not a message of a sharded daemon process's worker", message)
	}
	if _, err := parseWorkerID(id); err != nil {
		return "", err
	}
	return id, nil
}

// ShardID implements actorsharding.MessageExtractor: the worker's index.
// A malformed ID gets a shard of its own, whose worker stops at once.
func (extractor) ShardID(entityID string) string {
	w, err := parseWorkerID(entityID)
	if err != nil {
		return "malformed"
	}
	return strconv.Itoa(w.index)
}

// UnwrapMessage implements actorsharding.MessageExtractor.
func (extractor) UnwrapMessage(message any) (any, error) { return message, nil }

// ExtractorIdentity implements actorsharding.IdentifiedExtractor.
func (extractor) ExtractorIdentity() (string, int) { return "sharded-daemon-process-index", 0 }
