// Package testwait waits in tests for a condition, and for a message to an
// actor (Probe); testkit's WaitFor is For.
package testwait

import (
	"reflect"
	"testing"
	"time"
)

// For polls cond until it is true, and fails t (Fatal) with msg when
// timeout passes first. msg is formatted with args; args that are funcs
// with no parameters and one result (such as testkit.Lazy) are evaluated
// at failure time. It must be called from the test's goroutine.
func For(t testing.TB, timeout time.Duration, cond func() bool, msg string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// One last look: the condition may have become true while we slept.
	if cond() {
		return
	}
	vals := make([]any, 0, len(args)+1)
	vals = append(vals, timeout)
	for _, a := range args {
		vals = append(vals, evalFunc(a))
	}
	t.Fatalf("timed out after %s waiting for "+msg, vals...)
}

// evalFunc calls a, if it is a func() T, and returns its result; other
// values are returned as they are.
func evalFunc(a any) any {
	v := reflect.ValueOf(a)
	if v.Kind() == reflect.Func && !v.IsNil() && v.Type().NumIn() == 0 && v.Type().NumOut() == 1 {
		return v.Call(nil)[0].Interface()
	}
	return a
}
