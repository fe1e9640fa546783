package readme

import (
	"testing"
	"time"
)

func TestSingletonQuickstart(t *testing.T) {
	ctx, system := newNode(t, time.Minute)
	got, err := greetThroughSingleton(ctx, system)
	if err != nil {
		t.Fatal(err)
	}
	if got != "hello, Ada" {
		t.Fatalf("the singleton answered %q", got)
	}
}
