package shardeddaemonprocess_test

import (
	"errors"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/protoshard/protoshard/shardeddaemonprocess"
)

func TestInitRefusesInvalidOptions(t *testing.T) {
	factory := func(int) *actor.Props { return actor.PropsFromFunc(func(actor.Context) {}) }
	for name, opt := range map[string]shardeddaemonprocess.Option{
		"nil":                 nil,
		"zero keep-alive":     shardeddaemonprocess.WithKeepAliveInterval(0),
		"negative keep-alive": shardeddaemonprocess.WithKeepAliveInterval(-time.Second),
		"nil stop message":    shardeddaemonprocess.WithStopMessage(nil),
		"nil store":           shardeddaemonprocess.WithStore(nil),
	} {
		t.Run(name, func(t *testing.T) {
			// Refused before the sharding is asked for anything.
			_, err := shardeddaemonprocess.Init(nil, "workers", 2, factory, opt)
			if !errors.Is(err, shardeddaemonprocess.ErrInvalidOption) {
				t.Fatalf("Init = %v, want ErrInvalidOption", err)
			}
		})
	}
}
