#!/usr/bin/env bash
# GPU check, for a GPU node with binaries built elsewhere (`make build` and
# `make gpu-tests` on a machine with Go; copy bin/ along with the tree):
#   1. compiles the PTX with nvcc and fails if it differs from the committed PTX;
#   2. micro-benchmarks (NVLink store bandwidth, cross-GPU flag round trip;
#      the one-rank floor kernels checked against the host, a failed check
#      failing the run; with ncu, the local pair's floors per kernel and the
#      floor kernels' times); with ncu, what the defaults' LL pair waits on,
#      per instruction (scripts/stalls.sh);
#   3. `epbench devices`, then each validated run under `timeout -k`;
#   4. prints a short table last.
# With --mps it runs only the section for ranks that share one GPU under MPS
# (after step 1): 2, 4 and 8 ranks on GPU 0, back to back with jitter and
# in-stream validation, every protocol, rank-major and the token sub-tests;
# the active-mask test (-T) at 4 and 8 ranks; then the kernels built with one
# ordering step broken on purpose (scripts/ptx.sh EPBENCH_BREAK), each of
# which validation must catch; a short table last.
# With --gin it runs only the MPS section's GIN part (below).
# Usage: scripts/gpu-check.sh [--quick | --mps | --gin] [--out DIR]
# With NCCL_HOME set (an NCCL 2.30+ build, e.g. from scripts/nccl.sh), both
# sections also validate the NCCL transport (--transport nccl), and the MPS
# section -n (every peer through NCCL's proxy GIN, its puts moved between the
# ranks by the test RMA plugin nccl/testdata/rmaipc, built here by
# scripts/rma-plugin.sh): 2, 4 and 8 ranks back to back with jitter, and a
# plugin that stops making progress, which the host must report (exit 4)
# instead of waiting for ever.
# Environment: NVCC (default nvcc), NP (default: GPU count), MPIRUN_ARGS, NCCL_HOME,
# NCCL_INCLUDE (NCCL's headers for the GIN variants, default NCCL_HOME/include),
# PERF (set: the performance runs also with --quick), PERF_ITERS (timed
# iterations of the performance runs, default 200),
# REFERENCE (an ep_bench output to compare the default run with).
set -uo pipefail
# shellcheck source=usage.sh
source "$(dirname "$0")/usage.sh"

quick=
mps=
gin=
out=${OUT:-out}
while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=1 ;;
	--mps) mps=1 ;;
	--gin) mps=1 gin=1 ;;
	--out)
		[ $# -ge 2 ] || usage "--out needs a folder"
		out=$2
		shift
		;;
	-h | --help) common_opt h ;;
	*) usage "unknown argument $1" ;;
	esac
	shift
done
cd "$(dirname "$0")/.."
mkdir -p "$out"
nvcc=${NVCC:-nvcc}
gpus=$(nvidia-smi -L | grep -c '^GPU')
np=${NP:-$gpus}
root=()
[ "$(id -u)" = 0 ] && root=(--allow-run-as-root)
log=$out/gpu-check.log
: >"$log"
results=()
status=0

say() { echo "$@" | tee -a "$log"; }
# shellcheck source=summary.sh
source scripts/summary.sh
# averages FILE: "D C H" of an epbench summary, the kernel timer's dispatch
# and combine averages and the host D+C average (us; - where absent).
averages() {
	local d c h
	d=$(kernel_avg "$1" Dispatch) c=$(kernel_avg "$1" Combine) h=$(host_avg "$1")
	echo "${d:--} ${c:--} ${h:--}"
}

# 1. PTX of record. The GIN variants need NCCL's headers (NCCL_INCLUDE, or
# NCCL_HOME/include as scripts/nccl.sh installs them); without them the
# others are checked.
ptxdir=$(mktemp -d)
subset=()
inc=${NCCL_INCLUDE:-${NCCL_HOME:+$NCCL_HOME/include}}
if [ -n "$inc" ] && [ -f "$inc/nccl_device.h" ]; then
	export NCCL_INCLUDE=$inc
else
	mapfile -t subset < <(bash scripts/ptx.sh --defines | cut -f1 | grep -v '^ll_nccl_' | sed 's/^ll_//; s/\.ptx$//')
	say "ptx: no NCCL headers (NCCL_INCLUDE, NCCL_HOME/include): the GIN variants (ll_nccl_*) are not checked"
fi
same() { # every file nvcc built is the committed one
	local f
	for f in "$ptxdir"/*.ptx; do cmp "$f" "kernels/ptx/$(basename "$f")" || return 1; done
	[ ${#subset[@]} -gt 0 ] || diff -rq "$ptxdir" kernels/ptx
}
if bash scripts/ptx.sh "$nvcc" "$ptxdir" "${subset[@]}" >>"$log" 2>&1; then
	if same >>"$log" 2>&1; then
		say "ptx: committed kernels/ptx matches nvcc $("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
		results+=("ptx|match|ok")
	else
		say "ptx: kernels/ptx DIFFERS from what nvcc builds from kernels/*.cu; the fresh PTX is in $out/ptx"
		mkdir -p "$out/ptx"
		cp "$ptxdir"/*.ptx "$out/ptx/"
		results+=("ptx|differs|FAIL")
		status=1
		export EPBENCH_PTX_DIR=$ptxdir
	fi
else
	say "ptx: nvcc failed (see $log)"
	results+=("ptx|nvcc failed|FAIL")
	status=1
fi
# The machine code each module's kernels run, for the record (scripts/sass-size.sh, with the ptxas and cuobjdump
# beside nvcc): what a launch fetches again from the second level of the instruction caches.
nvbin=$(dirname "$(command -v "$nvcc" || echo "$nvcc")")
export PTXAS=${PTXAS:-$nvbin/ptxas} CUOBJDUMP=${CUOBJDUMP:-$nvbin/cuobjdump}
if ! compgen -G "$ptxdir/ll_*.ptx" >/dev/null; then
	say "sass-size: no PTX built, not measured"
elif ! command -v "$PTXAS" >/dev/null || ! command -v "$CUOBJDUMP" >/dev/null; then
	say "sass-size: no $PTXAS or $CUOBJDUMP (set PTXAS and CUOBJDUMP), not measured"
else
	bash scripts/sass-size.sh "$ptxdir" >"$out/sass-size.md" 2>>"$log"
	sass_rc=$?
	cat "$out/sass-size.md" >>"$log"
	if [ $sass_rc = 0 ]; then
		say "sass-size: each module's entries' instructions in $out/sass-size.md"
	else
		say "sass-size: exit $sass_rc (see $out/sass-size.md and $log)"
	fi
fi

# Every epbench run below loads the fresh PTX when the committed one differs.
ptx_args=()
[ -n "${EPBENCH_PTX_DIR:-}" ] && ptx_args=(--ptx-dir "$EPBENCH_PTX_DIR")
# The NCCL transport's runs, where an NCCL build is named.
nccl_x=()
[ -n "${NCCL_HOME:-}" ] && nccl_x=(-x NCCL_HOME)

summary() {
	echo "=== gpu-check summary ($(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), $1) ==="
	for r in "${results[@]}"; do
		IFS='|' read -r name what verdict <<<"$r"
		printf '%-44s %-10s %s\n' "$name" "$verdict" "$what"
	done
}

if [ -n "$mps" ]; then
	# Ranks sharing GPU 0 under MPS, really concurrent (time-sliced ranks
	# never overlap). The daemon is restarted here: a run killed mid-kernel
	# can leave it unusable.
	export CUDA_MPS_PIPE_DIRECTORY=${CUDA_MPS_PIPE_DIRECTORY:-/tmp/epbench-mps} CUDA_MPS_LOG_DIRECTORY=${CUDA_MPS_LOG_DIRECTORY:-/tmp/epbench-mpslog}
	mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
	mps_start() {
		echo quit | timeout 30 nvidia-cuda-mps-control >/dev/null 2>&1
		sleep 1
		CUDA_VISIBLE_DEVICES=0 timeout 30 nvidia-cuda-mps-control -d
	}
	mps_run() { # name limit np args... (rc and output in $out/run.txt)
		local name=$1 limit=$2 n=$3
		shift 3
		say "### $name: mpirun -np $n bin/epbench $*"
		local t0=$SECONDS
		timeout -k 10 "$limit" mpirun "${root[@]}" --oversubscribe -np "$n" -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY \
			-x CUDA_VISIBLE_DEVICES=0 "${nccl_x[@]}" "${extra_x[@]}" bin/epbench "$@" >"$out/run.txt" 2>&1
		mps_rc=$?
		cat "$out/run.txt" >>"$log"
		mps_secs=$((SECONDS - t0))
	}
	mps_result() { # name ok(0|1) what-if-ok [what-if-not]: records the last mps_run; a failure also restarts MPS
		if [ "$2" = 1 ]; then
			results+=("$1|$3|ok")
		else
			results+=("$1|rc=$mps_rc${4:+, $4}, ${mps_secs} s|FAIL")
			status=1
			tail -5 "$out/run.txt"
			mps_start
		fi
	}
	soak=(-V --back-to-back --jitter-us 20 --validate-every 50 -i 1000)
	extra_x=()
	mps_start
	[ -n "$gin" ] || for n in 2 4 8; do
		for c in "-t 1" "-t 1 --dispatch-dtype fp8_e4m3 --combine-mode direct_send" \
			"" "--combine-mode direct_send" "--dispatch-dtype fp8_e4m3" "--dispatch-dtype fp8_e4m3 --combine-mode direct_send" \
			"--protocol fenced" "--protocol fenced -t 1 --combine-mode direct_send" \
			"--protocol inline -t 15 --dispatch-dtype fp8_e4m3" "--protocol lines -t 32 --dispatch-dtype fp8_e4m3" \
			"-L rm" "-L rm -t 1" "-L rm --protocol fenced --dispatch-dtype fp8_e4m3" "-N" "-L rm -N" "-l 64 -S 8" \
			${NCCL_HOME:+"--transport nccl" "--transport nccl --dispatch-dtype fp8_e4m3 --combine-mode direct_send"}; do
			# shellcheck disable=SC2086
			mps_run "mps $n ${c:-defaults}" 120 "$n" "${soak[@]}" $c "${ptx_args[@]}"
			g=$(grep -o 'kernels: [0-9]* blocks' "$out/run.txt" | head -1)
			v=$(grep -o 'Global validation: .*' "$out/run.txt" | head -1)
			mps_result "mps $n ${c:-defaults}" "$((mps_rc == 0))" "${g#kernels: }, ${v:-no validation}, ${mps_secs} s"
		done
	done
	# Elastic EP's active-mask test (at least 4 ranks): every check passes, the combine outputs of its masked
	# step included (bench/masktest.go).
	[ -n "$gin" ] || for n in 4 8; do
		for c in "" "--protocol fenced" "-t 1" "-L rm" "--combine-mode direct_send" "--dispatch-dtype fp8_e4m3"; do
			# shellcheck disable=SC2086
			mps_run "mask $n ${c:-defaults}" 120 "$n" -T --timeout-ms 1000 -w 3 -i 20 $c "${ptx_args[@]}"
			ok=0
			[ $mps_rc -eq 0 ] && grep -q '=== Active-Mask Test Complete ===' "$out/run.txt" && ok=1
			mps_result "mask $n ${c:-defaults}" $ok "every check passed, ${mps_secs} s" "$(grep -c 'check: FAILED' "$out/run.txt") checks failed"
		done
	done
	# The broken builds: each is run where its breakage can bite (two ranks,
	# back to back with jitter, a validated pair every 10), small rows so
	# that 2000 validated pairs take seconds. Caught: validation fails (3)
	# or a rank waits for data that never comes (4). A build that passes
	# 2000 validated pairs is recorded as not observable on one GPU.
	small=(-d 1024 -k 4 -e 8 -V --back-to-back --jitter-us 20 --validate-every 10 -i 20000 --timeout-ms 2000)
	[ -n "$gin" ] || for b in "noparity inline_inline_bf16_rlr --protocol inline -t 1" \
		"flagfirst inline_inline_bf16_rlr --protocol inline -t 8" \
		"noparity lines_lines_bf16_rlr --protocol lines -t 32" \
		"flagfirst lines_lines_bf16_rlr --protocol lines -t 32" \
		"noparity fenced_fenced_bf16_rlr --protocol fenced -t 32" \
		"nofence fenced_fenced_bf16_rlr --protocol fenced -t 32"; do
		read -r brk variant rest <<<"$b"
		dir=$(mktemp -d)
		if ! EPBENCH_BREAK=$brk bash scripts/ptx.sh "$nvcc" "$dir" "$variant" >>"$log" 2>&1; then
			results+=("broken $brk $variant|build failed|FAIL")
			status=1
			continue
		fi
		# shellcheck disable=SC2086
		mps_run "broken $brk $variant" 150 2 "${small[@]}" $rest --ptx-dir "$dir"
		case $mps_rc in
		3) results+=("broken $brk $variant|validation failed: $(grep -o 'validation after [0-9]* timed iterations' "$out/run.txt" | head -1)|caught") ;;
		4) results+=("broken $brk $variant|a rank timed out ($(grep -o 'timed out waiting for rank [0-9]*' "$out/run.txt" | head -1))|caught") ;;
		0) results+=("broken $brk $variant|2000 validated pairs passed: not observable on one GPU|survived") ;;
		*) mps_result "broken $brk $variant" 0 "" ;; # records the failure, restarts MPS
		esac
		case $mps_rc in 3 | 4) mps_start ;; esac
	done
	# -n: every peer through NCCL's proxy GIN, the puts moved by the test
	# RMA plugin (which holds back unsignalled puts and runs them newest
	# first); slow by design, so fewer iterations.
	if [ -n "${NCCL_HOME:-}" ] && bash scripts/rma-plugin.sh "$out/librma-ipc.so" >>"$log" 2>&1; then
		gin_x=(-x "NCCL_RMA_PLUGIN=$(cd "$out" && pwd)/librma-ipc.so" -x NCCL_GIN_TYPE=2)
		extra_x=("${gin_x[@]}")
		for nc in 2: "2:--dispatch-dtype fp8_e4m3" "2:-L rm" "2:-t 1" "2:-t 7 -d 2304 -k 5 -e 40" "2:--cuda-graph" \
			4: "4:-L rm --dispatch-dtype fp8_e4m3" "8:--dispatch-dtype fp8_e4m3"; do
			n=${nc%%:*} c=${nc#*:}
			# shellcheck disable=SC2086
			mps_run "gin $n ${c:-defaults}" 180 "$n" -n -V --back-to-back --jitter-us 20 --validate-every 5 -w 3 -i 20 $c "${ptx_args[@]}"
			v=$(grep -o 'Global validation: .*' "$out/run.txt" | head -1)
			ok=0
			[ $mps_rc -eq 0 ] && [ -n "$v" ] && ok=1
			mps_result "gin $n ${c:-defaults}" $ok "$v, ${mps_secs} s"
		done
		# A GIN backend that stops making progress holds a kernel in NCCL's
		# unbounded waits: the host reports it (exit 4) after --timeout-ms
		# and the margin, and does not wait for ever. stalled NAME PUTS
		# ARGS...: 2 ranks, the plugin stopping after PUTS puts.
		stalled() {
			local name=$1 puts=$2
			shift 2
			extra_x=("${gin_x[@]}" -x EPBENCH_RMA_STALL_AFTER="$puts")
			mps_run "$name" 120 2 -n "$@" --timeout-ms 2000 "${ptx_args[@]}"
			local ok=0
			[ $mps_rc -eq 4 ] && grep -q 'stopped making progress' "$out/run.txt" && ok=1
			mps_result "$name" $ok "exit 4 after ${mps_secs} s"
			[ $ok = 0 ] || mps_start # a run that ends with kernels held can leave MPS unusable
		}
		stalled "gin stalled backend" 300 -w 3 -i 40
		# In the timed pairs back to back the first wait after the stall is
		# a validated pair's copy, not a stream sync.
		stalled "gin stalled backend, validated back to back" 1500 -V --back-to-back --validate-every 2 -w 3 -i 60
		extra_x=()
	elif [ -n "$gin" ] || [ -n "${NCCL_HOME:-}" ]; then
		if [ -n "${NCCL_HOME:-}" ]; then
			results+=("gin|the test plugin did not build (scripts/rma-plugin.sh; see $log)|FAIL")
		else
			results+=("gin|needs NCCL_HOME (the NCCL build the test plugin is built against, scripts/rma-plugin.sh)|FAIL")
		fi
		status=1
	fi
	echo quit | timeout 30 nvidia-cuda-mps-control
	echo
	summary "ranks sharing GPU 0 under MPS"
	timer_notes "$log"
	exit $status
fi

# 2. Micro-benchmarks, what a launch pays for code another kernel's code
# evicted (docs/PERF.md, kernels v39), whether late blocks are late for their
# SM (docs/PERF.md, "Late SMs") and the one-rank floor kernels checked
# against the host (docs/PERF.md, "The one-rank floor kernels"); with Nsight
# Compute at hand, also the local pair's floors per kernel (docs/PERF.md,
# kernels v23; 100 of each) and the floor kernels' times, timed by the
# profiler without touching clocks or caches.
if [ -f scripts/microbench.cu ]; then
	if "$nvcc" -O3 -arch=sm_90 -o "$ptxdir/microbench" scripts/microbench.cu >>"$log" 2>&1; then
		timeout -k 5 60 "$ptxdir/microbench" 2>&1 | tee -a "$log"
		timeout -k 5 60 "$ptxdir/microbench" icache 2>&1 | tee -a "$log"
		timeout -k 5 60 "$ptxdir/microbench" balance 2>&1 | tee -a "$log"
		# The profiler skips the check launches (the count microbench prints)
		# and the first 50 BF16 pairs.
		floor_skip=
		timeout -k 5 120 "$ptxdir/microbench" floor >"$ptxdir/floor.txt" 2>&1
		case $? in
		0)
			floor_skip=$(sed -n 's/^floor: \([0-9]*\) check launches.*/\1/p' "$ptxdir/floor.txt")
			if [ -n "$floor_skip" ]; then
				floor_skip=$((floor_skip + 100))
				say "floor kernels: checked against the host"
				results+=("floor kernels|checked against the host|ok")
			else
				say "floor kernels: checked, but no count of check launches printed: not profiled"
				results+=("floor kernels|no count of check launches|FAIL")
				status=1
			fi
			;;
		3)
			say "floor kernels: $(tail -1 "$ptxdir/floor.txt")"
			results+=("floor kernels|the shape does not fit this GPU|skipped")
			;;
		*)
			say "floor kernels: check failed (see $log):"
			tail -5 "$ptxdir/floor.txt"
			results+=("floor kernels|check failed|FAIL")
			status=1
			;;
		esac
		cat "$ptxdir/floor.txt" >>"$log"
		if command -v ncu >/dev/null 2>&1; then
			if timeout -k 5 180 ncu --cache-control none --clock-control none --csv --page raw \
				--metrics gpu__time_duration.sum -k regex:'pair_|empty' --launch-skip 70 --launch-count 700 \
				"$ptxdir/microbench" pair >"$ptxdir/pair.csv" 2>>"$log"; then
				pair_floors "$ptxdir/pair.csv" | tee -a "$log"
			else
				say "pair floors: ncu failed (see $log)"
			fi
			# The floor kernels past their checks and the first 50 BF16 pairs: 150
			# BF16 pairs, then the 200 FP8 dispatches, each with a combine and an
			# empty kernel (the probes after them are left to docs/PERF.md's runs).
			if [ -n "$floor_skip" ] && timeout -k 5 200 ncu --cache-control none --clock-control none --csv --page raw \
				--metrics gpu__time_duration.sum -k regex:'floor_|empty' --launch-skip "$floor_skip" --launch-count 900 \
				"$ptxdir/microbench" floor >"$ptxdir/floor.csv" 2>>"$log"; then
				pair_floors "$ptxdir/floor.csv" | tee -a "$log"
			elif [ -n "$floor_skip" ]; then
				say "floor kernels: ncu failed (see $log)"
			fi
		fi
	else
		say "microbench: build failed"
	fi
fi

# What the defaults' LL pair waits on, per instruction (docs/PERF.md, kernels
# v42), where Nsight Compute is at hand: every warp sampled, one launch of
# each kernel, summarized by scripts/stalls.sh (the shares count, not the
# times); the CSVs stay in the output folder.
if command -v ncu >/dev/null 2>&1; then
	for k in dispatch combine; do
		if timeout -k 5 120 mpirun "${root[@]}" -np 1 ncu --section SourceCounters --section WarpStateStats \
			--warp-sampling-interval 0 -k regex:"epbench_ll_$k\$" --launch-skip 20 --launch-count 1 -f \
			-o "$ptxdir/stalls_$k" bin/epbench --no-kernel-timing -w 3 -i 30 "${ptx_args[@]}" >>"$log" 2>&1 &&
			timeout -k 5 120 ncu --import "$ptxdir/stalls_$k.ncu-rep" --page source --csv --print-source sass \
				>"$out/stalls_$k.csv" 2>>"$log"; then
			bash scripts/stalls.sh "$out/stalls_$k.csv" 2>&1 | tee -a "$log"
		else
			say "stalls $k: ncu failed (see $log)"
		fi
	done
fi

run() { # name timeout-seconds np args...
	local name=$1 limit=$2 n=$3
	shift 3
	say "### $name: mpirun -np $n bin/epbench $* ${ptx_args[*]}"
	local t0=$SECONDS
	timeout -k 10 "$limit" mpirun "${root[@]}" -np "$n" ${MPIRUN_ARGS:-} "${nccl_x[@]}" bin/epbench "$@" "${ptx_args[@]}" >"$out/run.txt" 2>&1
	local rc=$?
	cat "$out/run.txt" >>"$log"
	local v d c h
	v=$(grep -o 'Global validation: .*' "$out/run.txt" | head -1)
	read -r d c h < <(averages "$out/run.txt")
	local verdict=ok
	[ $rc -ne 0 ] && verdict="FAIL rc=$rc" && status=1
	results+=("$name|host D+C ${h:--} us, kernel D ${d:--} C ${c:--} us, ${v:-no validation}, $((SECONDS - t0)) s|$verdict")
	[ $rc -ne 0 ] && tail -20 "$out/run.txt"
	return 0
}

say "### devices"
timeout -k 10 60 mpirun "${root[@]}" -np "$np" bin/epbench devices 2>&1 | tee -a "$log"
[ "${PIPESTATUS[0]}" -eq 0 ] && results+=("devices|$np ranks|ok") || { results+=("devices|$np ranks|FAIL"); status=1; }

for mode in rank_local_reduce direct_send; do
	run "defaults $mode" 120 "$np" -V --combine-mode "$mode"
	run "fp8 $mode" 120 "$np" -V --dispatch-dtype fp8_e4m3 --combine-mode "$mode"
	[ -n "$quick" ] && continue
	for t in 1 32 256; do run "-t $t $mode" 120 "$np" -V -t "$t" --combine-mode "$mode"; done
	for k in 1 4 9; do run "-k $k $mode" 120 "$np" -V -k "$k" --combine-mode "$mode"; done
	for d in 4096 8192; do run "-d $d $mode" 120 "$np" -V -d "$d" --combine-mode "$mode"; done
	for e in 64 288; do run "-e $e $mode" 120 "$np" -V -e "$e" --combine-mode "$mode"; done
	run "--reroute 4 $mode" 120 "$np" -V --reroute 4 --combine-mode "$mode"
	run "-t 1 fenced $mode" 120 "$np" -V -t 1 --protocol fenced --combine-mode "$mode"
	run "inline -t 15 fp8 $mode" 120 "$np" -V -t 15 --protocol inline --dispatch-dtype fp8_e4m3 --combine-mode "$mode"
	# auto over NVLink: lines for a BF16 dispatch and for either combine, fenced for an FP8 dispatch:
	# each also the other way
	run "fenced $mode" 120 "$np" -V --protocol fenced --combine-mode "$mode"
	run "lines fp8 $mode" 120 "$np" -V --protocol lines --dispatch-dtype fp8_e4m3 --combine-mode "$mode"
	run "-t 300 -nb 5 $mode" 120 "$np" -V -t 300 --num-blocks 5 --combine-mode "$mode"
	run "cuda-graph $mode" 120 "$np" -V --cuda-graph --combine-mode "$mode"
	run "cuda-graph -t 1 $mode" 120 "$np" -V --cuda-graph -t 1 --combine-mode "$mode"
	run "cuda-graph fp8 soak $mode" 120 "$np" -V --cuda-graph --dispatch-dtype fp8_e4m3 -i 400 --validate-every 100 --reroute 2 --combine-mode "$mode"
	run "-np 1 $mode" 120 1 -V --combine-mode "$mode"
	if [ -n "${NCCL_HOME:-}" ]; then
		run "nccl $mode" 120 "$np" -V --transport nccl --combine-mode "$mode"
		run "nccl fp8 $mode" 120 "$np" -V --transport nccl --dispatch-dtype fp8_e4m3 --combine-mode "$mode"
		run "nccl -np 1 -t 7 $mode" 120 1 -V --transport nccl -t 7 -d 2304 -k 5 -e 40 --combine-mode "$mode"
	fi
	run "-i 1000 $mode" 300 "$np" -V -i 1000 --combine-mode "$mode"
done

# Validated sweeps: one set-up re-targeted from 1 to 256 tokens crosses the
# protocols auto picks (inline, then lines) and changes the grid's work per
# call; then the fenced protocol throughout, and CUDA graphs (captured again
# at every size).
for v in "--combine-mode rank_local_reduce" "--combine-mode direct_send" "--protocol fenced" "--cuda-graph"; do
	say "### sweep $v: mpirun -np $np bin/epbench sweep -t 1,2,3,8,64,256 -V -i 20 $v"
	# shellcheck disable=SC2086
	timeout -k 10 120 mpirun "${root[@]}" -np "$np" bin/epbench sweep -t 1,2,3,8,64,256 -V -i 20 $v "${ptx_args[@]}" >"$out/run.txt" 2>&1
	rc=$?
	cat "$out/run.txt" >>"$log"
	if [ $rc -eq 0 ]; then results+=("sweep ${v#--}|6 sizes validated|ok"); else results+=("sweep ${v#--}|rc=$rc|FAIL"); status=1; tail -20 "$out/run.txt"; fi
done

# Performance table after validation (no -V): tokens x combine mode x dtype.
perf=()
if [ -z "$quick" ] || [ -n "${PERF:-}" ]; then
	# bf16/fenced: the protocol auto replaces, for comparison; bf16/graph: --cuda-graph.
	for dt in bf16 fp8_e4m3 bf16/fenced bf16/graph; do
		proto=auto
		extra=()
		[ "$dt" = bf16/fenced ] && proto=fenced
		[ "$dt" = bf16/graph ] && extra=(--cuda-graph)
		for mode in rank_local_reduce direct_send; do
			for t in 1 8 32 128 256; do
				skip=
				case $dt in
				bf16/fenced) [ "$t" -lt 8 ] && skip=1 ;;
				bf16/graph) [ "$mode" = direct_send ] && skip=1 ;;
				esac
				[ -n "$skip" ] && continue
				args=(-i "${PERF_ITERS:-200}" -t "$t" --dispatch-dtype "${dt%/*}" --protocol "$proto" --combine-mode "$mode" "${extra[@]}" "${ptx_args[@]}")
				echo "### perf $dt $mode -t $t: mpirun -np $np bin/epbench ${args[*]}" >>"$log" # the run's name, for timer_notes
				timeout -k 10 120 mpirun "${root[@]}" -np "$np" bin/epbench "${args[@]}" >"$out/run.txt" 2>&1
				rc=$?
				cat "$out/run.txt" >>"$log"
				read -r d c h < <(averages "$out/run.txt")
				perf+=("$(printf '%-10s %-18s %5s %10s %10s %10s %s' "$dt" "$mode" "$t" "${d:--}" "${c:--}" "${h:--}" "$([ $rc -ne 0 ] && echo "FAIL rc=$rc")")")
				[ "$dt$mode$t" = bf16rank_local_reduce128 ] && cp "$out/run.txt" "$out/default.txt"
			done
		done
	done
fi

echo
if [ ${#perf[@]} -gt 0 ]; then
	echo "=== performance ($np ranks; kernel = CUPTI avg over ranks, us) ==="
	printf '%-10s %-18s %5s %10s %10s %10s\n' dtype combine tokens kernel-D kernel-C host-D+C
	for p in "${perf[@]}"; do echo "$p"; done
	reference=${REFERENCE:-report/testdata/reference/ll_t128_i50.ep_bench.out}
	if [ -f "$out/default.txt" ] && [ -f "$reference" ]; then
		echo
		bin/epbench compare --label epbench --label ep_bench "$out/default.txt" "$reference"
	fi
	echo
fi
summary "$np ranks"
# epbench's own doubts about its kernel averages (first timed pair, CUPTI beyond the events), informational:
# how many, and the first few with their runs.
timer_notes "$log"
exit $status
