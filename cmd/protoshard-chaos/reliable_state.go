package main

import (
	"encoding/json"
	"fmt"
	"maps"

	"google.golang.org/protobuf/proto"

	"github.com/protoshard/protoshard/messages"
)

// maxListed bounds the seqs an entity record lists per sender (skipped
// ones, ones processed twice): enough to attribute them to faults, small
// enough to rewrite with every message.
const maxListed = 64

// entityRecord is what a reliable run's entity stores, in one
// compare-and-set write per message: its delivery progress together with
// the effects of the messages, which are, per sender, what it applied.
// Storing both in one write is what makes each message's effect happen
// once although the entity restarts (kill -9, hand-off, a zombie after a
// pause).
type entityRecord struct {
	// Progress is the encoded messages.ConsumerProgress after the last
	// message applied.
	Progress []byte                   `json:"progress,omitempty"`
	Senders  map[string]*senderRecord `json:"senders,omitempty"`
}

// senderRecord is what an entity applied of one sender's numbered
// messages (the sender's own numbering per entity, 1, 2, ..., inside the
// payload, not reliable delivery's).
type senderRecord struct {
	// Last is the highest seq applied.
	Last int64 `json:"last"`
	// Applied counts the seqs applied, each once.
	Applied int64 `json:"applied"`
	// Twice counts deliveries of a seq at or below Last: processed twice.
	Twice int64 `json:"twice,omitempty"`
	// Gaps counts deliveries above Last+1: the seqs between were skipped.
	Gaps int64 `json:"gaps,omitempty"`
	// Skipped lists the seqs gaps jumped over, TwiceSeqs those processed
	// twice; at most maxListed entries each.
	Skipped   []seqRange `json:"skipped,omitempty"`
	TwiceSeqs []int64    `json:"twice_seqs,omitempty"`
}

// seqRange is the seqs From..To, both included.
type seqRange struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
}

// applyOutcome says what a delivery did to the record.
type applyOutcome string

const (
	appliedInOrder applyOutcome = "applied"
	appliedTwice   applyOutcome = "twice"
	appliedWithGap applyOutcome = "gap"
)

// apply returns the record after the delivery of sender's message seq,
// and what it was; r is unchanged, so a failed write keeps the old one.
func (r entityRecord) apply(sender string, seq int64) (entityRecord, applyOutcome) {
	next := entityRecord{Progress: r.Progress, Senders: maps.Clone(r.Senders)}
	if next.Senders == nil {
		next.Senders = map[string]*senderRecord{}
	}
	s := senderRecord{}
	if old := r.Senders[sender]; old != nil {
		s = *old
	}
	var outcome applyOutcome
	switch {
	case seq <= s.Last:
		s.Twice++
		if len(s.TwiceSeqs) < maxListed {
			s.TwiceSeqs = append(append([]int64{}, s.TwiceSeqs...), seq)
		}
		outcome = appliedTwice
	case seq == s.Last+1:
		s.Applied++
		s.Last = seq
		outcome = appliedInOrder
	default:
		s.Gaps++
		if len(s.Skipped) < maxListed {
			s.Skipped = append(append([]seqRange{}, s.Skipped...), seqRange{From: s.Last + 1, To: seq - 1})
		}
		s.Applied++
		s.Last = seq
		outcome = appliedWithGap
	}
	next.Senders[sender] = &s
	return next, outcome
}

// withProgress returns r with p as its progress.
func (r entityRecord) withProgress(p *messages.ConsumerProgress) (entityRecord, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(p)
	if err != nil {
		return r, fmt.Errorf("encoding delivery progress: %w", err)
	}
	r.Progress = b
	return r, nil
}

// progress decodes the stored delivery progress (nil: none).
func (r entityRecord) progress() (*messages.ConsumerProgress, error) {
	if len(r.Progress) == 0 {
		return nil, nil
	}
	p := &messages.ConsumerProgress{}
	if err := proto.Unmarshal(r.Progress, p); err != nil {
		return nil, fmt.Errorf("decoding delivery progress: %w", err)
	}
	return p, nil
}

func (r entityRecord) encode() ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encoding entity record: %w", err)
	}
	return b, nil
}

// decodeEntityRecord reads a stored record; no data is the empty record.
func decodeEntityRecord(b []byte) (entityRecord, error) {
	var r entityRecord
	if len(b) == 0 {
		return r, nil
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("decoding entity record: %w", err)
	}
	return r, nil
}
