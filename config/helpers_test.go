package config

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// Small assertion helpers; the module's go.sum does not carry testify's
// dependencies, so the tests stay on the standard library.

func msg(extra []any) string {
	if len(extra) == 0 {
		return ""
	}
	if format, ok := extra[0].(string); ok && len(extra) > 1 {
		return fmt.Sprintf(format, extra[1:]...) + ": "
	}
	return fmt.Sprint(extra...) + ": "
}

func equal(t *testing.T, want, got any, extra ...any) {
	t.Helper()
	if !reflect.DeepEqual(want, got) {
		t.Errorf("%sgot %#v, want %#v", msg(extra), got, want)
	}
}

func noErr(t *testing.T, err error, extra ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("%sunexpected error: %v", msg(extra), err)
	}
}

func errText(t *testing.T, err error, want string, extra ...any) {
	t.Helper()
	if err == nil {
		t.Fatalf("%sno error, want %q", msg(extra), want)
	}
	if err.Error() != want {
		t.Errorf("%serror %q, want %q", msg(extra), err.Error(), want)
	}
}

func contains(t *testing.T, s, sub string, extra ...any) {
	t.Helper()
	if !strings.Contains(s, sub) {
		t.Errorf("%stext does not contain %q", msg(extra), sub)
	}
}
