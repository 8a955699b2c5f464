package sidebyside

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const ncclBench = "/opt/nccl/build/test/nccl_ep/ep_bench"

// mpiPrefix is the launcher part every command shares on one node with
// ranksPerNode ranks, for a non-root user.
func mpiPrefix(np, ppn string) []string {
	return []string{"mpirun", "-np", np, "--map-by", "ppr:" + ppn + ":node", "--bind-to", "none",
		"-mca", "pml", "ob1", "-mca", "btl", "self,vader,tcp",
		"-mca", "coll_hcoll_enable", "0", "-mca", "coll_ucc_enable", "0"}
}

func concat(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func commandsFor(t *testing.T, args ...string) (*Options, map[string]Command) {
	t.Helper()
	o, err := Parse(append([]string{"--run", "--dry-run", "--hpcx", "none"}, args...), Env{})
	require.NoError(t, err)
	cmds := map[string]Command{}
	hf := newHostfile(o, "/tmp/epbench-hostfile")
	for _, name := range o.Libs {
		cmds[name] = o.command(programs[name], hf, os.LookupEnv)
	}
	return o, cmds
}

func TestCommandsSingleNode(t *testing.T) {
	fixedEnv(t)
	asRoot(t, false)
	_, cmds := commandsFor(t, "--ep-lib", "both", "--nproc-per-node", "4", "--epbench", "/opt/epbench/bin/epbench",
		"--nccl-ep-bench", ncclBench, "-t", "32", "-e", "64", "-i", "200", "--epbench-args", "--protocol fenced")
	problem := []string{"-a", "ll", "-L", "em", "-t", "32", "-d", "7168", "-k", "8", "-e", "64", "-w", "10", "-i", "200"}

	ep := cmds["epbench"]
	assert.Equal(t, []string{"NCCL_NVLS_ENABLE=0"}, ep.Env)
	assert.Equal(t, concat(mpiPrefix("4", "4"),
		[]string{"-x", "LD_LIBRARY_PATH", "-x", "PATH", "-x", "NCCL_NVLS_ENABLE", "/opt/epbench/bin/epbench"},
		problem, []string{"--dispatch-dtype", "bf16", "--combine-mode", "rank_local_reduce", "--protocol", "fenced"}), ep.Argv)

	nccl := cmds["nccl-ep"]
	assert.Equal(t, []string{
		"NCCL_NVLS_ENABLE=0",
		"LD_LIBRARY_PATH=/opt/nccl/build/lib:/usr/lib/mpi",
		"CUDA_HOME=/usr/local/cuda-13.0",
		"UCX_TLS=tcp,sm,self,cuda_copy",
		"UCX_HANDLE_ERRORS=none",
		"NCCL_NET_PLUGIN=none",
		"NCCL_IB_DISABLE=1",
		"NCCL_MNNVL_ENABLE=0",
	}, nccl.Env)
	assert.Equal(t, concat(mpiPrefix("4", "4"),
		[]string{"-x", "LD_LIBRARY_PATH", "-x", "PATH", "-x", "NCCL_NVLS_ENABLE", "-x", "CUDA_HOME", "-x", "UCX_TLS",
			"-x", "UCX_HANDLE_ERRORS", "-x", "NCCL_NET_PLUGIN", "-x", "NCCL_IB_DISABLE", "-x", "NCCL_MNNVL_ENABLE", ncclBench},
		problem), nccl.Argv)
}

func TestCommandsMultiNode(t *testing.T) {
	fixedEnv(t)
	asRoot(t, true)
	o, cmds := commandsFor(t, "--ep-lib", "nccl-ep,epbench", "--nodes", "10.0.0.1 node-2.cluster", "--nproc-per-node", "8",
		"--iface", "enp1s0f0", "--epbench", "/opt/epbench/bin/epbench", "--nccl-ep-bench", ncclBench,
		"--nccl-lib-path", "/opt/nccl/lib", "--mpirun-args", "--mca plm_rsh_agent ssh")
	assert.Equal(t, []string{"nccl-ep", "epbench"}, o.Libs)
	launch := []string{"mpirun", "--allow-run-as-root", "-np", "16", "--hostfile", "/tmp/epbench-hostfile",
		"--map-by", "ppr:8:node", "--bind-to", "none", "-mca", "pml", "ob1", "-mca", "btl", "self,vader,tcp",
		"-mca", "btl_tcp_if_include", "enp1s0f0", "-mca", "coll_hcoll_enable", "0", "-mca", "coll_ucc_enable", "0",
		"--mca", "plm_rsh_agent", "ssh"}

	nccl := cmds["nccl-ep"]
	assert.Contains(t, nccl.Env, "NCCL_MNNVL_ENABLE=1", "NVLink across nodes")
	assert.Contains(t, nccl.Env, "UCX_NET_DEVICES=enp1s0f0")
	assert.Contains(t, nccl.Env, "NCCL_SOCKET_IFNAME=enp1s0f0")
	assert.Contains(t, nccl.Env, "LD_LIBRARY_PATH=/opt/nccl/lib:/usr/lib/mpi")
	assert.Equal(t, launch, nccl.Argv[:len(launch)])
	assert.Equal(t, []string{"-x", "UCX_NET_DEVICES", "-x", "NCCL_SOCKET_IFNAME"}, nccl.Argv[len(launch)+8:len(launch)+12])

	ep := cmds["epbench"]
	assert.Equal(t, launch, ep.Argv[:len(launch)])
	assert.Equal(t, []string{"-x", "LD_LIBRARY_PATH", "-x", "PATH", "-x", "NCCL_NVLS_ENABLE", "/opt/epbench/bin/epbench"},
		ep.Argv[len(launch):len(launch)+7])

	hf := newHostfile(o, "/tmp/epbench-hostfile")
	assert.Equal(t, []string{"10.0.0.1 slots=8", "node-2.cluster slots=8"}, hf.lines)
	assert.Equal(t, `printf '%s\n' '10.0.0.1 slots=8' 'node-2.cluster slots=8' > /tmp/epbench-hostfile`, hf.String())
}

func TestHostfileIsWrittenAndRemoved(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	o := &Options{Nodes: []string{"h1", "h2"}, RanksPerNode: 2}
	hf := newHostfile(o, "")
	require.NoError(t, hf.write())
	b, err := os.ReadFile(hf.path)
	require.NoError(t, err)
	assert.Equal(t, "h1 slots=2\nh2 slots=2\n", string(b))
	hf.remove()
	_, err = os.Stat(hf.path)
	assert.True(t, os.IsNotExist(err))
	assert.Nil(t, newHostfile(&Options{RanksPerNode: 2}, ""), "no hostfile on this node alone")
}

func TestCommandsWithHPCX(t *testing.T) {
	fixedEnv(t)
	asRoot(t, false)
	hpcx := t.TempDir()
	for _, d := range []string{"ompi/bin", "ompi/lib", "ucx/lib/ucx", "ucc/lib"} {
		require.NoError(t, os.MkdirAll(filepath.Join(hpcx, d), 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(hpcx, "ompi/bin/mpirun"), []byte("#!/bin/sh\n"), 0o755))
	t.Setenv("PATH", "/usr/bin")
	o, err := Parse([]string{"--run", "--dry-run", "--ep-lib", "both", "--hpcx", hpcx, "--nproc-per-node", "2",
		"--epbench", "/e/epbench", "--nccl-ep-bench", ncclBench}, Env{})
	require.NoError(t, err)
	nccl := o.command(programs["nccl-ep"], nil, os.LookupEnv)
	assert.Equal(t, filepath.Join(hpcx, "ompi/bin/mpirun"), nccl.Argv[0])
	assert.Equal(t, []string{
		"OPAL_PREFIX=" + hpcx + "/ompi",
		"PATH=" + hpcx + "/ompi/bin:/usr/bin",
		"LD_LIBRARY_PATH=/opt/nccl/build/lib:" + hpcx + "/ompi/lib:" + hpcx + "/ucx/lib:" + hpcx + "/ucx/lib/ucx:" +
			hpcx + "/ucc/lib:/usr/lib/mpi",
	}, nccl.Env[:3], "the NCCL build first, then HPC-X, then what was there")
	assert.Contains(t, strings.Join(nccl.Argv, " "), "-x LD_LIBRARY_PATH -x PATH -x OPAL_PREFIX -x NCCL_NVLS_ENABLE")
	ep := o.command(programs["epbench"], nil, os.LookupEnv)
	assert.Equal(t, "OPAL_PREFIX="+hpcx+"/ompi", ep.Env[0])
}

// The dry run prints every command, quoted for a shell, and starts nothing.
func TestDryRunPrintsCommands(t *testing.T) {
	fixedEnv(t)
	asRoot(t, false)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	out, errOut, err := mainRun(t, 4, "--run", "--dry-run", "--hpcx", "none", "--ep-lib", "both",
		"--nodes", "h1 h2", "--epbench", "/opt/my epbench/epbench", "--nccl-ep-bench", ncclBench, "-e", "128")
	require.NoError(t, err)
	assert.Empty(t, errOut)
	mpi := "mpirun -np 8 --hostfile " + tmp + "/epbench-hostfile --map-by ppr:4:node --bind-to none -mca pml ob1 " +
		"-mca btl self,vader,tcp -mca coll_hcoll_enable 0 -mca coll_ucc_enable 0"
	problem := "-a ll -L em -t 128 -d 7168 -k 8 -e 128 -w 10 -i 50"
	want := `$ printf '%s\n' 'h1 slots=4' 'h2 slots=4' > ` + tmp + `/epbench-hostfile

########## ep-lib=epbench ##########
$ env NCCL_NVLS_ENABLE=0 ` + mpi + ` -x LD_LIBRARY_PATH -x PATH -x NCCL_NVLS_ENABLE '/opt/my epbench/epbench' ` +
		problem + ` --dispatch-dtype bf16 --combine-mode rank_local_reduce

########## ep-lib=nccl-ep ##########
$ env NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=/opt/nccl/build/lib:/usr/lib/mpi CUDA_HOME=/usr/local/cuda-13.0 ` +
		`UCX_TLS=tcp,sm,self,cuda_copy UCX_HANDLE_ERRORS=none NCCL_NET_PLUGIN=none NCCL_IB_DISABLE=1 NCCL_MNNVL_ENABLE=1 ` +
		mpi + ` -x LD_LIBRARY_PATH -x PATH -x NCCL_NVLS_ENABLE -x CUDA_HOME -x UCX_TLS -x UCX_HANDLE_ERRORS ` +
		`-x NCCL_NET_PLUGIN -x NCCL_IB_DISABLE -x NCCL_MNNVL_ENABLE ` + ncclBench + ` ` + problem + "\n"
	assert.Equal(t, want, out)
	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	assert.Empty(t, left, "a dry run writes no hostfile")
}

func TestDryRunWritesNoJSON(t *testing.T) {
	fixedEnv(t)
	path := filepath.Join(t.TempDir(), "r.json")
	_, _, err := mainRun(t, 2, "--run", "--dry-run", "--hpcx", "none", "--ep-lib", "epbench", "--json", path)
	require.NoError(t, err)
	_, err = os.Stat(path)
	assert.True(t, os.IsNotExist(err))
}
