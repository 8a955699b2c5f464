package dl

import (
	"strings"
	"testing"
)

// libc is on every machine the tests run on; its own file is what Path
// names for one of its symbols.
func TestOpenSymbolPathClose(t *testing.T) {
	l, err := Open("libc.so.6")
	if err != nil {
		t.Fatal(err)
	}
	p, err := l.Symbol("strlen")
	if err != nil || p == nil {
		t.Fatalf("strlen: %v, %v", p, err)
	}
	if got := Path(p); !strings.Contains(got, "libc") {
		t.Errorf("Path(strlen) = %q, want libc's file", got)
	}
	if _, err := l.Symbol("ep_no_such_symbol"); err == nil || !strings.Contains(err.Error(), "ep_no_such_symbol") {
		t.Errorf("missing symbol: %v, want the loader's message naming it", err)
	}
	if err := Pin("libc.so.6"); err != nil {
		t.Errorf("Pin: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := l.Symbol("strlen"); err == nil {
		t.Error("Symbol after Close succeeded")
	}
}

func TestOpenMissing(t *testing.T) {
	_, err := Open("libep_no_such_library.so")
	if err == nil || !strings.Contains(err.Error(), "libep_no_such_library.so") {
		t.Errorf("Open of a missing library: %v, want the loader's message naming it", err)
	}
	if err := Pin("libep_no_such_library.so"); err == nil {
		t.Error("Pin of a library never opened succeeded")
	}
}
