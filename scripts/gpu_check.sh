#!/usr/bin/env bash
# The GPU verification script. On a machine with a CUDA GPU: builds for the GPU present,
# runs the whole test suite (GPU tests and the long tier included), runs compute-sanitizer
# memcheck, racecheck and synccheck over every GPU test, and runs the benchmark with checks.
# Logs and results go to the folder given (default: gpu-results). Exit status is nonzero if
# anything failed.
#
#   scripts/gpu_check.sh OUTDIR [bench args...]
# Environment: DSV4_TESTS=0 skips the test suite, DSV4_LONG_TESTS=0 its long tier;
# DSV4_SANITIZE=0 skips the sanitizer pass;
# DSV4_SANITIZER_EXCLUDE names test substrings (comma-separated) to leave out of the sanitizer
# runs, DSV4_SANITIZE_ONLY the test binaries to run under it (space-separated names, default
# all), DSV4_SANITIZE_TIMEOUT a limit in seconds for each sanitizer job;
# DSV4_FUZZ_SOAK=0 skips the GPU fuzz soak under memcheck, DSV4_FUZZ_SECONDS its length
# (default 120); DSV4_BENCH=0 skips the benchmark; DSV4_PYTHON=0 skips the Python binding's tests, the
# PyTorch comparison and the attention block benchmark (they run where python3 has torch and pytest).
set -u
cd "$(dirname "$0")/.."
out=${1:-gpu-results}
shift || true
mkdir -p "$out"
status=0
step() { printf '\n==== %s (%s)\n' "$1" "$(date +%T)" | tee -a "$out/summary.txt"; }

step "device"
nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv \
  | tee "$out/device.txt" | tee -a "$out/summary.txt"
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n1 | tr -d '.')
export DSV4_BUILD_DIR=${DSV4_BUILD_DIR:-build-gpu}
export DSV4_ARCHS=${DSV4_ARCHS:-${cc}-real}
# The long tier (CTest label `long`, e.g. the 2^32 encoder sweep on the CPU) runs here.
export DSV4_LONG_TESTS=${DSV4_LONG_TESTS:-1}

step "build for sm_$cc"
if ! scripts/build.sh >"$out/build.log" 2>&1; then
  tail -40 "$out/build.log"; echo "BUILD FAILED" | tee -a "$out/summary.txt"; exit 1
fi
cat $(find "$DSV4_BUILD_DIR" -name '*.ptxas.txt' | sort) >"$out/ptxas.txt" 2>/dev/null || true

if [ "${DSV4_TESTS:-1}" != 0 ]; then
step "test suite"
if ctest --test-dir "$DSV4_BUILD_DIR" --output-on-failure -j 4 >"$out/ctest.log" 2>&1; then
  echo "ctest: all passed" | tee -a "$out/summary.txt"
else
  echo "ctest: FAILURES" | tee -a "$out/summary.txt"; status=1
fi
grep -E "tests passed|Skipped|Failed|\*\*\*" "$out/ctest.log" | tee -a "$out/summary.txt"
grep -hE "^\s+(all 2|e4m3 vs|device 0|[0-9]+ differences)" "$out/ctest.log" | tee -a "$out/summary.txt"
fi

if [ "${DSV4_SANITIZE:-1}" != 0 ]; then
  step "compute-sanitizer memcheck + racecheck + synccheck (parallel jobs, ${DSV4_SANITIZE_TIMEOUT:-none} s each)"
  san=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
  if [ -z "$san" ]; then
    echo "compute-sanitizer not found" | tee -a "$out/summary.txt"; status=1
  else
    # One job per (tool, test binary), all at once: each is mostly CPU-bound (references,
    # sanitizer bookkeeping), so running them side by side divides the wall time.
    mkdir -p "$out/sanitizer"
    tmo=${DSV4_SANITIZE_TIMEOUT:+timeout -k 5 $DSV4_SANITIZE_TIMEOUT}
    pids=()
    for tool in memcheck racecheck synccheck; do
      for t in $(find "$DSV4_BUILD_DIR/tests" -type f -name 'test_*' -perm -u+x | sort); do
        case " ${DSV4_SANITIZE_ONLY:-$(basename "$t")} " in *" $(basename "$t") "*) ;; *) continue ;; esac
        # A binary without GPU tests gives the sanitizer no CUDA context to attach to (rc 255).
        "$t" --list | grep -q '\[gpu\]' || continue
        log="$out/sanitizer/$tool-$(basename "$t").log"
        # racecheck cannot follow bar.arrive -> bar.sync ordering (tools/racecheck_arrive_repro.cu):
        # the attention test leaves its warp-specialised kernels (ws32, ws64) out of that run only.
        # Under racecheck the attention test also runs the in-launch merge as the second launch
        # (its flag waits on other CTAs outlast the bounded wait there), and leaves out
        # gpu_workspace_flags, which needs the in-launch merge, and the model-size cases
        # (model_shapes, large_t, unit_scale): the same kernels at grids racecheck takes hours
        # over; the other cases run every kernel and memcheck runs those too.
        rc_env=; rc_excl=
        [ "$tool" = racecheck ] && rc_env=DSV4_RACECHECK=1 \
          rc_excl=,gpu_workspace_flags,gpu_model_shapes,large_t,gpu_prefill_unit_scale
        # api.gpu_launch_status_keeps_others provokes a failing launch on purpose: the
        # sanitizer reports that API error, so it stays out of these runs.
        ( env $rc_env DSV4_TEST_EXCLUDE=gpu_launch_status_keeps_others$rc_excl${DSV4_SANITIZER_EXCLUDE:+,$DSV4_SANITIZER_EXCLUDE} $tmo "$san" --tool "$tool" --error-exitcode 99 \
            "$t" --gpu-only >"$log" 2>&1; echo $? >"$log.rc" ) &
        pids+=($!)
      done
    done
    wait "${pids[@]}"
    for rcf in "$out"/sanitizer/*.rc; do
      rc=$(cat "$rcf")
      case $rc in
        0) r=clean ;; 77) r=skipped ;; 99) r="ERRORS"; status=1 ;; 124|137) r="TIMED OUT"; status=1 ;; *) r="FAILED (rc $rc)"; status=1 ;;
      esac
      name=$(basename "$rcf" .log.rc)
      echo "$name: $r ($(grep -h "^summary:" "${rcf%.rc}" | tail -1); $(grep -h "ERROR SUMMARY" "${rcf%.rc}" | tail -1))" | tee -a "$out/summary.txt"
    done
  fi
fi

if [ "${DSV4_FUZZ_SOAK:-1}" != 0 ]; then
  secs=${DSV4_FUZZ_SECONDS:-120}
  step "GPU fuzz soak under compute-sanitizer memcheck ($secs s of cases, at most $((secs * 3)) s)"
  san=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
  if [ -n "$san" ] && DSV4_FUZZ_SECONDS=$secs timeout -k 5 $((secs * 3)) "$san" --tool memcheck --error-exitcode 99 \
      "$DSV4_BUILD_DIR/tests/fuzz/test_fuzz_gpu" --gpu-only >"$out/fuzz_soak.log" 2>&1; then
    echo "fuzz soak: clean ($(grep -h "cases" "$out/fuzz_soak.log" | tail -1))" | tee -a "$out/summary.txt"
  else
    echo "fuzz soak: FAILED (see fuzz_soak.log)" | tee -a "$out/summary.txt"; status=1
  fi
fi

if [ "${DSV4_BENCH:-1}" != 0 ]; then
  step "benchmark"
  bin="$DSV4_BUILD_DIR/bench/dsv4_bench"
  # A copy of the tree sent to a GPU machine has no .git: DSV4_COMMIT names the commit then.
  commit=${DSV4_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
  if "$bin" --check --commit "$commit" --json "$out/bench.jsonl" "$@" >"$out/bench.log" 2>&1; then
    echo "bench: all checks passed" | tee -a "$out/summary.txt"
  else
    echo "bench: FAILURES" | tee -a "$out/summary.txt"; status=1
  fi
  cat "$out/bench.log"
fi
if [ "${DSV4_PYTHON:-1}" != 0 ] && python3 -c 'import torch, pytest' 2>/dev/null; then
  step "python binding (CUDA and CPU paths)"
  lib="$PWD/$DSV4_BUILD_DIR/libdsv4.so"
  if DSV4_LIBRARY="$lib" python3 -m pytest python/tests -q >"$out/pytest.log" 2>&1; then
    echo "pytest: passed" | tee -a "$out/summary.txt"
  else
    echo "pytest: FAILURES" | tee -a "$out/summary.txt"; status=1
  fi
  tail -3 "$out/pytest.log" | tee -a "$out/summary.txt"
  step "PyTorch comparison"
  if DSV4_LIBRARY="$lib" python3 scripts/compare_torch.py "$out/compare_torch.jsonl" >"$out/compare_torch.log" 2>&1; then
    echo "compare_torch: all checks passed" | tee -a "$out/summary.txt"
  else
    echo "compare_torch: FAILURES" | tee -a "$out/summary.txt"; status=1
  fi
  cat "$out/compare_torch.log"
  step "attention block benchmark (deepinfer_sm80.layer)"
  if DSV4_LIBRARY="$lib" python3 benchmarks/layer_bench.py --out "$out/layer" >"$out/layer_bench.log" 2>&1; then
    echo "layer_bench: done ($out/layer)" | tee -a "$out/summary.txt"
  else
    echo "layer_bench: FAILED" | tee -a "$out/summary.txt"; status=1
  fi
  tail -12 "$out/layer_bench.log"
fi
step "done: status $status"
exit $status
