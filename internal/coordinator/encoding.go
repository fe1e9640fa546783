package coordinator

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/protoshard/protoshard/messages"
)

// ErrInvalidState means the state cannot be encoded as one that could be
// loaded again (a region without an id, a shard listed twice...). Nothing
// was written.
var ErrInvalidState = errors.New("invalid coordinator state")

// EncodeState returns the wire form of s (messages.CoordinatorState).
//
// Regions and proxies are written in RegionKey order and the unallocated
// shards sorted, so equal states encode to equal bytes; a region's shards
// keep their allocation order. s.Shards is not written: it is derived from
// the regions and rebuilt by DecodeState. The result is validated like
// DecodeState validates, so a state that could not be loaded again is
// never stored.
func EncodeState(s State) ([]byte, error) {
	msg := StateMessage(s)
	if _, err := stateFromMessage(msg); err != nil {
		return nil, fmt.Errorf("encode coordinator state: %w: %w", ErrInvalidState, err)
	}
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
	if err != nil {
		return nil, fmt.Errorf("encode coordinator state: %w", err)
	}
	return data, nil
}

// StateMessage is the wire form of s, in the order EncodeState describes,
// unvalidated: what EncodeState marshals, and what the coordinator reports
// of its state to admin tools (messages.ShardCoordinatorState). Its PIDs
// are copies.
func StateMessage(s State) *messages.CoordinatorState {
	msg := &messages.CoordinatorState{
		Regions:           make([]*messages.RegionRecord, 0, len(s.Regions)),
		RegionProxies:     make([]*messages.RegionRecord, 0, len(s.Proxies)),
		UnallocatedShards: slices.Sorted(maps.Keys(s.Unallocated)),
		RememberEntities:  s.RememberEntities,
	}
	for _, k := range slices.Sorted(maps.Keys(s.Regions)) {
		r := s.Regions[k]
		msg.Regions = append(msg.Regions, &messages.RegionRecord{
			Ref:            copyPID(r.PID),
			MemberId:       r.MemberID,
			Shards:         slices.Clone(r.Shards),
			Extractor:      r.Extractor.Name,
			NumberOfShards: uint32(r.Extractor.NumberOfShards),
		})
	}
	for _, k := range slices.Sorted(maps.Keys(s.Proxies)) {
		p := s.Proxies[k]
		msg.RegionProxies = append(msg.RegionProxies, &messages.RegionRecord{
			Ref:      copyPID(p.PID),
			MemberId: p.MemberID,
		})
	}
	return msg
}

// DecodeState parses the wire form written by EncodeState and validates it:
// every record has a ref with an id, no region or proxy is listed twice, a
// proxy has no shards, and every shard id is non-empty and either allocated
// to exactly one region once or unallocated. State.Shards is rebuilt from
// the regions, whose shards keep their stored order. Empty data decodes to
// NewState(false).
func DecodeState(data []byte) (State, error) {
	var msg messages.CoordinatorState
	if err := proto.Unmarshal(data, &msg); err != nil {
		return State{}, fmt.Errorf("decode coordinator state (%d bytes): %w", len(data), err)
	}
	s, err := stateFromMessage(&msg)
	if err != nil {
		return State{}, fmt.Errorf("decode coordinator state: %w", err)
	}
	return s, nil
}

// stateFromMessage converts and validates the wire form. The PIDs in the
// result are copies, never the message's own.
func stateFromMessage(msg *messages.CoordinatorState) (State, error) {
	s := NewState(msg.GetRememberEntities())
	for i, rec := range msg.GetRegions() {
		key, err := recordKey(rec)
		if err != nil {
			return State{}, fmt.Errorf("region record %d: %w", i, err)
		}
		if _, dup := s.Regions[key]; dup {
			return State{}, fmt.Errorf("region record %d: region %s listed twice", i, key)
		}
		for _, shard := range rec.GetShards() {
			if shard == "" {
				return State{}, fmt.Errorf("region record %d (%s): empty shard id", i, key)
			}
			if other, dup := s.Shards[shard]; dup {
				return State{}, fmt.Errorf("region record %d (%s): shard %q already listed under region %s",
					i, key, shard, other)
			}
			s.Shards[shard] = key
		}
		s.Regions[key] = RegionEntry{
			PID:       copyPID(rec.GetRef()),
			MemberID:  rec.GetMemberId(),
			Shards:    slices.Clone(rec.GetShards()),
			Extractor: extractorOfRecord(rec),
		}
	}
	for i, rec := range msg.GetRegionProxies() {
		key, err := recordKey(rec)
		if err != nil {
			return State{}, fmt.Errorf("proxy record %d: %w", i, err)
		}
		if _, dup := s.Proxies[key]; dup {
			return State{}, fmt.Errorf("proxy record %d: proxy %s listed twice", i, key)
		}
		if n := len(rec.GetShards()); n > 0 {
			return State{}, fmt.Errorf("proxy record %d (%s): a proxy hosts no shards, %d listed", i, key, n)
		}
		s.Proxies[key] = RegionEntry{PID: copyPID(rec.GetRef()), MemberID: rec.GetMemberId()}
	}
	for _, shard := range msg.GetUnallocatedShards() {
		if shard == "" {
			return State{}, errors.New("empty unallocated shard id")
		}
		// Apply removes a shard from Unallocated when it is allocated; both
		// at once means the data was not written by this code.
		if region, ok := s.Shards[shard]; ok {
			return State{}, fmt.Errorf("shard %q is both unallocated and allocated to region %s", shard, region)
		}
		s.Unallocated[shard] = struct{}{}
	}
	return s, nil
}

// extractorOfRecord is the extractor of a region record: unknown when the
// record names none (a state written by an older version).
func extractorOfRecord(rec *messages.RegionRecord) ExtractorIdentity {
	if rec.GetExtractor() == "" {
		return ExtractorIdentity{}
	}
	return ExtractorIdentity{Name: rec.GetExtractor(), NumberOfShards: int(rec.GetNumberOfShards())}
}

// recordKey returns the RegionKey of a record's ref, or an error when the
// record has no usable ref.
func recordKey(rec *messages.RegionRecord) (string, error) {
	ref := rec.GetRef()
	if ref == nil {
		return "", errors.New("nil ref")
	}
	if ref.GetId() == "" {
		return "", fmt.Errorf("ref at %q has an empty id", ref.GetAddress())
	}
	return RegionKey(ref), nil
}

// copyPID copies the identifying fields of pid. The wire messages never
// share PIDs with a State: marshalling writes a PID's size cache, and a
// caller's PIDs may be in use by other goroutines.
func copyPID(pid *actor.PID) *actor.PID {
	if pid == nil {
		return nil
	}
	return &actor.PID{Address: pid.GetAddress(), Id: pid.GetId(), RequestId: pid.GetRequestId()}
}
