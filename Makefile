# nodekit's two commands: "make run" runs the main job, "make test" runs
# every test (formatting, vet, the network tests with real CNI plugins,
# which hack/network installs, unit and integration tests with -race, the
# end-to-end tests against a real containerd, which hack/e2e installs,
# starts and stops, the kube tests against a real etcd and
# kube-apiserver, which hack/kube builds, and 20 upstream NodeConformance
# specs against examples/node, which hack/conformance builds and runs).
# .ci/run calls "make test".

GO ?= go

.PHONY: run test check network network-tools unit e2e kube-e2e conformance conformance-subset bench bench-agent bench-bigpod

# The standalone agent built as README.md recommends for a small node:
# static, and without gRPC's golang.org/x/net/trace (-tags grpcnotrace).
run:
	CGO_ENABLED=0 $(GO) run -tags grpcnotrace ./examples/standalone

# Under "make test" the network tests run once, in "unit", after the
# plugins are installed, and a missing plugin or root fails them.
test: export NODEKIT_NETWORK_REQUIRED = 1
# ... and the tests that need root, mounts, writable cgroups or a block
# device fail instead of skipping without them (internal/testenv).
test: export NODEKIT_PRIVILEGED_REQUIRED = 1
# ... and the e2e step runs examples/node on its containerd with the kube
# tools (hack/e2e/run.sh gets them from hack/kube/install.sh).
test: export NODEKIT_E2E_KUBE = 1
test: check network-tools unit e2e kube-e2e conformance-subset

check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) mod tidy -diff

unit:
	$(GO) test -race -count=1 ./...

# The network tests against Debian's CNI plugins in namespaces of their
# own; NODEKIT_NETWORK_REQUIRED makes a missing plugin or root fail them
# instead of skipping them as "make unit" does.
network: network-tools
	NODEKIT_NETWORK_REQUIRED=1 $(GO) test -race -count=1 ./network/... ./runtime/fakecri/...

network-tools:
	hack/network/install.sh

e2e:
	hack/e2e/run.sh

# The kube and examples/node tests against a real etcd and kube-apiserver, which
# hack/kube/install.sh builds once into a cache directory (it prints it).
# With NODEKIT_KUBE_TOOLS set a missing binary fails the tests; "make unit"
# leaves it unset, so there they skip.
kube-e2e:
	@tools=$$(hack/kube/install.sh) && test -n "$$tools" && \
	echo "kube-e2e: NODEKIT_KUBE_TOOLS=$$tools" && \
	NODEKIT_KUBE_TOOLS=$$tools $(GO) test -race -count=1 ./kube/... ./examples/node/...

# The upstream Kubernetes NodeConformance specs against examples/node on a
# one-node cluster on loopback (hack/conformance/README.md). The whole
# suite is not part of "make test" (it is bounded at 60 minutes); its
# 20-spec subset is (conformance-subset).
# CONFORMANCE_FLAGS passes flags, e.g. CONFORMANCE_FLAGS=--subset.
conformance:
	hack/conformance/run.sh $(CONFORMANCE_FLAGS)

# The 20 specs of SUBSET in hack/conformance/run.sh, each of which must
# pass; part of "make test". A cold build of e2e.test and the control
# plane is most of its time (hack/conformance/README.md).
conformance-subset:
	hack/conformance/run.sh --subset --require-pass --procs 8 --timeout 20

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

bench-agent:
	hack/bench-agent.sh

bench-bigpod:
	$(GO) run ./hack/bigpod
