package mpi

import (
	"errors"
	"testing"
)

// A failed send is named by its rank, not by its request's place among the
// sends waited for; other errors pass as they are.
func TestSendErrorsNameRanks(t *testing.T) {
	boom, other := errors.New("boom"), errors.New("other")
	err := sendErrors(errors.Join(&RequestError{Index: 1, Err: boom}, other, &RequestError{Index: 0, Err: boom}), []int{3, 5})
	want := "the send to rank 5: boom\nother\nthe send to rank 3: boom"
	if err == nil || err.Error() != want {
		t.Fatalf("sendErrors = %v, want %q", err, want)
	}
	if !errors.Is(err, boom) || !errors.Is(err, other) {
		t.Errorf("sendErrors(%v) does not wrap the requests' errors", err)
	}
	if got := sendErrors(&RequestError{Index: 0, Err: boom}, []int{7}).Error(); got != "the send to rank 7: boom" {
		t.Errorf("one failure: %q", got)
	}
}
