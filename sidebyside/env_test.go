package sidebyside

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestGetenvTakesTheSeedsNames(t *testing.T) {
	t.Setenv("EPBENCH_TOKENS", "")
	t.Setenv("MSCCLPP_EP_BENCH_TOKENS", "32")
	assert.Equal(t, "32", Getenv("EPBENCH_TOKENS"), "the seed's name stands in")
	t.Setenv("EPBENCH_TOKENS", "64")
	assert.Equal(t, "64", Getenv("EPBENCH_TOKENS"), "epbench's name wins")
	t.Setenv("MSCCLPP_EP_BENCH_ITERS", "7")
	t.Setenv("EPBENCH_ITERS", "")
	assert.Equal(t, "7", Getenv("EPBENCH_ITERS"))
	t.Setenv("OTHER", "")
	t.Setenv("MSCCLPP_EP_BENCH_OTHER", "x")
	assert.Equal(t, "", Getenv("OTHER"), "only EPBENCH_* names have seed names")
}
