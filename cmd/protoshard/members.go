package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/hashicorp/consul/api"

	"github.com/protoshard/protoshard/membership"
)

// memberInfo is a member as registered in Consul, with the health of its
// instance.
type memberInfo struct {
	membership.Member
	// Health is Consul's aggregated status of the instance's checks:
	// passing, warning, critical or maintenance.
	Health string
	// Service is the Consul service the member registered as.
	Service string
}

// Live reports whether the member may still be running its regions: its
// check is not critical. A member whose TTL ran out without a refresh
// turns critical and has fenced itself (it stopped its regions); the
// others are treated as running, maintenance included, because a tool that
// deletes data had better wait for a leftover to be deregistered.
func (m memberInfo) Live() bool { return m.Health != api.HealthCritical }

// StatusText is the member's status in one word: passing, leaving (a
// graceful leave announced, still passing), or the health otherwise
// (critical, warning, maintenance).
func (m memberInfo) StatusText() string {
	if m.Health == api.HealthPassing || m.Health == "" {
		if m.Status == membership.Leaving {
			return "leaving"
		}
		return api.HealthPassing
	}
	return m.Health
}

// sortMembers orders members oldest first, as the cluster does.
func sortMembers(ms []memberInfo) []memberInfo {
	slices.SortStableFunc(ms, func(a, b memberInfo) int {
		switch {
		case a.IsOlderThan(b.Member):
			return -1
		case b.IsOlderThan(a.Member):
			return 1
		}
		return 0
	})
	return ms
}

func membersFlags(fs *flag.FlagSet) action {
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	return action{
		validate: func() error { return nil },
		run: func(ctx context.Context, source *consulSource, t target, out io.Writer) error {
			ms, err := source.members(ctx, t.service)
			if err != nil {
				return err
			}
			if *asJSON {
				return writeJSON(out, membersJSON(ms))
			}
			return writeMembers(out, t.service, ms)
		},
	}
}

// memberJSON is a member in members -json.
type memberJSON struct {
	ID       string   `json:"id"`
	Address  string   `json:"address"`
	Age      uint64   `json:"age"`
	Roles    []string `json:"roles"`
	Status   string   `json:"status"`
	Live     bool     `json:"live"`
	SystemID string   `json:"systemId,omitempty"`
}

func membersJSON(ms []memberInfo) []memberJSON {
	out := make([]memberJSON, 0, len(ms))
	for _, m := range ms {
		roles := m.Roles
		if roles == nil {
			roles = []string{}
		}
		out = append(out, memberJSON{ID: m.ID, Address: m.Address, Age: m.Age, Roles: roles,
			Status: m.StatusText(), Live: m.Live(), SystemID: m.SystemID})
	}
	return out
}

// writeMembers prints the members as a table, oldest first.
func writeMembers(w io.Writer, service string, ms []memberInfo) error {
	if len(ms) == 0 {
		_, err := fmt.Fprintf(w, "no members registered as service %q\n", service)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "AGE\tMEMBER\tADDRESS\tSTATUS\tROLES")
	for _, m := range ms {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", strconv.FormatUint(m.Age, 10), m.ID, m.Address, m.StatusText(), dash(strings.Join(m.Roles, ",")))
	}
	return tw.Flush()
}

// dash stands in for an empty table cell.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
