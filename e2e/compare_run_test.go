package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// On a machine with none of the benchmarks (nor mpirun, nor Python), the
// dry run of every program prints their four launch lines and exits 0.
func TestCompareRunDryRunAll(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("HPCX_HOME", "")
	r := run(t, 30*time.Second, epbench(), "compare", "--run", "--dry-run", "--ep-lib", "all", "--nproc-per-node", "2", "--hpcx", "none")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Empty(t, r.stderr)
	var launches []string
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(l, "$ ") {
			launches = append(launches, l)
		}
	}
	if assert.Len(t, launches, 4, r.stdout) {
		assert.Contains(t, launches[0], " "+epbench()+" -a ll -L em -t 128 ")
		assert.Contains(t, launches[1], " ep_bench -a ll -L em -t 128 ")
		assert.Contains(t, launches[2], " python3 -m torch.distributed.run --standalone --nnodes=1 --nproc_per_node=2 ep_bench_ll.py -a ll ")
		assert.Contains(t, launches[3], " mscclpp_ep_bench -a ll -t 128 ")
	}
}
