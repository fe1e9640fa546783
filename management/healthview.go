package management

import (
	"errors"
	"fmt"
	"strings"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/messages"
)

// The node's readiness (the "status" of /ready).
const (
	readyStatus    = "ready"
	startingStatus = "starting" // not joined yet, or a region not registered yet
	leavingStatus  = "leaving"  // Leave was called: leaving, or left
	removedStatus  = "removed"  // removed from the cluster, not joined again (yet)
	staleStatus    = "stale"    // membership not confirmed in time: fenced
)

// A region's readiness (the "status" of each region of /ready).
const (
	regionRegistered = "registered" // with its coordinator, as this member
	// regionReregistering: it registered as this member, lost its
	// coordinator (which moves or restarts) and registers again. Still
	// ready: every region of the type is in the same state, and none may
	// be taken out of service for it.
	regionReregistering = "reregistering"
	regionRegistering   = "registering" // not registered yet as this member
	regionNotStarted    = "notStarted"  // named by WithReadinessTypes, not started
	regionStopped       = "stopped"     // graceful shutdown, or the node left
	regionUnresponsive  = "unresponsive"
)

// The node's liveness (the "status" of /alive), and each part's.
const (
	aliveStatus        = "alive"
	unresponsiveStatus = "unresponsive"
	responsiveStatus   = "responsive" // a part that answered
)

// memberState is what readiness takes from the node's membership.
type memberState struct {
	ID, Address string
	Joined      bool // it joined (it may have been removed since)
	Leaving     bool // Leave was called
	Removed     bool // its current member was removed
	Stale       bool // membershiphook.Cluster.Stale
}

// memberHealthView is the node's membership in /ready.
type memberHealthView struct {
	ID      string `json:"id,omitempty"`
	Address string `json:"address,omitempty"`
	Joined  bool   `json:"joined"`
	Leaving bool   `json:"leaving"`
	Removed bool   `json:"removed"`
	Stale   bool   `json:"stale"`
}

// regionReadyView is one region (or proxy) in /ready.
type regionReadyView struct {
	Type   string `json:"type"`
	Proxy  bool   `json:"proxy"`
	Ready  bool   `json:"ready"`
	Status string `json:"status"`
	// Registered with a coordinator right now, at Coordinator (its
	// address) and Epoch.
	Registered  bool   `json:"registered"`
	Coordinator string `json:"coordinator,omitempty"`
	Epoch       uint64 `json:"epoch,omitempty"`
	Error       string `json:"error,omitempty"` // why the region did not answer
}

// readinessView answers /ready.
type readinessView struct {
	Status  string            `json:"status"`
	Reason  string            `json:"reason,omitempty"` // why it is not ready
	Member  memberHealthView  `json:"member"`
	Regions []regionReadyView `json:"regions"`
}

// partView is one part of the node in /alive: the actor system, or a
// region.
type partView struct {
	Type   string `json:"type,omitempty"` // a region's entity type
	Proxy  bool   `json:"proxy,omitempty"`
	Status string `json:"status"` // responsive, stopped (a region), unresponsive
	Error  string `json:"error,omitempty"`
}

// livenessView answers /alive.
type livenessView struct {
	Status      string     `json:"status"`
	Reason      string     `json:"reason,omitempty"` // what did not answer
	ActorSystem partView   `json:"actorSystem"`
	Regions     []partView `json:"regions"`
}

// regionReadiness is region typeName's readiness on member selfID, from
// its answer to GetShardRegionStatus or the error of the question.
// Without an answer or an error the region was not started.
func regionReadiness(typeName string, proxy bool, st *messages.ShardRegionStatus, err error, selfID string) regionReadyView {
	v := regionReadyView{Type: typeName, Proxy: proxy}
	switch {
	case err != nil && errors.Is(err, actor.ErrDeadLetter):
		v.Status = regionStopped
	case err != nil:
		v.Status, v.Error = regionUnresponsive, err.Error()
	case st == nil:
		v.Status = regionNotStarted
	default:
		v.Proxy = st.GetProxy()
		v.Registered = st.GetRegisteredWithCoordinator()
		if v.Registered {
			v.Coordinator, v.Epoch = st.GetCoordinator().GetAddress(), st.GetEpoch()
		}
		// Registered as an earlier incarnation of this node is not
		// registered as this one: the coordinator knows it as a removed
		// member's.
		asSelf := selfID != "" && st.GetRegisteredMemberId() == selfID
		switch {
		case asSelf && v.Registered:
			v.Status, v.Ready = regionRegistered, true
		case asSelf:
			v.Status, v.Ready = regionReregistering, true
		default:
			v.Status = regionRegistering
		}
	}
	return v
}

// readiness decides the node's readiness: the membership first, then
// every region.
func readiness(m memberState, regions []regionReadyView) readinessView {
	v := readinessView{
		Member:  memberHealthView(m),
		Regions: regions,
	}
	if v.Regions == nil {
		v.Regions = []regionReadyView{}
	}
	var waiting []string
	for _, r := range regions {
		if !r.Ready {
			waiting = append(waiting, fmt.Sprintf("%s (%s)", r.Type, r.Status))
		}
	}
	switch {
	case !m.Joined:
		v.Status, v.Reason = startingStatus, "the node has not joined the cluster yet"
	case m.Leaving:
		v.Status, v.Reason = leavingStatus, "the node is leaving the cluster, or has left it"
	case m.Removed:
		v.Status, v.Reason = removedStatus, "the node was removed from the cluster and has not joined it again"
	case m.Stale:
		v.Status, v.Reason = staleStatus, "the node has not confirmed its membership within the failure detection timeout "+
			"(it was paused or cut off): the others may have removed it, so it hosts and forwards nothing"
	case len(waiting) > 0:
		v.Status, v.Reason = startingStatus, "regions not registered with their coordinator as this member: "+strings.Join(waiting, ", ")
	default:
		v.Status = readyStatus
	}
	return v
}

// regionLiveness is a region's part in liveness: it answered, or it has
// stopped (a graceful shutdown, or the node left: no reason to restart the
// process), or it did not answer in time.
func regionLiveness(typeName string, proxy bool, err error) partView {
	v := partView{Type: typeName, Proxy: proxy, Status: responsiveStatus}
	switch {
	case err != nil && errors.Is(err, actor.ErrDeadLetter):
		v.Status = regionStopped
	case err != nil:
		v.Status, v.Error = unresponsiveStatus, err.Error()
	}
	return v
}

// liveness decides the node's liveness from its parts.
func liveness(system partView, regions []partView) livenessView {
	v := livenessView{Status: aliveStatus, ActorSystem: system, Regions: regions}
	if v.Regions == nil {
		v.Regions = []partView{}
	}
	var silent []string
	if system.Status == unresponsiveStatus {
		silent = append(silent, "the actor system")
	}
	for _, r := range regions {
		if r.Status == unresponsiveStatus {
			silent = append(silent, "region "+r.Type)
		}
	}
	if len(silent) > 0 {
		v.Status, v.Reason = unresponsiveStatus, "did not answer in time: "+strings.Join(silent, ", ")
	}
	return v
}
