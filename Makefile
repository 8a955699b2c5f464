# epbench build. Knobs (override on the command line or in the environment):
#   CUDA_HOME    CUDA toolkit; when it has no cuda.h, `make deps` extracts the driver header,
#                the libcuda link stub and the CUPTI headers into $(DEPS_PREFIX)/cuda.
#   NVCC         CUDA compiler for `make ptx` (CUDA 13 for the committed PTX).
#   MPI_HOME     an MPI install whose lib/pkgconfig holds ompi.pc; default: pkg-config's search path.
#   NP           ranks for `make run` (default: the GPU count, or 4 on the CPU backend).
#   RUN_ARGS     extra epbench flags for `make run`.
#   NOBUILD=1    `make run` uses the binaries already in bin/ (GPU nodes without Go).
CUDA_HOME   ?= /usr/local/cuda
NVCC        ?= $(CUDA_HOME)/bin/nvcc
MPI_HOME    ?=
DEPS_PREFIX ?= $(CURDIR)/.deps
GO          ?= go
MPIRUN      ?= mpirun
NP          ?=
RUN_ARGS    ?=
NOBUILD     ?=
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

# The CUDA headers: a real toolkit when there is one, else the extracted ones.
CUDA_ROOT  := $(if $(wildcard $(CUDA_HOME)/include/cuda.h),$(CUDA_HOME),$(DEPS_PREFIX)/cuda)
CUPTI_INC  := $(firstword $(wildcard $(CUDA_ROOT)/extras/CUPTI/include) $(CUDA_ROOT)/include)
export CGO_CFLAGS  := -Wno-deprecated-declarations -I$(CURDIR)/cudashim -I$(CUDA_ROOT)/include -I$(CUPTI_INC) $(CGO_CFLAGS)
export CGO_LDFLAGS := -L$(CUDA_ROOT)/lib64/stubs -L$(CUDA_ROOT)/lib64 $(CGO_LDFLAGS)
ifneq ($(MPI_HOME),)
export PKG_CONFIG_PATH := $(MPI_HOME)/lib/pkgconfig:$(MPI_HOME)/lib64/pkgconfig:$(PKG_CONFIG_PATH)
endif

LDFLAGS  := -X github.com/epbench/epbench/app.Version=$(VERSION)
# Packages whose tests need a GPU (they link libcuda): built by `make gpu-tests`, run on GPU nodes.
GPU_PKGS := ./gpu/... ./cmd/epbench-cuda/...
PTX_SRCS := $(sort $(wildcard kernels/*.cu kernels/*.cuh))

.PHONY: all deps build test run ptx fmt vet check clean gpu-tests

all: build

deps:
	@bash scripts/deps.sh "$(CUDA_HOME)" "$(DEPS_PREFIX)"

build: deps
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/epbench .
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/epbench-cuda ./cmd/epbench-cuda

# GPU test binaries, to be copied to a GPU node with bin/ (no Go needed there).
gpu-tests: deps
	@mkdir -p bin
	$(GO) test -c -o bin/gpu.test ./gpu

test: build
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 15m $$($(GO) list ./... | grep -v -e /gpu -e /cmd/epbench-cuda)

ifeq ($(NOBUILD),)
run: build
else
run:
endif
	@bash scripts/run.sh "$(MPIRUN)" "$(NP)" $(RUN_ARGS)

# Regenerates kernels/ptx/*.ptx (one file per kernel variant) with a CUDA 13 nvcc; the first line of
# each file stamps the hash of the sources, flags and variant (kernels/ptx_test.go checks it).
ptx:
	@bash scripts/ptx.sh "$(NVCC)"

fmt:
	gofmt -w $$(git ls-files '*.go')

vet: deps
	$(GO) vet ./...

check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt drift:"; echo "$$out"; exit 1; fi
	@cp go.mod /tmp/epbench-go.mod.bak; cp go.sum /tmp/epbench-go.sum.bak; \
	 $(GO) mod tidy; \
	 if ! cmp -s go.mod /tmp/epbench-go.mod.bak || ! cmp -s go.sum /tmp/epbench-go.sum.bak; then \
	   cp /tmp/epbench-go.mod.bak go.mod; cp /tmp/epbench-go.sum.bak go.sum; echo "go mod tidy drift"; exit 1; fi

clean:
	rm -rf bin
