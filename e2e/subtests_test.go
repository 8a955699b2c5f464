package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epbench/epbench/report"
)

// ep_bench's sub-tests on the CPU backend, validated, at 2, 4 and 8 ranks:
// the rank-major layout, fewer tokens than the buffers hold, uneven counts
// with a rank that dispatches none, and dispatch-only validation; each
// prints ep_bench's header lines for it.
func TestCPUSubTests(t *testing.T) {
	shape := []string{"--backend", "cpu", "-V", "-t", "12", "-d", "256", "-k", "3", "-w", "1", "-i", "3"}
	cases := []struct {
		name  string
		args  []string
		lines []string // in the output, each whole
	}{
		{"rank-major", []string{"-L", "rm"}, []string{"  Layout:          rank-major"}},
		{"rank-major fp8", []string{"--layout", "rank-major", "--dispatch-dtype", "fp8_e4m3"}, []string{"  Layout:          rank-major", "  Dispatch dtype:  FP8_E4M3"}},
		{"fewer tokens", []string{"-l", "5"}, []string{"  Sub-test:        Uniform tokens (num<max=5)"}},
		{"uneven tokens", []string{"-N"}, []string{"  Sub-test:        Non-uniform tokens in [0, 12] (last rank forced to 0)"}},
		{"rank-major uneven", []string{"-L", "rm", "--non-uniform-tokens"}, []string{"  Layout:          rank-major"}},
	}
	for _, np := range []int{2, 4, 8} {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/%d ranks", c.name, np), func(t *testing.T) {
				args := append(append(append([]string{}, shape...), "-e", fmt.Sprint(2*np)), c.args...)
				r := mpirun(t, np, args...)
				require.Equal(t, 0, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
				for _, l := range c.lines {
					assert.Contains(t, r.stdout, "\n"+l+"\n")
				}
				assert.Contains(t, r.stdout, "Global validation: Dispatch=PASSED, Combine=PASSED")
				if strings.Contains(c.name, "uneven") {
					assert.Regexp(t, `\nPer-rank token counts: r0=12( r\d+=\d+)* r`+fmt.Sprint(np-1)+`=0\n`, r.stdout)
				}
				if strings.Contains(c.name, "rank-major") {
					assert.Regexp(t, `\nBytes between GPUs: dispatch=\S+ MB \((BF16|FP8_E4M3)\), combine=\S+ MB \(BF16\), messages=\d+\n`, r.stdout)
				} else {
					assert.NotContains(t, r.stdout, "Bytes between GPUs")
				}
				assert.Empty(t, errorLines(r.stderr))
			})
		}
	}
	t.Run("dispatch only", func(t *testing.T) {
		r := mpirun(t, 4, append(append([]string{}, shape...), "-e", "8", "-D")...)
		require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
		assert.Contains(t, r.stdout, "Dispatch validation: PASSED")
		assert.NotContains(t, r.stdout, "Combine validation")
		assert.Contains(t, r.stdout, "Global validation: Dispatch=PASSED\n")
	})
}

// Flags that only change how the GPU runs are refused on the CPU backend,
// and the sub-tests' combinations that make no sense are usage errors:
// exit 2 and one error line on every rank.
func TestSubTestUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-S", "8"}, "epbench: error: --max-num-sms needs the CUDA backend"},
		{[]string{"-p"}, "epbench: error: --profile needs the CUDA backend"},
		{[]string{"--num-blocks", "4"}, "epbench: error: --num-blocks needs the CUDA backend"},
		{[]string{"--protocol", "fenced"}, "epbench: error: --protocol needs the CUDA backend"},
		{[]string{"--cupti-region"}, "epbench: error: --cupti-region needs the CUDA backend"},
		{[]string{"-L", "rm", "--combine-mode", "direct_send"}, "epbench: error: --combine-mode: "},
		{[]string{"-D"}, "epbench: error: --dispatch-only: "},
		{[]string{"-l", "4", "-N"}, "epbench: error: "},
		{[]string{"-l", "200"}, "epbench: error: --dispatch-less-than-max-tokens: "},
		{[]string{"-l", "0"}, "epbench: error: --dispatch-less-than-max-tokens: must be at least 1"},
		{[]string{"-T"}, "epbench: error: --mask-test: needs at least 4 ranks"},
	} {
		r := mpirun(t, 2, append([]string{"--backend", "cpu"}, c.args...)...)
		assert.Equal(t, 2, r.code, "%v: stdout %s stderr %s", c.args, r.stdout, r.stderr)
		lines := errorLines(r.stderr)
		if assert.Len(t, lines, 1, "%v: exactly one error line, got %q", c.args, r.stderr) {
			assert.True(t, strings.HasPrefix(lines[0], c.want), "%v: %q", c.args, lines[0])
		}
	}
}

// Elastic EP's active-mask test on the CPU backend at 4 and 8 ranks (and at
// 4 in rank-major, direct_send and FP8): rank 1 skips a dispatch and ranks
// 1 and 3 a combine; the others mask them within --timeout-ms instead of
// failing, and every check passes, their combine outputs included.
func TestCPUMaskTest(t *testing.T) {
	for _, c := range []struct {
		np    int
		extra []string
	}{{4, nil}, {8, nil}, {4, []string{"-L", "rm"}}, {4, []string{"--combine-mode", "direct_send"}},
		{4, []string{"--dispatch-dtype", "fp8_e4m3"}}} {
		np := c.np
		t.Run(fmt.Sprintf("%d ranks %v", np, c.extra), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "r.json")
			args := append([]string{"--backend", "cpu", "-T", "-t", "12", "-d", "256", "-k", "3", "-e", fmt.Sprint(2 * np),
				"-w", "1", "-i", "3", "--timeout-ms", "500", "--json", path}, c.extra...)
			r := mpirun(t, np, args...)
			require.Equal(t, 0, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
			// Every rank that combined had its output of the masked step
			// checked, with ranks 1 and 3 left out, and it passed.
			raw, err := os.ReadFile(path)
			require.NoError(t, err)
			var res report.Result
			require.NoError(t, json.Unmarshal(raw, &res))
			require.NotNil(t, res.MaskTest)
			for _, m := range res.MaskTest.Ranks {
				if m.Rank == 1 || m.Rank == 3 {
					assert.Nil(t, m.CombineOutput, "rank %d skipped the combine", m.Rank)
				} else if assert.NotNil(t, m.CombineOutput, "rank %d", m.Rank) {
					assert.True(t, m.CombineOutput.OK, "rank %d: %s", m.Rank, m.CombineOutput.First)
				}
			}
			assert.Contains(t, r.stdout, "Global validation: Dispatch=PASSED, Combine=PASSED") // -T implies -V
			block := r.stdout[strings.Index(r.stdout, "=== Active-Mask Test ==="):]
			rest := strings.Repeat(",1", np-4)
			var want []string
			for q := 0; q < np; q++ {
				if q != 1 {
					want = append(want, fmt.Sprintf("Rank %d: mask after dispatch = [1,0,1,1%s]", q, rest),
						fmt.Sprintf("Rank %d: dispatch mask check: PASSED (rank 1 mask=0)", q))
				}
			}
			for q := 0; q < np; q++ {
				if q != 1 && q != 3 {
					want = append(want, fmt.Sprintf("Rank %d: mask after combine = [1,0,1,0%s]", q, rest),
						fmt.Sprintf("Rank %d: combine mask check: PASSED (rank 1=0, rank 3=0)", q))
				}
			}
			for q := 0; q < np; q++ {
				want = append(want, fmt.Sprintf("Rank %d: mask clean check: PASSED", q))
			}
			want = append(want, "=== Active-Mask Test Complete ===")
			assert.Equal(t, "=== Active-Mask Test ===\n"+strings.Join(want, "\n")+"\n", block)
			assert.Empty(t, errorLines(r.stderr))
		})
	}
}
