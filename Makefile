# framesrv: the two commands a newcomer needs are `make demo` and `make test`.
SHELL := /bin/bash
export PATH := /opt/swift/usr/bin:$(PATH)

.PHONY: demo test test-timing test-fresh build bench clean fuzz fuzz-long fuzz-files test-tsan test-asan test-gpu tour check-warnings soak \
	install install-bin install-man install-lib install-python bundle test-bundle

## Installs what is missing, builds, and runs the decode -> blur -> rgb -> record chain (writes framesrv-demo.mp4).
demo:
	@scripts/setup
	swift build -c release
	.build/release/framesrv demo

## Installs what is missing and runs the whole test suite (Swift, Python and C clients).
test:
	@scripts/setup --test
	swift build --build-tests
	@scripts/test-log swift test --no-parallel
	@scripts/test-gpu --skip-line

## The checks whose point is a time (Tests/FrameServerTests/Timing/: latency bounds, paces), which
## `make test` skips: they fail for a loaded machine's sake, so run them on one left otherwise idle.
test-timing:
	@scripts/setup --test
	swift build --build-tests
	FRAMESRV_TIMING_TESTS=1 swift test --skip-build --no-parallel --filter LatencyTests

## `make test` from a fresh clone of HEAD in a clean Debian 12 root (debootstrap minbase, chroot,
## the toolchain bind-mounted read-only at /opt/swift, nothing else installed): what a new machine
## meets. As root; not part of `make test` (about 25 min: apt, pip, the build, then the suite).
test-fresh:
	scripts/test-fresh

## A relocatable tarball for an x86-64 Linux machine without Swift (glibc 2.36 or newer):
## .build-bundle/framesrv-VERSION-linux-x86_64.tar.xz, framesrv built with --static-swift-stdlib
## (RUNPATH $ORIGIN/../lib), every shared library it loads but glibc's, libframesrv and the
## Python wheel (scripts/bundle). Prints its sizes.
bundle:
	@scripts/setup --bundle
	scripts/bundle

## The bundle unpacked in a clean Debian 12 root with no toolchain and no package installed:
## --version, ldd, and produce -> sink framemd5s equal to the host's build and ffmpeg's. As root.
test-bundle: bundle
	@scripts/setup --test
	swift build --product framesrv
	scripts/test-bundle

## Builds the libFuzzer targets (Fuzz/) and runs each for FUZZ_SECONDS; fails on any crash
## (the crashing input is saved to Fuzz/corpus/<target>/ as a regression input: commit it).
FUZZ_SECONDS ?= 30
fuzz:
	FUZZ_SECONDS=$(FUZZ_SECONDS) Fuzz/run.sh

## Runs each libFuzzer target for 1,000,000 inputs and prints the counts.
fuzz-long:
	FUZZ_RUNS=1000000 Fuzz/run.sh

## A longer run of the multi-process file fuzzer (FileFuzzTests; `make test` runs one pass, 638
## mutations): 20,000 mutations with a random seed, printed so a failure reproduces.
fuzz-files:
	@scripts/setup --test
	swift build --build-tests
	FRAMESRV_FILE_FUZZ_MUTATIONS=$${FRAMESRV_FILE_FUZZ_MUTATIONS:-20000} \
		FRAMESRV_FILE_FUZZ_SEED=$${FRAMESRV_FILE_FUZZ_SEED:-$$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')} \
		swift test --skip-build --filter FileFuzzTests

## The stress, pipeline and chain tests under ThreadSanitizer, in their own build directory
## (the framesrv processes the tests start are that build's TSan executable too). Every TSan
## process, tests and children, writes its reports to .build-tsan/reports/: any report fails.
## Suppressions: .ci/tsan-suppressions.txt (each entry says why). Skipped here:
## steadyStateDoesNotGrowMemory measures RSS, which TSan's shadow memory inflates, and needs
## 36,000 frames in 60 s, more than a TSan build publishes on 2 cores.
test-tsan:
	@scripts/setup --test
	swift build --build-tests --sanitize=thread --scratch-path .build-tsan
	@nm .build-tsan/debug/framesrv | grep -q __tsan_init || { echo "test-tsan: .build-tsan/debug/framesrv is not a TSan build" >&2; exit 1; }
	rm -rf .build-tsan/reports && mkdir -p .build-tsan/reports
	TSAN_OPTIONS="halt_on_error=0 suppressions=$(CURDIR)/.ci/tsan-suppressions.txt log_path=$(CURDIR)/.build-tsan/reports/tsan" \
		SWIFT_BACKTRACE=enable=no swift test --skip-build --sanitize=thread --scratch-path .build-tsan --no-parallel \
		--filter 'StressTests|PipelineTests|ChainTests' --skip steadyStateDoesNotGrowMemory
	@if ls .build-tsan/reports/tsan.* >/dev/null 2>&1; then \
		cat .build-tsan/reports/tsan.*; echo "test-tsan: ThreadSanitizer reports above (.build-tsan/reports)" >&2; exit 1; fi

## libframesrv's CUDA streams on a real GPU (scripts/test-gpu: layout against cuda.h, real processes,
## fences with and without stream memory operations, SIGKILLs); one line and exit 0 without a CUDA device.
test-gpu:
	scripts/test-gpu

## The C client (clients/c) built with AddressSanitizer and UBSan against real producers.
test-asan:
	@scripts/setup --test
	swift build --product framesrv
	clients/c/asan-check.sh .build/debug/framesrv

build:
	@scripts/setup
	swift build -c release

## Prints the transport figures quoted in the README next to their peers (a pipe, iceoryx2, GStreamer:
## scripts/setup --bench installs the optional ones), and the C and Python clients' figures
## (the C tools from clients/c, the Python package in .build/python-venv via scripts/python-env).
bench:
	@scripts/setup --bench
	swift build -c release
	$(MAKE) -s -C clients/c
	.build/release/framesrv bench transport
	.build/release/framesrv bench clients

## Installs under PREFIX (default /usr/local; DESTDIR for a staged install):
##   bin/framesrv                        a release build (or FRAMESRV_BIN, a binary already built)
##   share/man/man1/framesrv.1           the man page, made from every command's --help
##   include/, lib/, lib/pkgconfig/      libframesrv (make -C clients/c install)
##   lib/pythonX.Y/site-packages/        the Python package, built by PYTHON (default python3);
##                                       PYTHON= (empty) skips it
## The binary finds the Swift runtime in the toolchain it was built with;
## SWIFT_BUILD_FLAGS=--static-swift-stdlib builds one that needs no toolchain.
PREFIX ?= /usr/local
DESTDIR ?=
PYTHON ?= python3
FRAMESRV_BIN ?=
SWIFT_BUILD_FLAGS ?=
BIN_TO_INSTALL = $(or $(FRAMESRV_BIN),.build/release/framesrv)

install: install-bin install-man install-lib install-python
	@$(if $(DESTDIR),,scripts/install-notes $(PREFIX) "$(PYTHON)")

install-bin:
	@scripts/build-dir
	$(if $(FRAMESRV_BIN),,swift build -c release --product framesrv $(SWIFT_BUILD_FLAGS))
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 755 $(BIN_TO_INSTALL) $(DESTDIR)$(PREFIX)/bin/framesrv

install-man: install-bin
	install -d $(DESTDIR)$(PREFIX)/share/man/man1
	scripts/man-page $(BIN_TO_INSTALL) > $(DESTDIR)$(PREFIX)/share/man/man1/framesrv.1
	chmod 644 $(DESTDIR)$(PREFIX)/share/man/man1/framesrv.1

install-lib:
	$(MAKE) -s -C clients/c install PREFIX=$(PREFIX) DESTDIR=$(DESTDIR)

# --prefix puts the package under PREFIX like the rest (PREFIX=~/.local: the user's site). A python
# that does not look in PREFIX's site-packages needs PYTHONPATH, or PYTHON= and its own pip install.
# Without build isolation pip builds offline with the setuptools it has (numpy: headers if present).
# --ignore-installed: a staged or prefixed install never uninstalls the package from PYTHON's own
# environment (pip would, when that environment has framesrv already). A PYTHON without pip is one line.
install-python:
	@$(if $(PYTHON),$(PYTHON) -m pip --version >/dev/null 2>&1 || { echo "install-python: $(PYTHON) has no pip (Debian: apt install python3-pip, or PYTHON=a venv's python): the Python package was not installed" >&2; exit 1; })
	$(if $(PYTHON),$(PYTHON) -m pip install --quiet --disable-pip-version-check --no-deps --ignore-installed --no-warn-script-location --root-user-action=ignore \
		$$($(PYTHON) -c 'import setuptools, wheel' 2>/dev/null && echo --no-build-isolation) \
		--prefix $(PREFIX) $(if $(DESTDIR),--root $(DESTDIR)) ./clients/python)

## A release build that fails on any warning it prints (compiler, linker or SwiftPM's own, such as a
## pkg-config flag it ignores). Only what gets compiled is seen: CI runs it on a fresh clone.
check-warnings:
	@mkdir -p .build
	set -o pipefail; swift build -c release 2>&1 | tee .build/check-warnings.log
	@if grep -q "warning:" .build/check-warnings.log; then echo "check-warnings: the build printed warnings (above)" >&2; exit 1; fi

## Each long-running consumer (sink, filter, record, bridge send and recv, web) fed 1,000,000 frames
## of a small stream (SOAK_FRAMES=N to change it): its RSS growth once its bounded buffers are full,
## one line each, failing at 1 MB or more per million frames (scripts/soak). Not part of `make test`.
soak:
	@scripts/setup
	swift build -c release
	scripts/soak

## Runs the README's tour (scripts/tour.sh) in a scratch HOME and directory.
tour:
	scripts/tour.sh

clean:
	rm -rf .build
