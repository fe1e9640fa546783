// Package option applies and checks the functional options of the public
// constructors: each package has its own Option type (a func(*config)
// error) and its own ErrInvalidOption, which the errors here wrap.
package option

import (
	"fmt"
	"time"
)

// Apply applies opts to c in order and returns the first error; a nil
// option is an error wrapping invalid.
func Apply[C any, O ~func(*C) error](c *C, opts []O, invalid error) error {
	for _, opt := range opts {
		if opt == nil {
			return fmt.Errorf("%w: nil option", invalid)
		}
		if err := opt(c); err != nil {
			return err
		}
	}
	return nil
}

// Invalid is an error wrapping invalid that says what option refused and
// why.
func Invalid(invalid error, option, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", invalid, option, fmt.Sprintf(format, args...))
}

// Positive refuses a duration that is not positive.
func Positive(invalid error, option string, d time.Duration) error {
	if d <= 0 {
		return Invalid(invalid, option, "%v is not positive", d)
	}
	return nil
}

// AtLeastOne refuses a count below 1.
func AtLeastOne(invalid error, option string, n int) error {
	if n < 1 {
		return Invalid(invalid, option, "%d is below 1", n)
	}
	return nil
}

// NotNil refuses a nil value (an interface or a pointer).
func NotNil[T comparable](invalid error, option, what string, v T) error {
	var zero T
	if v == zero {
		return Invalid(invalid, option, "nil %s", what)
	}
	return nil
}
