#!/usr/bin/env bash
# Times kernel builds alternated, as docs/PERF.md's kernel entries are measured: every round runs each
# configuration with every build in turn (one mpirun each), so that a drift of the GPU or the node over the
# minutes of the measurement falls on all builds alike. A build is NAME=DIR (its PTX, loaded with --ptx-dir;
# scripts/ptx.sh nvcc DIR builds it; epbench refuses it unless it was built for the binary's interface, and
# PTX of another interface is timed as NAME=exe:PATH with the binary of its own tree), NAME=embedded (the
# kernels in the binary) or NAME=exe:PATH (another epbench executable with the kernels embedded in it, e.g. an
# earlier release's; it must take the configurations' flags).
# Prints, per configuration and build, the kernel timer's dispatch and combine averages over the rounds as min–max
# (us), a markdown table.
# Each build first runs each configuration once validated (-w 3 -i 20 -V), and a build is not timed on a
# configuration it did not pass: a time counts only for kernels whose results are right. -n skips that (the
# table's last line then says the times were not validated).
# Usage: scripts/alternate.sh [-r ROUNDS] [-i ITERS] [-p NP] [-n] [-c 'FLAGS']... NAME=DIR|NAME=embedded|NAME=exe:PATH...
#   -r rounds (default 3), -i timed iterations per run (default 300), -p ranks (mpirun -np, default 1),
#   -n time without validating first, -V validate first (the default; kept for old command lines),
#   -c one configuration's epbench flags (repeatable; default: the defaults, ''), -h this help.
# Environment: EPBENCH (default bin/epbench), MPIRUN (default mpirun), MPIRUN_ARGS, LIMIT (seconds per run,
# default 120). Exit 0 when every run gave its numbers, 1 when one failed (FAIL in its cell) or a build did not
# validate, 2 on bad usage, 130 (143) when interrupted (terminated), after the run under way has stopped.
set -uo pipefail

# shellcheck source=usage.sh
source "$(dirname "$0")/usage.sh"

rounds=3 iters=300 np=1 validate=1
configs=()
while getopts ":r:i:p:c:nVh" opt; do
	case $opt in
	r) rounds=$OPTARG ;;
	i) iters=$OPTARG ;;
	p) np=$OPTARG ;;
	c) configs+=("$OPTARG") ;;
	n) validate= ;;
	V) validate=1 ;;
	*) common_opt "$opt" ;;
	esac
done
shift $((OPTIND - 1))
for v in "$rounds" "$iters" "$np"; do
	[[ $v =~ ^[1-9][0-9]*$ ]] || usage "-r, -i and -p take a positive count, got '$v'"
done
limit=${LIMIT:-120}
[[ $limit =~ ^[1-9][0-9]*$ ]] || usage "LIMIT takes a positive count of seconds, got '$limit'"
[ $# -ge 1 ] || usage "no build named"
[ ${#configs[@]} -gt 0 ] || configs=("")

names=() dirs=()
for b in "$@"; do
	[[ $b == *=* ]] || usage "a build is NAME=DIR, NAME=embedded or NAME=exe:PATH, got '$b'"
	name=${b%%=*} dir=${b#*=}
	[ -n "$name" ] && [ -n "$dir" ] || usage "a build is NAME=DIR, NAME=embedded or NAME=exe:PATH, got '$b'"
	for n in "${names[@]}"; do [ "$n" != "$name" ] || usage "build $name named twice"; done
	if [[ $dir == exe:* ]]; then
		[ -f "${dir#exe:}" ] && [ -x "${dir#exe:}" ] || usage "build $name: no executable ${dir#exe:}"
	elif [ "$dir" != embedded ]; then
		[ -d "$dir" ] || usage "build $name: no folder $dir"
		compgen -G "$dir/*.ptx" >/dev/null || usage "build $name: no PTX in $dir"
	fi
	names+=("$name") dirs+=("$dir")
done
# The configurations and MPIRUN_ARGS are split into words below, never
# expanded as file names.
set -f

epbench=${EPBENCH:-bin/epbench}
mpirun=${MPIRUN:-mpirun}
[ -f "$epbench" ] && [ -x "$epbench" ] || usage "no epbench at $epbench (make build, or set EPBENCH)"
command -v "$mpirun" >/dev/null || usage "no $mpirun (set MPIRUN)"
root=()
[ "$(id -u)" = 0 ] && root=(--allow-run-as-root)

# run BUILD-INDEX FLAGS...: one mpirun of the build; its output in $out. It
# runs in the background and is waited for, so that an interrupt (which
# timeout, in a process group of its own, would not see) stops it, waits
# until it has stopped (timeout's -k bounds that), and ends the script.
out=$(mktemp)
child=
trap 'rm -f "$out"' EXIT
stop() {
	if [ -n "$child" ]; then
		kill -TERM "$child" 2>/dev/null
		wait "$child" 2>/dev/null
	fi
	echo "alternate: $1" >&2
	exit "$2"
}
trap 'stop interrupted 130' INT
trap 'stop terminated 143' TERM
run() {
	local i=$1
	shift
	local ptx=() exe=$epbench
	case ${dirs[$i]} in
	embedded) ;;
	exe:*) exe=${dirs[$i]#exe:} ;;
	*) ptx=(--ptx-dir "${dirs[$i]}") ;;
	esac
	# shellcheck disable=SC2086
	timeout -k 5 "$limit" "$mpirun" "${root[@]}" -np "$np" ${MPIRUN_ARGS:-} "$exe" "${ptx[@]}" "$@" >"$out" 2>&1 &
	child=$!
	wait "$child"
	local rc=$?
	child=
	return $rc
}

# shellcheck source=summary.sh
source "$(dirname "${BASH_SOURCE[0]}")/summary.sh"

status=0
declare -A cells skip
if [ -n "$validate" ]; then
	for ci in "${!configs[@]}"; do
		for i in "${!names[@]}"; do
			# shellcheck disable=SC2086
			run "$i" -w 3 -i 20 -V ${configs[$ci]}
			rc=$?
			if [ $rc -ne 0 ] || ! grep -q 'Global validation: Dispatch=PASSED, Combine=PASSED' "$out"; then
				echo "alternate: ${names[$i]} [${configs[$ci]:-defaults}] did not validate (exit $rc):" >&2
				tail -5 "$out" >&2
				skip[$ci,$i]=1
				status=1
			fi
		done
	done
fi

for ((r = 1; r <= rounds; r++)); do
	for ci in "${!configs[@]}"; do
		for i in "${!names[@]}"; do
			[ -z "${skip[$ci,$i]:-}" ] || continue
			# shellcheck disable=SC2086
			run "$i" -i "$iters" ${configs[$ci]}
			rc=$?
			d=$(kernel_avg "$out" Dispatch) c=$(kernel_avg "$out" Combine)
			if [ $rc -ne 0 ] || [ -z "$d" ] || [ -z "$c" ]; then
				echo "alternate: round $r, ${names[$i]} [${configs[$ci]:-defaults}]: exit $rc, no kernel times:" >&2
				tail -5 "$out" >&2
				cells[$ci,$i]+=" FAIL"
				status=1
				continue
			fi
			echo "round $r [${configs[$ci]:-defaults}] ${names[$i]}: dispatch $d combine $c us" >&2
			cells[$ci,$i]+=" $d/$c"
		done
	done
done

# span VALUES FIELD: min–max (or the one value) of field 1 or 2 of "d/c" pairs; FAIL if any run failed.
span() {
	echo "$1" | tr ' ' '\n' | awk -F/ -v f="$2" '
		$0 == "" { next }
		$0 == "FAIL" { fail = 1; next }
		{
			v = $f + 0
			if (n == 0 || v < lo) { lo = v; los = $f }
			if (n == 0 || v > hi) { hi = v; his = $f }
			n++
		}
		END {
			if (fail) { print "FAIL"; exit }
			if (n == 0) { print "—"; exit }
			print (los == his ? los : los "–" his)
		}'
}

header="| flags |" rule="|---|"
for n in "${names[@]}"; do header+=" $n |" rule+="---|"; done
echo "$header"
echo "$rule"
for ci in "${!configs[@]}"; do
	row="| ${configs[$ci]:-defaults} |"
	for i in "${!names[@]}"; do
		if [ -n "${skip[$ci,$i]:-}" ]; then
			row+=" not valid |"
			continue
		fi
		v=${cells[$ci,$i]:-}
		row+=" $(span "$v" 1) / $(span "$v" 2) |"
	done
	echo "$row"
done
echo
checked="each build validated first (-w 3 -i 20 -V)"
[ -n "$validate" ] || checked="NOT validated (-n)"
echo "kernel timer, dispatch / combine avg (us), min–max over $rounds rounds of -i $iters at $np rank(s), builds alternated, $checked"
exit $status
