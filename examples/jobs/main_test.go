package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/protoshard/protoshard/examples/jobs/jobspb"
	"github.com/protoshard/protoshard/internal/raceflag"
)

// TestShortRun runs the example as `go run ./examples/jobs -short` does and
// checks what the story claims: every job was created by exactly one of
// its reliably delivered submissions, every job reached done, no stale report
// was accepted, and every report the zombie sent after it woke up was
// rejected.
func TestShortRun(t *testing.T) {
	if raceflag.Enabled {
		t.Skip("several proto.actor remotes in one process race on grpc's global logger; runs in the non-race pass")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := defaultConfig()
	cfg.jobs = 12
	var out bytes.Buffer
	res, err := simulate(ctx, &out, cfg)
	if err != nil {
		t.Log("\n" + out.String())
		t.Fatalf("simulate: %v", err)
	}
	verr := res.verify(&out)
	t.Log("\n" + out.String())
	if verr != nil {
		t.Fatalf("verify: %v", verr)
	}

	// Every job reached done, with its last step.
	if len(res.jobs) != cfg.jobs {
		t.Fatalf("%d job records, want %d", len(res.jobs), cfg.jobs)
	}
	for _, j := range res.jobs {
		if j.Status != jobspb.Status_DONE || j.LastSeq != int64(j.Steps) {
			t.Errorf("%s: status %v, last step %d of %d", j.Id, j.Status, j.LastSeq, j.Steps)
		}
	}

	// Every job processed exactly one submission, half of them sent while
	// the oldest node left, and the submitter saw every one confirmed.
	for _, j := range res.jobs {
		if j.CreateDeliveries != 1 {
			t.Errorf("%s: its CreateJob was processed %d times, want once", j.Id, j.CreateDeliveries)
		}
	}
	if res.duringLeave == 0 || res.submitter.Confirmed != int64(cfg.jobs) || res.submitter.Unconfirmed != 0 {
		t.Errorf("submissions: %d during the leave, submitter stats %+v; want some during the leave and all %d confirmed",
			res.duringLeave, res.submitter, cfg.jobs)
	}

	// No stale report accepted: within each job the accepted steps only
	// go up, and every duplicate was turned down.
	for _, j := range res.jobs {
		var last int64
		for _, e := range j.History {
			if e.Kind != jobspb.Event_REPORTED {
				continue
			}
			if e.Seq <= last {
				t.Errorf("%s: step %d accepted after step %d", j.Id, e.Seq, last)
			}
			last = e.Seq
		}
	}
	var dupSent, dupRejected, dupAccepted int
	for _, c := range res.workers {
		dupSent += c.DuplicatesSent
		dupRejected += c.DuplicatesRejected
		dupAccepted += c.DuplicatesAccepted
	}
	if dupSent == 0 || dupAccepted != 0 || dupRejected == 0 {
		t.Errorf("duplicates: %d sent, %d rejected, %d accepted; want some sent, some rejected and none accepted", dupSent, dupRejected, dupAccepted)
	}

	// The zombie: it reported after waking up, and nothing it reported
	// then was accepted...
	z := res.workers[zombieID]
	if z.SentAwake == 0 || z.RejectedAwake == 0 || z.AcceptedAwake != 0 {
		t.Errorf("zombie after waking up: %d sent, %d rejected, %d accepted; want some sent, some rejected and none accepted",
			z.SentAwake, z.RejectedAwake, z.AcceptedAwake)
	}
	// ...and, as the jobs saw it, none of its reports was accepted once
	// someone else owned the job.
	reassigned := 0
	for _, j := range res.jobs {
		owned, taken := false, false
		for _, e := range j.History {
			switch {
			case e.Kind == jobspb.Event_ASSIGNED && e.Worker == zombieID:
				owned = true
			case e.Kind == jobspb.Event_ASSIGNED && owned:
				taken = true
			case e.Kind == jobspb.Event_REPORTED && e.Worker == zombieID && taken:
				t.Errorf("%s: the zombie's step %d (epoch %d) was accepted after the job was reassigned", j.Id, e.Seq, e.Epoch)
			}
		}
		if taken {
			reassigned++
		}
	}
	if reassigned == 0 {
		t.Errorf("none of the zombie's jobs was reassigned")
	}

	story := out.String()
	for _, want := range []string{
		zombieID + " freezes",
		"the submitter sends the other",
		"declared dead",
		zombieID + " (zombie): step",
		"scheduler starts on node-b",
		"histories checked",
	} {
		if !strings.Contains(story, want) {
			t.Errorf("the output lacks %q", want)
		}
	}
}
