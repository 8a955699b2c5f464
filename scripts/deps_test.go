// Package scripts holds the tests of the shell scripts beside it.
package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeSystem is a Debian system in a folder: a PATH of the tools deps.sh
// uses, where apt-get, apt-cache, tee and dpkg-deb are stand-ins that log
// what they are asked to do (nothing outside the folder changes).
type fakeSystem struct {
	t                  *testing.T
	bin, state, prefix string
	osRelease          string
}

// fake writes an executable stand-in named name.
func (s *fakeSystem) fake(name, body string) {
	s.t.Helper()
	script := "#!/bin/sh\nPATH=/usr/bin:/bin\nSTATE=" + s.state + "\nBIN=" + s.bin + "\n" + body
	require.NoError(s.t, os.WriteFile(filepath.Join(s.bin, name), []byte(script), 0o755))
}

func newFakeSystem(t *testing.T, nonFree, gcc bool) *fakeSystem {
	t.Helper()
	root := t.TempDir()
	s := &fakeSystem{t: t, bin: filepath.Join(root, "bin"), state: filepath.Join(root, "state"),
		prefix: filepath.Join(root, "deps"), osRelease: filepath.Join(root, "os-release")}
	require.NoError(t, os.MkdirAll(s.bin, 0o755))
	require.NoError(t, os.MkdirAll(s.state, 0o755))
	require.NoError(t, os.WriteFile(s.osRelease, []byte("ID=debian\nVERSION_CODENAME=bookworm\n"), 0o644))
	for _, tool := range []string{"env", "mktemp", "chmod", "mkdir", "cp", "rm", "tar", "grep"} {
		p, err := exec.LookPath(tool)
		require.NoError(t, err)
		require.NoError(t, os.Symlink(p, filepath.Join(s.bin, tool)))
	}
	if nonFree {
		require.NoError(t, os.WriteFile(filepath.Join(s.state, "nonfree"), nil, 0o644))
	}
	if gcc {
		s.fake("gcc", "exit 0\n")
	}
	s.fake("id", "echo 0\n")
	s.fake("mpirun", "exit 0\n")
	s.fake("pkg-config", "exit 0\n")
	// apt-cache offers the package once the non-free component is on, and
	// like the real one goes on writing after the candidate line (a long
	// version table), so a reader that stops early makes it die of SIGPIPE.
	s.fake("apt-cache", `echo "nvidia-cuda-dev:"
echo "  Installed: (none)"
if [ -f "$STATE/nonfree" ]; then c=11.8.89~11.8.0-5~deb12u1; else c="(none)"; fi
echo "  Candidate: $c"
echo "  Version table:"
i=0
while [ $i -lt 4000 ]; do echo "     11.8.89~11.8.0-5~deb12u1 500 http://deb.debian.org/debian bookworm/non-free"; i=$((i+1)); done
`)
	s.fake("apt-get", `echo "apt-get $*" >> "$STATE/log"
case "$1" in
download) touch nvidia-cuda-dev_11.8_amd64.deb libcupti-dev_11.8_amd64.deb ;;
install) case " $* " in *" gcc "*) printf '#!/bin/sh\nexit 0\n' > "$BIN/gcc"; chmod 755 "$BIN/gcc" ;; esac ;;
esac
`)
	s.fake("tee", `echo "tee $*" >> "$STATE/log"
cat > "$STATE/source"
touch "$STATE/nonfree"
`)
	s.fake("dpkg-deb", `case "$1" in
--fsys-tarfile)
	d=$(mktemp -d)
	mkdir -p "$d/usr/include/nvtx3/nvtxDetail" "$d/usr/lib/x86_64-linux-gnu/stubs"
	echo cuda > "$d/usr/include/cuda.h"; echo stub > "$d/usr/lib/x86_64-linux-gnu/stubs/libcuda.so"
	echo nvtx > "$d/usr/include/nvtx3/nvToolsExt.h"; echo impl > "$d/usr/include/nvtx3/nvtxDetail/nvtxImpl.h"
	echo other > "$d/usr/include/other.h"
	tar -C "$d" -c ./usr
	rm -rf "$d" ;;
-x)
	mkdir -p "$3/usr/include"
	for h in cupti.h cupti_activity.h cuda_stdint.h generated_cuda_meta.h; do echo "$h" > "$3/usr/include/$h"; done ;;
esac
`)
	return s
}

// run runs deps.sh and returns its output and the log of what the
// stand-ins were asked to do in this run.
func (s *fakeSystem) run() (string, []string) {
	s.t.Helper()
	bash, err := exec.LookPath("bash")
	require.NoError(s.t, err)
	os.Remove(filepath.Join(s.state, "log"))
	cmd := exec.Command(bash, "deps.sh", filepath.Join(s.state, "no-cuda-toolkit"), s.prefix)
	cmd.Env = []string{"PATH=" + s.bin, "EPBENCH_OS_RELEASE=" + s.osRelease, "TMPDIR=" + s.t.TempDir(), "HOME=" + s.state}
	out, err := cmd.CombinedOutput()
	require.NoError(s.t, err, "deps.sh: %s", out)
	b, err := os.ReadFile(filepath.Join(s.state, "log"))
	if os.IsNotExist(err) {
		return string(out), nil
	}
	require.NoError(s.t, err)
	return string(out), strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

func (s *fakeSystem) extracted() {
	s.t.Helper()
	for _, f := range []string{"include/cuda.h", "include/cupti.h", "include/cuda_stdint.h", "include/generated_cuda_meta.h",
		"include/nvtx3/nvToolsExt.h", "include/nvtx3/nvtxDetail/nvtxImpl.h", "lib64/stubs/libcuda.so"} {
		assert.FileExists(s.t, filepath.Join(s.prefix, "cuda", f))
	}
	assert.NoFileExists(s.t, filepath.Join(s.prefix, "cuda", "include", "other.h"), "only the headers the build needs")
}

// With the non-free component already on, deps.sh downloads the two
// packages and touches neither the apt sources nor the package lists; a
// second run does nothing at all.
func TestDepsLeavesAptAloneWhenNonFreeIsOn(t *testing.T) {
	s := newFakeSystem(t, true, true)
	_, log := s.run()
	assert.Equal(t, []string{"apt-get download -qq nvidia-cuda-dev libcupti-dev"}, log)
	s.extracted()
	out, log := s.run()
	assert.Empty(t, log, "a second run changes nothing")
	assert.Empty(t, out, "a second run is quiet")
}

// Without it, deps.sh adds the component once, updates, and goes on.
func TestDepsEnablesNonFreeOnce(t *testing.T) {
	s := newFakeSystem(t, false, true)
	out, log := s.run()
	assert.Equal(t, []string{
		"apt-get update -qq",
		"tee /etc/apt/sources.list.d/epbench-non-free.sources",
		"apt-get update -qq",
		"apt-get download -qq nvidia-cuda-dev libcupti-dev",
	}, log)
	assert.Contains(t, out, "deps: enabling the non-free component")
	src, err := os.ReadFile(filepath.Join(s.state, "source"))
	require.NoError(t, err)
	assert.Equal(t, "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: non-free\n"+
		"Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n", string(src))
	s.extracted()
	_, log = s.run()
	assert.Empty(t, log)
}

// A Debian system without gcc (recommended packages left out) gets it.
func TestDepsInstallsACompiler(t *testing.T) {
	s := newFakeSystem(t, true, false)
	out, log := s.run()
	require.NotEmpty(t, log)
	assert.Equal(t, []string{
		"apt-get update -qq",
		"apt-get install -y -qq gcc libc6-dev",
		"apt-get download -qq nvidia-cuda-dev libcupti-dev",
	}, log)
	assert.Contains(t, out, "deps: installing a C compiler (gcc) and the C library headers")
	_, log = s.run()
	assert.Empty(t, log)
}
