# nodekit's two commands: "make run" runs the main job, "make test" runs
# every test (formatting, vet, unit and integration tests with -race, and
# the end-to-end tests against a real containerd, which hack/e2e installs,
# starts and stops). .ci/run calls "make test".

GO ?= go

.PHONY: run test check unit e2e bench bench-agent bench-bigpod

run:
	$(GO) run ./examples/standalone

test: check unit e2e

check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

unit:
	$(GO) test -race -count=1 ./...

e2e:
	hack/e2e/run.sh

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

bench-agent:
	hack/bench-agent.sh

bench-bigpod:
	$(GO) run ./hack/bigpod
