package singleton

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestDecideTermination(t *testing.T) {
	for _, tt := range []struct {
		name                                                string
		state                                               string
		selfExited, selfGone, managerStopping, fenceStopped bool
		want                                                terminationBooking
	}{
		{"stopped on its own while oldest", stateOldest, false, false, false, false, bookRestartable},
		{"fence stopped it while oldest", stateOldest, false, false, false, true, bookFencedStop},
		{"oldest but leaving", stateOldest, true, false, false, false, bookStopped},
		{"oldest but leaving, fenced", stateOldest, true, false, false, true, bookStopped},
		{"oldest but removed", stateOldest, false, true, false, true, bookStopped},
		{"manager stopping", stateOldest, false, false, true, true, bookStopped},
		{"lease lost: acquiring again", stateAcquiringLease, false, false, false, false, bookStopped},
		{"handing over", stateHandingOver, false, false, false, false, bookStopped},
		{"was oldest", stateWasOldest, false, false, false, true, bookStopped},
		{"stopping after removal", stateStopping, false, false, false, false, bookStopped},
		{"end", stateEnd, false, false, false, false, bookStopped},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, decideTermination(tt.state, tt.selfExited, tt.selfGone, tt.managerStopping, tt.fenceStopped))
		})
	}
}

func TestDecideLeaseRetryCause(t *testing.T) {
	boom := errors.New("lease store unreachable")
	for _, tt := range []struct {
		name     string
		err      error
		acquired bool
		want     leaseRetryCause
	}{
		{"said no", nil, false, leaseHeldElsewhere},
		{"failed", boom, false, leaseFailed},
		{"an error wins over a yes", boom, true, leaseFailed},
		{"yes, but lost before the start", nil, true, leaseLostBeforeStart},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, decideLeaseRetryCause(tt.err, tt.acquired))
		})
	}
}

func TestIsSelfRemoval(t *testing.T) {
	for _, tt := range []struct {
		name              string
		selfID, removedID string
		want              bool
	}{
		{"own incarnation", "m1", "m1", true},
		{"another member", "m1", "m2", false},
		{"no incarnation yet, a member without ID", "", "", false},
		{"no incarnation yet", "", "m2", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, isSelfRemoval(tt.selfID, tt.removedID))
		})
	}
}
