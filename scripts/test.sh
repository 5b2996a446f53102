#!/usr/bin/env bash
# Installs, builds and runs the whole test suite twice: a normal build, and
# one under AddressSanitizer + UndefinedBehaviorSanitizer; then the engine
# suites under ThreadSanitizer and each fuzzer for 60 s (set
# TNT_SKIP_SANITIZERS=1 to skip all but the normal build). Before the
# tests it compiles the release, clang and Debian-flags builds
# (scripts/build-variants.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh build
# Layers point down only (docs/design.md): includes and symbols.
bash scripts/check-layers.sh build
# The environment is read only through the table of variables, and every
# TNT_* name in lib/ is one of its entries (docs/design.md).
bash scripts/check-env.sh
# The builds that users and packagers make (docs/install.md): a release
# build, clang, and Debian's packaging flags, each warning-clean under
# -Werror (compile only: library, tools, benchmark, examples; no tests).
# The release build is then installed into a scratch prefix and used as a
# user would (tests/install/check_install.sh, "prefix" mode).
bash scripts/build-variants.sh
meson test -C build --print-errorlogs --num-processes 1
if [ "${TNT_SKIP_SANITIZERS:-0}" != 1 ]; then
    # The frontends are left out here (Debian's interpreter, which has
    # neither torch 2.x nor TensorFlow: the torch backend and the
    # TensorFlow op library are not built): their tests would run an
    # uninstrumented interpreter, libtorch and TensorFlow (the normal
    # build runs them).
    bash scripts/setup.sh build-asan -Db_sanitize=address,undefined \
        -Db_lundef=false -Dbuildtype=debugoptimized -Dtorch_backend=disabled \
        -Dpython=/usr/bin/python3
    # Sanitizers slow everything down: stretch the multi-rank deadlines.
    export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
    export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
    # Every test, except those that the normal build runs in full and that
    # would add ~8 minutes here: the schedule simulator (pure computation),
    # the second pass of the collective suite over shared memory, which
    # runs here for the suites with most engine paths instead, the pass
    # over the TCP transport loaded as a plugin (the same TCP code as the
    # first pass; the plugin's loading and p=3 jobs over it run here in
    # transport_plugin), and the Python and PyTorch frontends (an
    # interpreter under the sanitizers; the fusion ABI they use is the
    # fusion test's, which runs here; the torch.distributed backend is not
    # built here), Keras, the frontends under the reproducible mode,
    # pip install . (it builds the project anew, without the sanitizers),
    # and the layer checker's test (a shell script reading sources and
    # symbol tables: nothing of it runs instrumented; ~50 s).
    tests=$(meson test -C build-asan --list 2>/dev/null |
            sed -n 's/^libtntcomm:[^ ]* \/ //p' |
            grep -vx -e schedules -e collectives_shm -e collectives_plugin \
                -e python -e torch -e torch_backend -e torch_dist \
                -e torch_elastic -e keras -e keras_examples -e repro_frontends \
                -e pip_install -e check_layers)
    # TNT_TEST_QUICK=2 trims the collective suite (tests/harness.h; the
    # normal build above ran all of it).
    # shellcheck disable=SC2086
    TNT_TEST_TIMEOUT_MULT=4 TNT_SOAK_COUNT=5000 TNT_TEST_QUICK=2 \
        meson test -C build-asan --print-errorlogs --num-processes 1 \
        --timeout-multiplier 3 $tests
    for suite in nonblocking determinism misc; do
        echo "== ASan+UBSan: test_collectives $suite over shared memory"
        TNT_TRANSPORT=shm TNT_TEST_TIMEOUT_MULT=4 TNT_TEST_QUICK=2 \
            TNT_LOG_LEVEL=WARNING \
            build-asan/tests/test_collectives "$suite"
    done
    echo "== ASan+UBSan: test_collectives allreduce slots (shared memory)"
    TNT_TRANSPORT=shm TNT_TEST_TIMEOUT_MULT=4 TNT_LOG_LEVEL=WARNING \
        build-asan/tests/test_collectives allreduce slots
    unset ASAN_OPTIONS UBSAN_OPTIONS
fi
if [ "${TNT_SKIP_SANITIZERS:-0}" != 1 ]; then
    # ThreadSanitizer on the engine: the suites with several collectives in
    # flight and completing out of order (the whole suite takes ~9 minutes
    # under TSan on 2 cores; it was clean when last run in full).
    # Only the two programs it runs (the dependencies are installed).
    [ -f build-tsan/build.ninja ] ||
        meson setup build-tsan -Dwerror=true -Db_sanitize=thread \
            -Db_lundef=false -Dpython=/usr/bin/python3 -Dtorch_backend=disabled
    ninja -C build-tsan tests/test_collectives tests/test_unlocked
    for suite in nonblocking misc determinism; do
        echo "== ThreadSanitizer: test_collectives $suite"
        TSAN_OPTIONS=halt_on_error=1 TNT_TEST_TIMEOUT_MULT=4 \
            TNT_TEST_QUICK=2 build-tsan/tests/test_collectives "$suite"
    done
    # Reductions run with the engine lock released: the two cases where
    # other threads act on a request while its reduction runs (the third,
    # a killed peer, exercises no extra concurrency; the normal and ASan
    # passes run it).
    for t in concurrent abort_or_free_during_reduce; do
        echo "== ThreadSanitizer: test_unlocked $t"
        TSAN_OPTIONS=halt_on_error=1 TNT_TEST_TIMEOUT_MULT=4 \
            build-tsan/tests/test_unlocked unlocked "$t"
    done
fi
# Fuzzing: each libFuzzer harness (TCP handshake and frame, message
# header, bootstrap messages, verbs wire and side channel) for 60 s from
# the committed seed corpus, all four at once: CI's budget is 20 minutes
# in all, so they share the two cores for one minute of wall time
# (one after the other: bash tests/fuzz/run.sh SECONDS).
if [ "${TNT_SKIP_SANITIZERS:-0}" != 1 ]; then
    TNT_FUZZ_PARALLEL=1 bash tests/fuzz/run.sh 60
fi
