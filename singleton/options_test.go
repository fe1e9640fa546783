package singleton

import (
	"errors"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/lease"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOptionsDefaultsAreAkkas(t *testing.T) {
	o, err := applyOptions(nil)
	require.NoError(t, err)
	m, p := o.manager.withDefaults(), o.proxy.withDefaults()
	assert.Equal(t, "singleton", m.SingletonName)
	assert.Equal(t, "", m.Role)
	assert.Equal(t, time.Second, m.HandOverRetryInterval)
	assert.Equal(t, 15, m.MinNumberOfHandOverRetries)
	assert.Equal(t, time.Duration(0), m.RemovalMargin, "the cluster's margin")
	assert.Nil(t, m.TerminationMessage)
	assert.Equal(t, 1000, m.BufferSize)
	assert.Nil(t, m.UseLease)
	assert.Equal(t, 5*time.Second, m.LeaseRetryInterval)
	assert.Equal(t, time.Second, m.SingletonRestartMinBackoff)
	assert.Equal(t, 30*time.Second, m.SingletonRestartMaxBackoff)
	assert.Equal(t, 0.2, m.SingletonRestartRandomFactor)
	assert.Equal(t, time.Duration(0), m.SingletonRestartResetAfter, "the minimum back-off")
	assert.Equal(t, "singleton", p.SingletonName)
	assert.Equal(t, time.Second, p.SingletonIdentificationInterval)
	assert.Equal(t, 1000, p.BufferSize)
}

func TestOptionsSetSettings(t *testing.T) {
	leases := lease.NewMemoryLeases()
	o, err := applyOptions([]Option{
		WithSingletonName("s"), WithRole("r"), WithHandOverRetryInterval(2 * time.Second),
		WithMinNumberOfHandOverRetries(3), WithRemovalMargin(0), WithTerminationMessage("stop"),
		WithManagerBufferSize(7), WithLease(leases), WithLeaseRetryInterval(time.Minute),
		WithSingletonRestartBackoff(time.Millisecond, time.Millisecond, 0), WithSingletonRestartResetAfter(time.Hour),
		WithSingletonIdentificationInterval(3 * time.Second), WithBufferSize(0),
	})
	require.NoError(t, err)
	m, p := o.manager.withDefaults(), o.proxy.withDefaults()
	assert.Equal(t, settings{SingletonName: "s", Role: "r", HandOverRetryInterval: 2 * time.Second,
		MinNumberOfHandOverRetries: 3, RemovalMargin: -1, TerminationMessage: "stop", BufferSize: 7,
		UseLease: leases, LeaseRetryInterval: time.Minute, SingletonRestartMinBackoff: time.Millisecond,
		SingletonRestartMaxBackoff: time.Millisecond, SingletonRestartResetAfter: time.Hour}, m)
	assert.Equal(t, proxySettings{SingletonName: "s", Role: "r", SingletonIdentificationInterval: 3 * time.Second}, p)
	assert.Equal(t, time.Duration(-1), removalDelay(m, false), "WithRemovalMargin(0): no margin")

	o, err = applyOptions([]Option{WithoutSingletonRestart(), WithBufferSize(maxProxyBufferSize)})
	require.NoError(t, err)
	_, ok := o.manager.withDefaults().singletonRestartBackoff()
	assert.False(t, ok, "WithoutSingletonRestart")
	assert.Equal(t, maxProxyBufferSize, o.proxy.withDefaults().BufferSize)
}

func TestInvalidOptionsFailStart(t *testing.T) {
	for name, opt := range map[string]Option{
		"nil":                       nil,
		"empty singleton name":      WithSingletonName(""),
		"zero hand-over interval":   WithHandOverRetryInterval(0),
		"no hand-over retries":      WithMinNumberOfHandOverRetries(0),
		"negative removal margin":   WithRemovalMargin(-time.Second),
		"nil termination message":   WithTerminationMessage(nil),
		"zero manager buffer":       WithManagerBufferSize(0),
		"nil lease":                 WithLease(nil),
		"zero lease retry":          WithLeaseRetryInterval(0),
		"zero restart backoff":      WithSingletonRestartBackoff(0, time.Second, 0.2),
		"max below min backoff":     WithSingletonRestartBackoff(time.Second, time.Millisecond, 0.2),
		"negative random factor":    WithSingletonRestartBackoff(time.Second, time.Second, -0.1),
		"zero reset after":          WithSingletonRestartResetAfter(0),
		"zero identification":       WithSingletonIdentificationInterval(0),
		"negative proxy buffer":     WithBufferSize(-1),
		"proxy buffer above Akka's": WithBufferSize(maxProxyBufferSize + 1),
	} {
		t.Run(name, func(t *testing.T) {
			props := actor.PropsFromFunc(func(actor.Context) {})
			// Neither start reaches the system nor the cluster.
			_, err := StartManager(nil, nil, props, "m", opt)
			require.Error(t, err)
			assert.True(t, errors.Is(err, ErrInvalidOption), "%v", err)
			_, err = StartProxy(nil, nil, "m", opt)
			assert.True(t, errors.Is(err, ErrInvalidOption), "%v", err)
		})
	}
}
