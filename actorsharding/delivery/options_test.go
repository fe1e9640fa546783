package delivery

import (
	"errors"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/internal/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestProducerOptions(t *testing.T) {
	s := defaultProducerSettings()
	require.NoError(t, option.Apply(&s, []ProducerOption{}, ErrInvalidOption))
	assert.Equal(t, defaultProducerSettings(), s.withDefaults(), "no option: Pekko's defaults")

	q := newMemoryQueue()
	require.NoError(t, option.Apply(&s, []ProducerOption{
		WithBufferSize(3), WithCleanupUnusedAfter(time.Minute), WithResendFirstUnconfirmedIdleTimeout(time.Hour),
		WithResendFirstInterval(2 * time.Second), WithMaxMessageSize(100), WithDurableQueue(q),
		WithDurableQueueRequestTimeout(time.Second), WithDurableQueueRetryAttempts(2),
	}, ErrInvalidOption))
	assert.Equal(t, producerSettings{BufferSize: 3, CleanupUnusedAfter: time.Minute, ResendFirstUnconfirmedIdleTimeout: time.Hour,
		ResendFirstInterval: 2 * time.Second, MaxMessageSize: 100, DurableQueue: q,
		DurableQueueRequestTimeout: time.Second, DurableQueueRetryAttempts: 2}, s.withDefaults())
}

func TestConsumerOptions(t *testing.T) {
	s := defaultConsumerSettings()
	require.NoError(t, option.Apply(&s, []ConsumerOption{}, ErrInvalidOption))
	assert.Equal(t, consumerSettings{FlowControlWindow: 50, ResendIntervalMin: 2 * time.Second, ResendIntervalMax: 30 * time.Second,
		ProgressRetention: time.Hour}, s.withDefaults(), "no option: Pekko's defaults")

	require.NoError(t, option.Apply(&s, []ConsumerOption{
		WithFlowControlWindow(8), WithResendIntervalMin(time.Second), WithResendIntervalMax(4 * time.Second),
		WithOnlyFlowControl(true), WithProgressRetention(time.Minute),
	}, ErrInvalidOption))
	assert.Equal(t, consumerSettings{FlowControlWindow: 8, ResendIntervalMin: time.Second, ResendIntervalMax: 4 * time.Second,
		OnlyFlowControl: true, ProgressRetention: time.Minute}, s.withDefaults())
}

func TestInvalidProducerOptionsFailStart(t *testing.T) {
	for name, opt := range map[string]ProducerOption{
		"nil":                    nil,
		"zero buffer":            WithBufferSize(0),
		"zero cleanup":           WithCleanupUnusedAfter(0),
		"negative idle timeout":  WithResendFirstUnconfirmedIdleTimeout(-time.Second),
		"zero resend first":      WithResendFirstInterval(0),
		"zero message size":      WithMaxMessageSize(0),
		"nil queue":              WithDurableQueue(nil),
		"zero queue timeout":     WithDurableQueueRequestTimeout(0),
		"no queue retry attempt": WithDurableQueueRetryAttempts(0),
	} {
		t.Run(name, func(t *testing.T) {
			// Refused before the sharding is asked for anything.
			_, err := StartShardingProducerController(nil, "T", "p1", opt)
			require.Error(t, err)
			assert.True(t, errors.Is(err, ErrInvalidOption), "%v", err)
		})
	}
}

func TestInvalidConsumerOptionsFailNew(t *testing.T) {
	deliver := func(actor.Context, Delivery) {}
	for name, opt := range map[string]ConsumerOption{
		"nil":                 nil,
		"zero window":         WithFlowControlWindow(0),
		"zero resend min":     WithResendIntervalMin(0),
		"negative resend max": WithResendIntervalMax(-time.Second),
		"zero retention":      WithProgressRetention(0),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := NewShardingConsumerController(nil, deliver, opt)
			require.Error(t, err)
			assert.True(t, errors.Is(err, ErrInvalidOption), "%v", err)
		})
	}
}

func TestInvalidFileQueueOptionsFailOpen(t *testing.T) {
	for name, opt := range map[string]FileQueueOption{
		"nil":                nil,
		"zero message bytes": WithMaxMessageSentBytes(0),
		"zero compaction":    WithCompactAfterEvents(0),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := openFileQueue(t.TempDir(), "p1", opt)
			require.Error(t, err)
			assert.True(t, errors.Is(err, ErrInvalidOption), "%v", err)
		})
	}
	q, err := openFileQueue(t.TempDir(), "p1")
	require.NoError(t, err)
	assert.Equal(t, 4<<20-64<<10, q.MaxMessageSentBytes(), "the default")
	assert.Equal(t, 1000, q.compactAfter, "Akka's snapshot-every")
}
