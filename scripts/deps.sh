#!/usr/bin/env bash
# Installs what building epbench needs, only where it is missing:
#   - a C compiler and the C library headers (cgo), from the distribution;
#   - Open MPI (headers, libmpi, mpirun) from the distribution;
#   - when no CUDA toolkit is found at CUDA_HOME: the CUDA driver header, the
#     libcuda link stub, the NVTX3 headers (header-only, for -p) and the
#     CUPTI headers, extracted from Debian's non-free
#     (Ubuntu: multiverse) packages into a project-local prefix.
# Idempotent and quiet when there is nothing to do: a second run changes
# nothing. Never needs a GPU.
#
# Usage: scripts/deps.sh CUDA_HOME DEPS_PREFIX
# EPBENCH_OS_RELEASE names another os-release file (for tests).
set -euo pipefail

cuda_home=${1:?CUDA_HOME}
prefix=${2:?DEPS_PREFIX}

say() { echo "deps: $*" >&2; }
die() { echo "deps: error: $*" >&2; exit 1; }

as_root() {
	if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
		die "need root to run: $*"
	fi
}

apt_updated=
apt_update() {
	[ -n "$apt_updated" ] && return 0
	as_root apt-get update -qq >/dev/null
	apt_updated=1
}

apt_install() {
	command -v apt-get >/dev/null || die "$1 is missing and apt-get is not available: install $1"
	say "installing $1"
	shift
	apt_update
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# cgo builds with $CC, else gcc; Debian's gcc only recommends the C library
# headers, so a system without recommended packages may lack them.
have_cc() { command -v "${CC:-gcc}" >/dev/null && { [ -n "${CC:-}" ] || [ -f /usr/include/stdlib.h ]; }; }

if ! have_cc; then
	apt_install "a C compiler (${CC:-gcc}) and the C library headers" gcc libc6-dev
	have_cc || die "still no C compiler (${CC:-gcc}) after installing gcc"
fi

have_mpi() { command -v mpirun >/dev/null && command -v pkg-config >/dev/null && pkg-config --exists ompi; }

if ! have_mpi; then
	command -v apt-get >/dev/null || die "Open MPI is missing and apt-get is not available: install Open MPI (dev headers, mpirun) and pkg-config"
	say "installing Open MPI"
	apt_update
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libopenmpi-dev openmpi-bin pkg-config >/dev/null
	have_mpi || die "Open MPI still not found after installing it"
fi

# A CUDA toolkit (or an earlier extraction) is complete when it has the driver
# header, the NVTX3 headers, the CUPTI headers and the libcuda link stub.
cuda_complete() {
	local root=$1
	[ -f "$root/include/cuda.h" ] && [ -f "$root/include/nvtx3/nvToolsExt.h" ] && [ -f "$root/include/cupti.h" ] &&
		[ -f "$root/lib64/stubs/libcuda.so" ]
}
cupti_in_extras() {
	[ -f "$cuda_home/include/cuda.h" ] && [ -f "$cuda_home/include/nvtx3/nvToolsExt.h" ] &&
		[ -f "$cuda_home/extras/CUPTI/include/cupti.h" ] && [ -f "$cuda_home/lib64/stubs/libcuda.so" ]
}

if cuda_complete "$cuda_home" || cupti_in_extras || cuda_complete "$prefix/cuda"; then
	exit 0
fi

command -v apt-get >/dev/null || die "no CUDA toolkit at CUDA_HOME=$cuda_home and apt-get is not available: set CUDA_HOME to a toolkit"
. "${EPBENCH_OS_RELEASE:-/etc/os-release}"
case "${ID:-}" in
debian)
	uri=http://deb.debian.org/debian
	component=non-free
	;;
ubuntu)
	uri=http://archive.ubuntu.com/ubuntu
	component=multiverse
	;;
*) die "no CUDA toolkit at CUDA_HOME=$cuda_home, and ${ID:-this system} is neither Debian nor Ubuntu: set CUDA_HOME to a toolkit" ;;
esac

# Whether apt offers the CUDA driver header package. The output is read
# whole first: grep -q stops at the first match, and under pipefail the
# SIGPIPE apt-cache then gets would read as "no candidate".
have_candidate() {
	local policy
	policy=$(apt-cache policy nvidia-cuda-dev 2>/dev/null) || return 1
	[[ $policy =~ Candidate:\ [0-9] ]]
}

if ! have_candidate; then
	apt_update
fi
if ! have_candidate; then
	say "enabling the $component component for the CUDA driver headers"
	list=/etc/apt/sources.list.d/epbench-$component.sources
	printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: %s\nSigned-By: %s\n' \
		"$uri" "$VERSION_CODENAME" "$component" \
		"$( [ "$ID" = debian ] && echo /usr/share/keyrings/debian-archive-keyring.gpg || echo /usr/share/keyrings/ubuntu-archive-keyring.gpg)" |
		as_root tee "$list" >/dev/null
	apt_updated=
	apt_update
fi

say "extracting cuda.h, the libcuda stub, the NVTX3 and the CUPTI headers into $prefix/cuda"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
(cd "$work" && apt-get download -qq nvidia-cuda-dev libcupti-dev 2>/dev/null) ||
	die "could not download nvidia-cuda-dev and libcupti-dev"
mkdir -p "$work/x"
# Only two files and the NVTX3 headers of the 774 MB toolkit package are needed.
dpkg-deb --fsys-tarfile "$work"/nvidia-cuda-dev_*.deb |
	tar -x -C "$work/x" ./usr/include/cuda.h ./usr/include/nvtx3 ./usr/lib/x86_64-linux-gnu/stubs/libcuda.so
dpkg-deb -x "$work"/libcupti-dev_*.deb "$work/x"

mkdir -p "$prefix/cuda/include" "$prefix/cuda/lib64/stubs"
cp "$work/x/usr/include/cuda.h" "$prefix/cuda/include/"
rm -rf "$prefix/cuda/include/nvtx3"
cp -R "$work/x/usr/include/nvtx3" "$prefix/cuda/include/"
cp "$work"/x/usr/include/cupti*.h "$work"/x/usr/include/cuda_stdint.h "$work"/x/usr/include/generated_*.h "$prefix/cuda/include/"
cp "$work/x/usr/lib/x86_64-linux-gnu/stubs/libcuda.so" "$prefix/cuda/lib64/stubs/"
cuda_complete "$prefix/cuda" || die "extraction into $prefix/cuda is incomplete"
