package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/protoshard/protoshard/testkit"
)

// TestScrapeAfterTraffic runs the example's node and traffic and scrapes
// its Prometheus endpoint in process: the protoshard series are there,
// with the entities, shards and allocations the traffic made and the
// forced drop counted under its reason class.
func TestScrapeAfterTraffic(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer n.stop()
	const entities = 12
	if err := n.traffic(entities); err != nil {
		t.Fatal(err)
	}

	var families map[string]*dto.MetricFamily
	value := func(name string, labels map[string]string) (float64, bool) {
		f, ok := families[name]
		if !ok {
			return 0, false
		}
	next:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue next
				}
			}
			switch {
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue(), true
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue(), true
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount()), true
			}
		}
		return 0, false
	}
	scrapeNow := func() {
		body, err := scrape(n.handler)
		if err != nil {
			t.Fatal(err)
		}
		var p expfmt.TextParser
		if families, err = p.TextToMetricFamilies(bytes.NewReader(body)); err != nil {
			t.Fatalf("parse the scrape: %v\n%s", err, body)
		}
	}
	counter := map[string]string{"type": typeName}
	// The drop is counted when the region actor has taken it: wait for it.
	testkit.WaitFor(t, 20*time.Second, func() bool {
		scrapeNow()
		v, _ := value("protoshard_dropped_messages_total", map[string]string{"reason": "nil_message"})
		return v == 1
	}, "want one drop with reason nil_message, got %v", testkit.Lazy(func() any { return families["protoshard_dropped_messages_total"] }))

	checks := []struct {
		name   string
		labels map[string]string
		ok     func(float64) bool
		want   string
	}{
		{"protoshard_region_entities", counter, func(v float64) bool { return v == entities }, "the 12 entities asked"},
		{"protoshard_region_shards", counter, func(v float64) bool { return v >= 1 && v <= 10 }, "1..10 shards"},
		{"protoshard_region_buffered_messages", counter, func(v float64) bool { return v == 0 }, "nothing buffered once all answered"},
		{"protoshard_shard_allocations_total", counter, func(v float64) bool { return v >= 1 && v <= 10 }, "one allocation per shard"},
		{"protoshard_coordinator_state_writes_total", map[string]string{"type": typeName, "outcome": "ok"}, func(v float64) bool { return v >= 1 }, "successful writes"},
		{"protoshard_coordinator_state_write_duration_seconds", counter, func(v float64) bool { return v >= 1 }, "write latencies recorded"},
		{"protoshard_singleton_state", map[string]string{"singleton": "sharding/" + typeName + "Coordinator", "state": "Oldest"}, func(v float64) bool { return v == 1 }, "the coordinator's manager is Oldest"},
	}
	for _, c := range checks {
		v, ok := value(c.name, c.labels)
		if !ok || !c.ok(v) {
			t.Errorf("%s%v = %v (present %v), want %s", c.name, c.labels, v, ok, c.want)
		}
	}
	if t.Failed() {
		body, _ := scrape(n.handler)
		t.Logf("scrape:\n%s", body)
	}
}
