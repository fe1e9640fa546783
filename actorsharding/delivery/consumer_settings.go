package delivery

import "time"

// consumerSettings of the consumer side of reliable delivery, with Pekko's
// names and defaults (pekko.reliable-delivery.consumer-controller);
// ConsumerOptions set them. A zero field takes its default (withDefaults).
type consumerSettings struct {
	// FlowControlWindow is how many messages a producer may send ahead of
	// the last confirmed one. More demand is requested when half of it is
	// used, and at most this many messages are stashed per producer while
	// one is being processed. Default 50.
	FlowControlWindow int
	// ResendIntervalMin is the first interval of the retry of a lost
	// Request or Resend; it grows while nothing arrives. Default 2s.
	ResendIntervalMin time.Duration
	// ResendIntervalMax bounds that interval. Default 30s.
	ResendIntervalMax time.Duration
	// OnlyFlowControl: lost messages are not resent, a gap is accepted and
	// the producer keeps nothing for resending. Default false.
	OnlyFlowControl bool
	// ProgressRetention: a producer silent this long with nothing waiting
	// is forgotten, with its stored progress, since the entity watches no
	// producer. Default 1h, as Pekko's event-sourced durable queue
	// cleanup-unused-after.
	ProgressRetention time.Duration
}

// defaultConsumerSettings are Pekko's reference.conf values.
func defaultConsumerSettings() consumerSettings {
	return consumerSettings{
		FlowControlWindow: 50,
		ResendIntervalMin: 2 * time.Second,
		ResendIntervalMax: 30 * time.Second,
		OnlyFlowControl:   false,
		ProgressRetention: time.Hour,
	}
}

func (s consumerSettings) withDefaults() consumerSettings {
	d := defaultConsumerSettings()
	if s.FlowControlWindow <= 0 {
		s.FlowControlWindow = d.FlowControlWindow
	}
	if s.ResendIntervalMin <= 0 {
		s.ResendIntervalMin = d.ResendIntervalMin
	}
	if s.ResendIntervalMax <= 0 {
		s.ResendIntervalMax = d.ResendIntervalMax
	}
	if s.ResendIntervalMax < s.ResendIntervalMin {
		s.ResendIntervalMax = s.ResendIntervalMin
	}
	if s.ProgressRetention <= 0 {
		s.ProgressRetention = d.ProgressRetention
	}
	return s
}
