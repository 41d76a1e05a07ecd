# shellcheck shell=bash
# Fuzzing and sanitizers for scripts/test.sh. The bounded fuzz run builds the libFuzzer targets of the storage readers
# (tests/storage/fuzz) with AddressSanitizer and UndefinedBehaviorSanitizer, writes their seed
# corpus, runs each for a given time, and prints the executions run and what was found.
# Sourced after common.sh.
#
# A finding is blamed on whose code the sanitizer report points at (ringtrain_fuzz_blame): ours
# fails the run; one inside libhdf5 -- Debian 12's 1.10.8 crashes on some forged files whatever
# the caller does -- is kept under findings/<target>/libhdf5-*, reported, and fuzzing goes on
# from the same corpus, so that a known library bug neither fails every run nor hides ours.
# docs/fuzzing.md lists both kinds.

RINGTRAIN_FUZZ_TARGETS=(idx_reader hdf5_dataset checkpoint token_file safetensors)
RINGTRAIN_SANITIZE_FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"

# Sanitizer settings for every run under them (fuzzers and scripts/test.sh --sanitize):
#   LSan skips libhdf5's own leaks (see lsan.supp); UBSan prints the stack of a report;
#   allocator_may_return_null + max_allocation_size_mb: a malloc above 1 GiB returns NULL, as it
#   would under a memory limit, instead of aborting -- libhdf5 sizes some buffers from fields of
#   the file and copes with NULL. A C++ `new` above the limit still aborts with a report: our code
#   must check a size before allocating, so that is a finding.
ringtrain_sanitizer_environment() {
  local root
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
  export LSAN_OPTIONS="suppressions=$root/scripts/lib/lsan.supp:print_suppressions=0"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  export ASAN_OPTIONS="allocator_may_return_null=1:max_allocation_size_mb=1024${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
}

# Configures $1 for a sanitizer build: clang, RelWithDebInfo, no CUDA (the sanitizers and the CUDA
# runtime do not mix), compiler flags $2, linker flags $3; further arguments go to cmake. Used by
# the fuzzers, scripts/test.sh --sanitize and the ThreadSanitizer step. The debug information is
# line tables only: a report's stacks need functions, files and lines (inlined frames included),
# not variables, and the compiles take about 15% less time.
ringtrain_configure_sanitized() {
  local build_dir="$1" flags="$2" link_flags="$3" optimise="-O2 -gline-tables-only -DNDEBUG"
  shift 3
  mkdir -p "$build_dir"
  # CMake's default generator (Unix Makefiles), the way packagers and HPC sites build: so CI builds
  # once with it as well as with Ninja (the main build).
  RINGTRAIN_GENERATOR="Unix Makefiles" ringtrain_configure "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DRINGTRAIN_CUDA=OFF \
    "-DCMAKE_C_FLAGS_RELWITHDEBINFO=$optimise" "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$optimise" \
    "-DCMAKE_C_FLAGS=$flags" "-DCMAKE_CXX_FLAGS=$flags" "-DCMAKE_EXE_LINKER_FLAGS=$link_flags" "$@"
}

# Configures $1 with clang, the sanitizers and libFuzzer's coverage, and builds only the fuzz
# targets and the corpus writer (the formats, data and storage libraries, not the whole project).
ringtrain_build_fuzzers() {
  local build_dir="$1"
  ringtrain_configure_sanitized "$build_dir" "$RINGTRAIN_SANITIZE_FLAGS -fsanitize=fuzzer-no-link" \
    "$RINGTRAIN_SANITIZE_FLAGS" -DRINGTRAIN_FUZZ=ON
  cmake --build "$build_dir" --target storage_fuzzers -j "$(nproc)"
}

# Prints "ringtrain" or "libhdf5": whose code the sanitizer or libFuzzer report in file $1
# blames. A stack of the report is read from its first frame down to the first that is either in
# libhdf5 or in a source file of this repository. The stack where it failed always counts. The
# other stacks -- where the memory was allocated and freed -- count only for a write: libhdf5
# writing past or into a freed buffer of ours means we handed it a wrong buffer (ours), while a
# read past its own buffers may land in anyone's memory (its bug: one such read hit a vector of
# ours freed long before). The report is libhdf5's only when every counted stack that reaches a
# decisive frame reaches libhdf5; anything else is ours, including an UndefinedBehaviorSanitizer
# report (libhdf5 is not instrumented) and a report with no decisive frame at all.
ringtrain_fuzz_blame() {
  local root
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
  awk -v ours=" $root/" '
    /runtime error:/ { blame_ours = 1 }
    /^READ of size|caused by a READ memory access/ { read_only = 1 }
    /^ *#[0-9]+ / {
      if ($1 == "#0") { stacks++; decided = 0 }
      if (decided || (read_only && stacks > 1)) next
      if (index($0, "libhdf5")) { decided = 1; library = 1 }
      else if (index($0, ours)) { decided = 1; blame_ours = 1 }
    }
    END { print (library && !blame_ours) ? "libhdf5" : "ringtrain" }
  ' "$1"
}

# Executions a libFuzzer log reports: "Done N runs" after a full run, the final statistics
# (-print_final_stats=1) after a finding.
ringtrain_fuzz_executions() {
  local runs
  runs="$(sed -n 's/^Done \([0-9]*\) runs in .*/\1/p' "$1" | tail -n 1)"
  [ -n "$runs" ] || runs="$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$1" | tail -n 1)"
  printf '%s\n' "${runs:-0}"
}

# Runs target $2 of build $1 for $3 seconds in all, from $1/fuzz/corpus/$2 (kept between runs:
# each run starts where the last one got to) and the seeds. Prints one summary line; returns 1 if
# it found a bug of ours. Findings are left in $1/fuzz/findings/$2.
ringtrain_fuzz_target() {
  local build_dir="$1" target="$2" seconds="$3"
  local fuzz="$build_dir/fuzz"
  local corpus="$fuzz/corpus/$target" findings="$fuzz/findings/$target" log="$fuzz/$target.log"
  mkdir -p "$corpus" "$findings"
  local deadline=$((SECONDS + seconds)) executions=0 library=0 rc left artifact blame name
  while left=$((deadline - SECONDS)) && [ "$left" -gt 0 ]; do
    rc=0
    "$build_dir/bin/${target}_fuzzer" -max_total_time="$left" -timeout=25 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$findings/" "$corpus" "$fuzz/seeds/$target" \
      >"$log" 2>&1 || rc=$?
    executions=$((executions + $(ringtrain_fuzz_executions "$log")))
    [ "$rc" -eq 0 ] && break
    artifact="$(sed -n "s/.*Test unit written to \(.*\)$/\1/p" "$log" | tail -n 1)"
    blame="$(ringtrain_fuzz_blame "$log")"
    if [ "$blame" != libhdf5 ] || [ -z "$artifact" ]; then
      grep -E -A 40 '^==[0-9]+==|runtime error' "$log" | head -n 60 >&2 || tail -n 40 "$log" >&2
      ringtrain_say "fuzz $target: FOUND A BUG (exit status $rc) after $executions executions;" \
        "input: ${artifact:-none written}; full log: $log"
      ringtrain_say "replay it: $build_dir/bin/${target}_fuzzer ${artifact:-INPUT}"
      return 1
    fi
    library=$((library + 1))
    mv -f "$artifact" "$findings/libhdf5-$(basename "$artifact")"
    # An input of the corpus that crashes libhdf5 would stop every later run at its start.
    name="$(basename "$artifact")"
    rm -f "$corpus/${name#*-}"
    ringtrain_say "fuzz $target: libhdf5 bug, not ours ($(grep -m 1 -o 'SUMMARY: .*' "$log" |
      cut -c 1-150)); kept as $findings/libhdf5-$(basename "$artifact"); fuzzing on"
    [ "$library" -ge 100 ] && break
  done
  printf '[ringtrain] fuzz %-13s %10d executions in %d s, %d libhdf5 findings, none of ours\n' \
    "$target" "$executions" "$seconds" "$library" >&2
}

# The whole step: build into $1, write the seeds, run every target for $2 seconds.
ringtrain_fuzz_storage_readers() {
  local build_dir="$1" seconds="$2" target failed=0
  ringtrain_build_fuzzers "$build_dir"
  ringtrain_sanitizer_environment
  rm -rf "$build_dir/fuzz/seeds"
  "$build_dir/bin/make_fuzz_corpus" "$build_dir/fuzz/seeds"
  # Each fuzzer is one process on one core: as many at once as there are cores.
  local parallel pids=()
  parallel="$(nproc)"
  for target in "${RINGTRAIN_FUZZ_TARGETS[@]}"; do
    if [ "${#pids[@]}" -ge "$parallel" ]; then
      wait "${pids[0]}" || failed=1
      pids=("${pids[@]:1}")
    fi
    ringtrain_fuzz_target "$build_dir" "$target" "$seconds" &
    pids+=("$!")
  done
  for target in "${pids[@]}"; do wait "$target" || failed=1; done
  return "$failed"
}


# Runs the tests of build $1 under the sanitizers; extra arguments go to ctest. Two passes: the
# tests without MPI with LeakSanitizer, then the MPI and failure tests without it. Open MPI (not
# instrumented, no frame pointers) keeps allocations until exit in every rank, and LeakSanitizer's
# fast unwinder cannot follow a stack into it far enough to name -- let alone suppress -- them
# (the frames show as "<unknown module>"); the slow unwinder makes the MPI tests several times
# slower still. Leaks of our own code are checked by the first pass, which covers the same
# libraries without MPI around them.
ringtrain_sanitized_ctest() {
  local build_dir="$1" failed=0
  shift
  ringtrain_sanitizer_environment
  ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)" -LE 'mpi|failure' "$@" || failed=1
  ASAN_OPTIONS="detect_leaks=0:$ASAN_OPTIONS" \
    ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)" -L 'mpi|failure' "$@" || failed=1
  return "$failed"
}

# The ThreadSanitizer step of scripts/test.sh: ringtrain's own threads (the gradient reducer's
# communication thread, the stall watchdog, the batch prefetcher, the timeline writer, the SIGTERM
# timer) and the shared-memory exchange between ranks, checked for data races and lock-order
# inversions. Builds only the programs it runs into $1 (clang, no CUDA), then runs the
# collectives' unit tests, the MPI tests of the gradient exchanges on 2 and 3 ranks, and
# `ringtrain train` on 2 ranks with the shm and ring backends, prefetching and a timeline; with
# $2 = 1 (--full) also the training core's and resilience unit tests and the trainer and resume
# MPI tests on 2 ranks. Any report fails the step (TSan's exit status 66); the only suppressions
# (tsan.supp) are of Open MPI, which is not instrumented.
RINGTRAIN_TSAN_FLAGS="-fsanitize=thread -fno-omit-frame-pointer"

ringtrain_thread_sanitizer_checks() {
  local build_dir="$1" full="${2:-0}" root bin logs failed=0 n=0 target=thread_sanitizer_quick
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
  ringtrain_configure_sanitized "$build_dir" "$RINGTRAIN_TSAN_FLAGS" "$RINGTRAIN_TSAN_FLAGS" ||
    return 1
  [ "$full" -eq 0 ] || target=thread_sanitizer_programs
  # One target for all the programs (tests/CMakeLists.txt): the Makefile generator builds targets
  # named one by one, each one's last compiles and link leaving cores idle.
  cmake --build "$build_dir" -j "$(nproc)" --target "$target" || return 1
  bin="$build_dir/bin"
  logs="$build_dir/tsan-logs"
  rm -rf "$logs" && mkdir -p "$logs"
  export TSAN_OPTIONS="suppressions=$root/scripts/lib/tsan.supp:second_deadlock_stack=1:exitcode=66"
  # One check: runs "$@", its output to a log of its own; on failure prints the reports.
  tsan_check() {
    local log
    n=$((n + 1))
    log="$logs/$n.log"
    if "$@" >"$log" 2>&1; then
      ringtrain_say "tsan: ok: $*"
    else
      ringtrain_say "tsan: FAILED (status $?): $* (log: $log)"
      if grep -q 'WARNING: ThreadSanitizer' "$log"; then
        sed -n '/WARNING: ThreadSanitizer/,/^SUMMARY: ThreadSanitizer/p' "$log" | head -n 200 >&2 || true
      else
        tail -n 40 "$log" >&2
      fi
      failed=1
    fi
  }
  tsan_check "$bin/collectives_unit_tests"
  tsan_check mpirun -np 2 --oversubscribe "$bin/engine_mpi_tests"
  tsan_check mpirun -np 3 --oversubscribe "$bin/engine_mpi_tests"
  if [ "$full" -eq 1 ]; then
    tsan_check "$bin/trainer_unit_tests"
    tsan_check "$bin/resilience_unit_tests"
    # Less the MNIST convergence runs (109 of its 145 s under ThreadSanitizer): they train the
    # same threads as the exactness cases, only for longer.
    tsan_check mpirun -np 2 --oversubscribe "$bin/trainer_mpi_tests" \
      --gtest_filter='-WireFormats/MnistCompression.*'
    tsan_check mpirun -np 2 --oversubscribe "$bin/resume_mpi_tests"
  fi
  local backend
  for backend in shm ring; do
    tsan_check mpirun -np 2 --oversubscribe "$bin/ringtrain" train --synthetic --steps 200 --log-every 100 \
      --backend "$backend" --prefetch on --timeline "$logs/timeline-$backend.json"
  done
  unset -f tsan_check
  return "$failed"
}
