package consul

import (
	"strings"
	"testing"
	"time"

	"github.com/protoshard/protoshard/lease"
)

func TestConfigDefaults(t *testing.T) {
	cases := []struct {
		name       string
		in         Config
		wantTO     lease.TimeoutSettings
		wantMargin time.Duration
		wantDelay  time.Duration
	}{
		{"akka's timeouts", Config{ClusterName: "app"},
			lease.TimeoutSettings{HeartbeatInterval: 12 * time.Second, HeartbeatTimeout: 120 * time.Second, OperationTimeout: 5 * time.Second},
			24 * time.Second, MaxLockDelay},
		{"consul's minimum TTL", Config{ClusterName: "app", TimeoutSettings: lease.TimeoutSettings{HeartbeatTimeout: 10 * time.Second}},
			lease.TimeoutSettings{HeartbeatInterval: time.Second, HeartbeatTimeout: 10 * time.Second, OperationTimeout: 5 * time.Second},
			2 * time.Second, 10 * time.Second},
		{"a tenth of the TTL", Config{ClusterName: "app", TimeoutSettings: lease.TimeoutSettings{HeartbeatTimeout: 30 * time.Second}},
			lease.TimeoutSettings{HeartbeatInterval: 3 * time.Second, HeartbeatTimeout: 30 * time.Second, OperationTimeout: 5 * time.Second},
			6 * time.Second, 30 * time.Second},
		{"given values kept", Config{ClusterName: "app", SafetyMargin: 3 * time.Second, LockDelay: 20 * time.Second,
			TimeoutSettings: lease.TimeoutSettings{HeartbeatInterval: 2 * time.Second, HeartbeatTimeout: 15 * time.Second, OperationTimeout: time.Second}},
			lease.TimeoutSettings{HeartbeatInterval: 2 * time.Second, HeartbeatTimeout: 15 * time.Second, OperationTimeout: time.Second},
			3 * time.Second, 20 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.in.withDefaults()
			if err != nil {
				t.Fatal(err)
			}
			if got.TimeoutSettings != c.wantTO || got.SafetyMargin != c.wantMargin || got.LockDelay != c.wantDelay {
				t.Fatalf("withDefaults = %+v, margin %v, lock delay %v; want %+v, %v, %v",
					got.TimeoutSettings, got.SafetyMargin, got.LockDelay, c.wantTO, c.wantMargin, c.wantDelay)
			}
		})
	}
}

// The lock's key lies under the cluster's keys: two clusters' leases of one
// name are two locks.
func TestLeaseKey(t *testing.T) {
	for _, c := range []struct{ cluster, lease, want string }{
		{"app-a", "singleton-sharding/CounterCoordinator", "protoshard/app-a/lease/singleton-sharding/CounterCoordinator"},
		{"app-b", "/x", "protoshard/app-b/lease/x"},
		{"a/b", "x", "protoshard/a%2Fb/lease/x"},
	} {
		p, err := NewProvider(Config{ClusterName: c.cluster, TimeoutSettings: lease.TimeoutSettings{HeartbeatTimeout: 10 * time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		l, err := p.Lease(c.lease, "owner")
		if err != nil {
			t.Fatal(err)
		}
		if l.Key() != c.want {
			t.Errorf("cluster %q, lease %q: key %q, want %q", c.cluster, c.lease, l.Key(), c.want)
		}
	}
}

func TestConfigRejects(t *testing.T) {
	ttl := func(d time.Duration) lease.TimeoutSettings { return lease.TimeoutSettings{HeartbeatTimeout: d} }
	cases := []struct {
		name string
		in   Config
		want string
	}{
		{"no cluster name", Config{TimeoutSettings: ttl(10 * time.Second)}, "Config.ClusterName: empty cluster name"},
		{"TTL below consul's minimum", Config{ClusterName: "app", TimeoutSettings: ttl(5 * time.Second)}, "minimum session TTL"},
		{"margin as long as the TTL", Config{ClusterName: "app", TimeoutSettings: ttl(10 * time.Second), SafetyMargin: 10 * time.Second}, "safety margin"},
		{"negative margin", Config{ClusterName: "app", TimeoutSettings: ttl(10 * time.Second), SafetyMargin: -time.Second}, "safety margin"},
		{"no heartbeat before the loss", Config{ClusterName: "app", TimeoutSettings: lease.TimeoutSettings{HeartbeatTimeout: 10 * time.Second, HeartbeatInterval: 8 * time.Second}}, "leaves no heartbeat"},
		{"lock delay above consul's maximum", Config{ClusterName: "app", TimeoutSettings: ttl(10 * time.Second), LockDelay: 2 * time.Minute}, "outside Consul's"},
		{"lock delay shorter than a heartbeat", Config{ClusterName: "app", TimeoutSettings: ttl(10 * time.Second), LockDelay: 3 * time.Second}, "does not cover a heartbeat"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.in.withDefaults()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("withDefaults error = %v, want one containing %q", err, c.want)
			}
			if _, err := NewProvider(c.in); err == nil {
				t.Fatal("NewProvider accepted the config")
			}
		})
	}
}
