// Package rememberupdate checks the arguments of a remember-entities
// store's Update (shardactor.RememberEntitiesStore), one check for the
// memory and the Consul store.
package rememberupdate

import (
	"context"
	"fmt"
	"unicode/utf8"
)

// Validate checks the arguments of RememberEntitiesStore.Update as the
// interface requires: it returns ctx's error if ctx is done, and an error
// wrapping invalid (shardactor.ErrInvalidUpdate) for an empty shard ID, an
// empty or non-UTF-8 entity ID, or an ID both started and stopped. A store
// calls it before anything is read or written, so that a bad batch never
// leaves half of itself behind.
func Validate(ctx context.Context, shardID string, started, stopped []string, invalid error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if shardID == "" {
		return fmt.Errorf("%w: empty shard ID", invalid)
	}
	for _, id := range started {
		if err := validateEntityID(id, invalid); err != nil {
			return fmt.Errorf("started: %w", err)
		}
	}
	if len(stopped) == 0 {
		return nil
	}
	starting := make(map[string]struct{}, len(started))
	for _, id := range started {
		starting[id] = struct{}{}
	}
	for _, id := range stopped {
		if err := validateEntityID(id, invalid); err != nil {
			return fmt.Errorf("stopped: %w", err)
		}
		// The order of a start and a stop in one batch is lost, so which
		// one wins would be a guess; the shard never sends both.
		if _, ok := starting[id]; ok {
			return fmt.Errorf("%w: entity ID %q is both started and stopped in one update", invalid, id)
		}
	}
	return nil
}

func validateEntityID(id string, invalid error) error {
	if id == "" {
		return fmt.Errorf("%w: empty entity ID", invalid)
	}
	if !utf8.ValidString(id) {
		return fmt.Errorf("%w: entity ID %q is not valid UTF-8", invalid, id)
	}
	return nil
}
