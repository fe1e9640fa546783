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
		wantPrefix string
		wantTO     lease.TimeoutSettings
		wantMargin time.Duration
		wantDelay  time.Duration
	}{
		{"akka's timeouts", Config{}, DefaultKeyPrefix,
			lease.TimeoutSettings{HeartbeatInterval: 12 * time.Second, HeartbeatTimeout: 120 * time.Second, OperationTimeout: 5 * time.Second},
			24 * time.Second, MaxLockDelay},
		{"consul's minimum TTL", Config{TimeoutSettings: lease.TimeoutSettings{HeartbeatTimeout: 10 * time.Second}}, DefaultKeyPrefix,
			lease.TimeoutSettings{HeartbeatInterval: time.Second, HeartbeatTimeout: 10 * time.Second, OperationTimeout: 5 * time.Second},
			2 * time.Second, 10 * time.Second},
		{"prefix gets its slash, loses a leading one", Config{KeyPrefix: "/app/leases", TimeoutSettings: lease.TimeoutSettings{HeartbeatTimeout: 30 * time.Second}}, "app/leases/",
			lease.TimeoutSettings{HeartbeatInterval: 3 * time.Second, HeartbeatTimeout: 30 * time.Second, OperationTimeout: 5 * time.Second},
			6 * time.Second, 30 * time.Second},
		{"given values kept", Config{KeyPrefix: "x/", SafetyMargin: 3 * time.Second, LockDelay: 20 * time.Second,
			TimeoutSettings: lease.TimeoutSettings{HeartbeatInterval: 2 * time.Second, HeartbeatTimeout: 15 * time.Second, OperationTimeout: time.Second}}, "x/",
			lease.TimeoutSettings{HeartbeatInterval: 2 * time.Second, HeartbeatTimeout: 15 * time.Second, OperationTimeout: time.Second},
			3 * time.Second, 20 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.in.withDefaults()
			if err != nil {
				t.Fatal(err)
			}
			if got.KeyPrefix != c.wantPrefix || got.TimeoutSettings != c.wantTO || got.SafetyMargin != c.wantMargin || got.LockDelay != c.wantDelay {
				t.Fatalf("withDefaults = prefix %q, %+v, margin %v, lock delay %v; want %q, %+v, %v, %v",
					got.KeyPrefix, got.TimeoutSettings, got.SafetyMargin, got.LockDelay, c.wantPrefix, c.wantTO, c.wantMargin, c.wantDelay)
			}
		})
	}
}

func TestConfigRejects(t *testing.T) {
	ttl := func(d time.Duration) lease.TimeoutSettings { return lease.TimeoutSettings{HeartbeatTimeout: d} }
	cases := []struct {
		name string
		in   Config
		want string
	}{
		{"TTL below consul's minimum", Config{TimeoutSettings: ttl(5 * time.Second)}, "minimum session TTL"},
		{"margin as long as the TTL", Config{TimeoutSettings: ttl(10 * time.Second), SafetyMargin: 10 * time.Second}, "safety margin"},
		{"negative margin", Config{TimeoutSettings: ttl(10 * time.Second), SafetyMargin: -time.Second}, "safety margin"},
		{"no heartbeat before the loss", Config{TimeoutSettings: lease.TimeoutSettings{HeartbeatTimeout: 10 * time.Second, HeartbeatInterval: 8 * time.Second}}, "leaves no heartbeat"},
		{"lock delay above consul's maximum", Config{TimeoutSettings: ttl(10 * time.Second), LockDelay: 2 * time.Minute}, "outside Consul's"},
		{"lock delay shorter than a heartbeat", Config{TimeoutSettings: ttl(10 * time.Second), LockDelay: 3 * time.Second}, "does not cover a heartbeat"},
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
