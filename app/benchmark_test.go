package app

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/epbench/epbench/bench"
)

// otherTimeout stands for a backend's own timeout error (the GPU kernels').
type otherTimeout struct{}

func (otherTimeout) Error() string     { return "dispatch kernel: peer 3 did not arrive" }
func (otherTimeout) PeerTimeout() bool { return true }

func TestLoopErrorCodes(t *testing.T) {
	timeout := &bench.TimeoutError{Phase: "cpuref dispatch exchange", Ranks: []int{2}, After: time.Second}
	cases := []struct {
		err  error
		code int
	}{
		{fmt.Errorf("warm-up iteration 0: dispatch: %w", timeout), ExitTimeout},
		{fmt.Errorf("timed iteration 3: %w", otherTimeout{}), ExitTimeout},
		{&bench.ValidationError{After: 6, Ranks: []int{1}}, ExitValidation},
		{errors.New("cuda: out of memory"), ExitRuntime},
	}
	for _, c := range cases {
		got := runError(c.err)
		assert.Equal(t, c.code, CodeOf(got), "%v", c.err)
		assert.Equal(t, c.err.Error(), got.Error(), "the message is kept")
	}
}
