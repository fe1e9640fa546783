package main

import "testing"

func TestReliableCount(t *testing.T) {
	for _, c := range []struct{ n, entities, want int }{
		{1, 1000, 25_000},
		{25_000, 1000, 25_000},
		{25_001, 1000, 50_000},
		{200_000, 1000, 200_000},
		{10, 1, 25},
		{26, 1, 50},
	} {
		if got := reliableCount(c.n, c.entities); got != c.want {
			t.Errorf("reliableCount(%d, %d) = %d, want %d", c.n, c.entities, got, c.want)
		}
	}
}
