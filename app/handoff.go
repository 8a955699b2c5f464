package app

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/NVIDIA/go-nvml/pkg/dl"
	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// The GPU code lives in a second executable, bin/epbench-cuda, because
// gorgonia.org/cu initialises the CUDA driver in its package init() and exits
// where no GPU is usable, and because anything linked with it needs
// libcuda.so.1 just to load. bin/epbench stays free of both and hands the
// process over with execve when the CUDA backend is wanted: same PID, same
// environment, before MPI is initialised, so mpirun never notices.

// CUDAExeEnv overrides where the CUDA executable is looked for.
const CUDAExeEnv = "EPBENCH_CUDA_EXE"

// handoffEnv marks a process that was handed over, so a misnamed executable
// cannot hand over to itself forever.
const handoffEnv = "EPBENCH_HANDED_OVER"

// ErrNoCUDAExecutable means the CUDA executable was not found beside this one.
var ErrNoCUDAExecutable = errors.New("CUDA executable not found")

// cudaExecutable finds bin/epbench-cuda: $EPBENCH_CUDA_EXE, else beside this
// executable.
func cudaExecutable() (string, error) {
	p, from := os.Getenv(CUDAExeEnv), CUDAExeEnv+"="
	if p == "" {
		self, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("%w: %v", ErrNoCUDAExecutable, err)
		}
		p, from = filepath.Join(filepath.Dir(self), "epbench-cuda"), ""
	}
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%w: %s%s (build it with `make build`)", ErrNoCUDAExecutable, from, p)
	}
	return p, nil
}

// handOver replaces this process with the CUDA executable, keeping argv and
// the environment; it returns only on failure. Without a loadable CUDA
// driver (the loader would say so once per rank) rank 0 says so and it
// exits.
func handOver(args []string) error {
	if os.Getenv(handoffEnv) != "" {
		return Runtimef("%s does not hold the CUDA backend", os.Args[0])
	}
	exe, err := cudaExecutable()
	if err != nil {
		return Runtime(err)
	}
	if err := dl.New("libcuda.so.1", dl.RTLD_LAZY).Open(); err != nil {
		reportUsage(Runtimef("the CUDA backend needs the NVIDIA driver, which cannot be loaded here (%v); --backend cpu runs without it", err))
		os.Exit(ExitRuntime)
	}
	env := append(os.Environ(), handoffEnv+"=1")
	argv := append([]string{exe}, args...)
	if err := syscall.Exec(exe, argv, env); err != nil {
		return Runtimef("starting %s: %v", exe, err)
	}
	return nil
}

// gpuCount asks NVML, opened at run time, how many GPUs this node has. A node
// without the NVIDIA driver has none; libcuda is never loaded here.
func gpuCount() int {
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		return 0
	}
	defer nvml.Shutdown()
	if n, ret := nvml.DeviceGetCount(); ret == nvml.SUCCESS {
		return n
	}
	return 0
}
