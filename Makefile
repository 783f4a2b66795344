# framesrv: the two commands a newcomer needs are `make demo` and `make test`.
SHELL := /bin/bash
export PATH := /opt/swift/usr/bin:$(PATH)

.PHONY: demo test build bench clean

## Installs what is missing, builds, and runs the decode -> blur -> rgb -> record chain (writes framesrv-demo.mp4).
demo:
	@scripts/setup
	swift build -c release
	.build/release/framesrv demo

## Installs what is missing and runs the whole test suite (Swift, Python and C clients).
test:
	@scripts/setup --test
	swift build --build-tests
	swift test --no-parallel

build:
	@scripts/setup
	swift build -c release

## Prints the transport figures quoted in the README.
bench: build
	.build/release/framesrv bench transport

clean:
	rm -rf .build
