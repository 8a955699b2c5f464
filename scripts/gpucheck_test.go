package scripts

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// gpu-check's bad command lines end at once, before anything touches a GPU:
// one line saying what is wrong, the synopsis, exit 2.
func TestGPUCheckUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--out"}, "gpu-check: --out needs a folder\n"},
		{[]string{"--quick", "--bogus"}, "gpu-check: unknown argument --bogus\n"},
	} {
		out, stderr, code := runScript(t, nil, "gpu-check.sh", c.args...)
		assert.Equal(t, 2, code, "%v", c.args)
		assert.Empty(t, out, "%v", c.args)
		assert.Equal(t, c.want+"usage: scripts/gpu-check.sh [--quick | --mps | --gin] [--out DIR]\n", stderr, "%v", c.args)
	}
	out, _, code := runScript(t, nil, "gpu-check.sh", "--help")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "Usage: scripts/gpu-check.sh [--quick | --mps | --gin] [--out DIR]")
}
