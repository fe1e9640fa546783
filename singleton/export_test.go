package singleton

// Names the external tests read: the manager's state names and its state
// query, and the name of a singleton's lease.
const (
	StateOldest         = stateOldest
	StateYounger        = stateYounger
	StateAcquiringLease = stateAcquiringLease
)

type (
	GetState     = getState
	CurrentState = currentState
)

// LeaseName is the name of the lease the manager managerName holds.
var LeaseName = leaseName
