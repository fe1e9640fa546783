package consul

import (
	"strings"
	"testing"
	"time"
)

func TestConfigDefaults(t *testing.T) {
	cases := []struct {
		name       string
		in         config
		wantTO     timeoutSettings
		wantMargin time.Duration
		wantDelay  time.Duration
	}{
		{"akka's timeouts", config{ClusterName: "app"},
			timeoutSettings{HeartbeatInterval: 12 * time.Second, HeartbeatTimeout: 120 * time.Second, OperationTimeout: 5 * time.Second},
			24 * time.Second, MaxLockDelay},
		{"consul's minimum TTL", config{ClusterName: "app", timeoutSettings: timeoutSettings{HeartbeatTimeout: 10 * time.Second}},
			timeoutSettings{HeartbeatInterval: time.Second, HeartbeatTimeout: 10 * time.Second, OperationTimeout: 5 * time.Second},
			2 * time.Second, 10 * time.Second},
		{"a tenth of the TTL", config{ClusterName: "app", timeoutSettings: timeoutSettings{HeartbeatTimeout: 30 * time.Second}},
			timeoutSettings{HeartbeatInterval: 3 * time.Second, HeartbeatTimeout: 30 * time.Second, OperationTimeout: 5 * time.Second},
			6 * time.Second, 30 * time.Second},
		{"given values kept", config{ClusterName: "app", SafetyMargin: 3 * time.Second, LockDelay: 20 * time.Second,
			timeoutSettings: timeoutSettings{HeartbeatInterval: 2 * time.Second, HeartbeatTimeout: 15 * time.Second, OperationTimeout: time.Second}},
			timeoutSettings{HeartbeatInterval: 2 * time.Second, HeartbeatTimeout: 15 * time.Second, OperationTimeout: time.Second},
			3 * time.Second, 20 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.in.withDefaults()
			if err != nil {
				t.Fatal(err)
			}
			if got.timeoutSettings != c.wantTO || got.SafetyMargin != c.wantMargin || got.LockDelay != c.wantDelay {
				t.Fatalf("withDefaults = %+v, margin %v, lock delay %v; want %+v, %v, %v",
					got.timeoutSettings, got.SafetyMargin, got.LockDelay, c.wantTO, c.wantMargin, c.wantDelay)
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
		p, err := NewProvider(c.cluster, WithHeartbeatTimeout(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		l, err := p.NewLease(c.lease, "owner")
		if err != nil {
			t.Fatal(err)
		}
		if LeaseKey(l) != c.want {
			t.Errorf("cluster %q, lease %q: key %q, want %q", c.cluster, c.lease, LeaseKey(l), c.want)
		}
	}
}

func TestConfigRejects(t *testing.T) {
	ttl := WithHeartbeatTimeout(10 * time.Second)
	cases := []struct {
		name    string
		cluster string
		opts    []Option
		want    string
	}{
		{"no cluster name", "", []Option{ttl}, "cluster name: empty cluster name"},
		{"TTL below consul's minimum", "app", []Option{WithHeartbeatTimeout(5 * time.Second)}, "minimum session TTL"},
		{"margin as long as the TTL", "app", []Option{ttl, WithSafetyMargin(10 * time.Second)}, "safety margin"},
		{"negative margin", "app", []Option{ttl, WithSafetyMargin(-time.Second)}, "WithSafetyMargin: -1s is not positive"},
		{"zero TTL", "app", []Option{WithHeartbeatTimeout(0)}, "WithHeartbeatTimeout: 0s is not positive"},
		{"zero heartbeat interval", "app", []Option{ttl, WithHeartbeatInterval(0)}, "WithHeartbeatInterval"},
		{"zero operation timeout", "app", []Option{ttl, WithOperationTimeout(0)}, "WithOperationTimeout"},
		{"zero lock delay", "app", []Option{ttl, WithLockDelay(0)}, "WithLockDelay"},
		{"nil client", "app", []Option{ttl, WithClient(nil)}, "WithClient: nil client"},
		{"nil logger", "app", []Option{ttl, WithLogger(nil)}, "WithLogger: nil logger"},
		{"nil option", "app", []Option{nil}, "nil option"},
		{"no heartbeat before the loss", "app", []Option{ttl, WithHeartbeatInterval(8 * time.Second)}, "leaves no heartbeat"},
		{"lock delay above consul's maximum", "app", []Option{ttl, WithLockDelay(2 * time.Minute)}, "outside Consul's"},
		{"lock delay shorter than a heartbeat", "app", []Option{ttl, WithLockDelay(3 * time.Second)}, "does not cover a heartbeat"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewProvider(c.cluster, c.opts...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("NewProvider error = %v, want one containing %q", err, c.want)
			}
		})
	}
}
