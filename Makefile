# Two commands on a fresh machine:
#   make demo   installs what it needs, starts a local Slurm 22.05 and runs playbooks/demo.yml
#   make test   runs the whole suite against real Slurm 22.05, 24.11 and 26.05, a real Ray head and
#               a real Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager,
#               kube-scheduler) and a real node (containerd + kubelet in a network namespace of its
#               own), built once from the Go module proxy and cached in ~/.cache
#               and the LSF Application Center simulator (tests/simulators/lsf_pac.py) and the IBM
#               Qiskit Runtime simulator (tests/simulators/quantum_runtime.py: qiskit-aer on fake devices),
#               a login node (Debian's sshd on 127.0.0.1:2222, key auth only: tools/sshd.sh) and an
#               S3 server over TLS (versitygw on 127.0.0.1:7070, built from the Go module proxy: tools/s3.sh)
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
# The venv (BRIDGE_VENV for the scripts) and the lock tools/bootstrap.sh syncs it with: locks/dev.txt;
# `make check-latest` names others.
VENV := $(CURDIR)/.venv
export BRIDGE_VENV := $(VENV)
SLURM_VERSIONS ?= 22.05 24.11 26.05
export ANSIBLE_COLLECTIONS_PATH := $(CURDIR)/.run/collections
export ANSIBLE_PYTHON_INTERPRETER := $(VENV)/bin/python
export ANSIBLE_LOCALHOST_WARNING := 0
export ANSIBLE_INVENTORY_UNPARSED_WARNING := 0
export PATH := $(VENV)/bin:$(PATH)
# ansible-core 2.19 (every release; 2.19.15 the newest) imports cryptography's DSA classes for its
# ssh-agent client, and cryptography 51 warns at that import on the stderr of every ansible,
# ansible-playbook and ansible-doc run. That one warning, from that one module, is ignored wherever
# Bridge runs Ansible (here, tools/bootstrap.sh --env, the controller image, both EEs: the same text,
# tests/unit/test_locks.py); any other warning still reaches stderr, and the doc check fails on it.
# UserWarning is the category's base class: Python reads PYTHONWARNINGS before site-packages.
DSA_WARNING := ignore:DSA is deprecated and support will be removed in a future release:UserWarning:ansible._internal._ssh._ssh_agent
comma := ,
export PYTHONWARNINGS := $(if $(findstring $(DSA_WARNING),$(PYTHONWARNINGS)),$(PYTHONWARNINGS),$(if $(PYTHONWARNINGS),$(PYTHONWARNINGS)$(comma))$(DSA_WARNING))

.PHONY: lock check-latest demo hybrid test test-stages check check-stages prebuild bootstrap background unit sanity lint docs spec static-background static-run build-check build-check-run services services-run integration molecule bench bench-controller stop

demo: bootstrap
	tools/slurm-cluster.sh start 22.05
	set -a; . .run/slurm-22.05/env; set +a; \
	  ansible-playbook -i localhost, -c local playbooks/demo.yml

# One workflow across Slurm 22.05, Ray, IBM Quantum (the Qiskit Runtime simulator) and Kubernetes,
# its files through the sshd login node and S3 (playbooks/hybrid.yml); the services as `make
# services` starts them, with Slurm 22.05 alone. Run it again: it submits nothing. The node's env
# file names its kubeconfig KUBECONFIG, which the modules read as kubectl does (docs/kubernetes.md).
# HYBRID_WORKFLOW=name runs it anew under another name.
hybrid: bootstrap
	$(MAKE) services SLURM_VERSIONS=22.05
	run=$${BRIDGE_RUN:-.run}; set -a; \
	  for env_file in slurm-22.05/env ray/env kube/node/env quantum/env sshd/env s3/env; do \
	    if [[ -r $$run/$$env_file ]]; then . "$$run/$$env_file"; fi; \
	  done; set +a; \
	  if [[ -n $${BRIDGE_S3_ENDPOINT:-} ]]; then python tools/s3_bucket.py "$${HYBRID_S3_BUCKET:-bridge-hybrid}"; fi; \
	  ansible-playbook -i localhost, -c local playbooks/hybrid.yml

# $(call timed,NAME,WARM,COLD,TARGETS[,AFTER]): make TARGETS with each stage timed, run the command
# AFTER (whether they passed or not), then report the stages against the budget of WARM minutes with
# the build cache filled, COLD without it (tools/budget.sh; a warning line past it, not a failure).
timed = @budget=$$(tools/budget.sh start $(1) $(2) $(3)); status=0; \
	BRIDGE_BUDGET=$$budget $(MAKE) --no-print-directory $(4) || status=$$?; \
	$(if $(5),$(5) || true;) BRIDGE_BUDGET=$$budget tools/budget.sh report; exit $$status

# The whole suite: warm 25 and cold 40 minutes on 2 cores. BRIDGE_BACKGROUND, a token of this run,
# makes the image checks and the services start in the background (stage `background`); a failed
# run stops what is still running of them.
test:
	$(call timed,test,25,40,test-stages BRIDGE_BACKGROUND=test-$$(date +%s.%N),tools/background.sh stop)

# Under it the static checks (sanity, lint, docs) run in the background from the end of the unit
# tests on, beside the image builds' end and the integration tests, which mostly wait on jobs; `make
# check` runs them in the foreground.
test-stages: prebuild bootstrap background unit static-background build-check services integration molecule

# The contributor's loop: all that needs no service (units, sanity, lint, docs), 5 minutes warm.
check:
	$(call timed,check,5,15,check-stages)

check-stages: bootstrap unit sanity lint docs

bootstrap:
	@tools/budget.sh begin bootstrap
	tools/bootstrap.sh

# Every environment Bridge makes installs from a lock of locks/ (docs/developing.md, "Locked
# installs"). `make lock` resolves them again from their ranges (requirements*.txt,
# controller/pyproject.toml, the EE definitions, locks/*.in), keeping each locked version the ranges
# still allow; `make lock UPGRADE=1` takes the newest they allow. A lock update lands with `make
# test` green on it.
lock:
	UV=$$(tools/bootstrap.sh --uv) python3 tools/locks.py compile $(if $(UPGRADE),--upgrade)

# The newest versions the ranges allow, today: resolved into .run/latest/locks (what differs from
# locks/ is printed), then `make check` in a throwaway venv of them (.run/latest/venv) and the
# artifact's doc check (ansible-doc of every plugin with a clean stderr: where cryptography 51 first
# showed), each run to its end (-k); what broke is printed last. The gate itself always runs on the lock.
LATEST := $(CURDIR)/.run/latest
check-latest:
	rm -rf $(LATEST); mkdir -p $(LATEST)
	UV=$$(tools/bootstrap.sh --uv) python3 tools/locks.py latest $(LATEST)/locks | tee $(LATEST)/drift.txt
	status=0; { $(MAKE) -k --no-print-directory check VENV=$(LATEST)/venv BRIDGE_DEV_LOCK=$(LATEST)/locks/dev.txt || status=$$?; \
	  BRIDGE_VENV=$(LATEST)/venv BRIDGE_DEV_LOCK=$(LATEST)/locks/dev.txt PATH=$(LATEST)/venv/bin:$$PATH tools/galaxy_build_check.sh || status=$$?; \
	} >$(LATEST)/check.log 2>&1; \
	python3 tools/locks.py report $(LATEST) $$status

# The two builds from source that a cold machine spends longest on (Kubernetes and etcd, versitygw)
# start at once in the background, niced, so that they overlap the unit tests and the image
# builds; `services` then finds them built, or waits on their build lock. A build that
# failed here is tried again (and its error shown) by `services`. Logs: .run/prebuild-*.log.
prebuild:
	mkdir -p .run
	setsid tools/kube-control-plane.sh build >.run/prebuild-kube.log 2>&1 </dev/null &
	setsid tools/s3.sh build >.run/prebuild-s3.log 2>&1 </dev/null &

# On two workers: the units wait more than they compute (timeouts and slow answers of fault servers).
unit: bootstrap
	@tools/budget.sh begin unit
	pytest -q -n 2 tests/unit

sanity: bootstrap
	@tools/budget.sh begin sanity
	tools/sanity.sh

LINT = ansible-lint --offline -q playbooks tests/integration/playbooks roles

lint: bootstrap
	@tools/budget.sh begin lint
	$(LINT)

# What the job spec's field table (plugins/module_utils/_fields.py) says, written into the job_spec doc
# fragment, deploy/crd.yaml and docs/spec.md, and the return values several modules share
# (tools/returns.yml) into their RETURN; tests/unit/test_fields.py fails until it is run.
spec: bootstrap
	python tools/generate_spec.py

# The changelog checked and the plugin docs linted and built into .run/docs/html (index.html).
docs: bootstrap
	@tools/budget.sh begin docs
	tools/docs.sh

# Under `make test` (BRIDGE_BACKGROUND set) the image checks and the services' start begin right
# after bootstrap, niced, in the background (tools/background.sh; logs in .run/background/), beside
# the unit tests; the stages `build-check` and `services` then wait for them, and the
# budget report's `images` and `services` lines are what was left to wait. Without it, as `make
# build-check` or `make services` alone, they run in the foreground. The prebuild's builds run beside
# both; the scripts serialise what they share (tools/lib/host-packages.sh: apt; flock'ed caches).
# (Through $(background_make): a recipe line that names $(MAKE) itself runs even under `make -n`.)
background_make = $(MAKE) --no-print-directory
background: bootstrap
ifdef BRIDGE_BACKGROUND
	tools/background.sh start images -- $(background_make) build-check-run
	tools/background.sh start services -- $(background_make) services-run
endif

# Under `make test`: sanity, lint and docs in one background job (each timed on its own, reported
# "beside"), started once the unit tests have passed, so that what is left of the image builds and
# the services' start (on a cold machine) and the integration tests' waits hold them; `integration`
# waits for it before its serial part, whose tests need the machine to themselves.
static-background: bootstrap
ifdef BRIDGE_BACKGROUND
	tools/background.sh start static -- $(background_make) static-run
endif

# Each of the three runs whether the one before passed or not: one run shows every static failure.
static-run:
	status=0; \
	tools/budget.sh time sanity -- tools/sanity.sh || status=$$?; \
	tools/budget.sh time lint -- $(LINT) || status=$$?; \
	tools/budget.sh time docs -- tools/docs.sh || status=$$?; \
	exit $$status

build-check: bootstrap
	@tools/budget.sh begin images
ifdef BRIDGE_BACKGROUND
	tools/background.sh wait images
else
	@$(MAKE) --no-print-directory build-check-run
endif

build-check-run:
	tools/galaxy_build_check.sh
	tools/controller-image.sh check
	tools/ee-image.sh check

services:
	@tools/budget.sh begin services
ifdef BRIDGE_BACKGROUND
	tools/background.sh wait services
else
	@$(MAKE) --no-print-directory services-run
endif

services-run:
	for version in $(SLURM_VERSIONS); do tools/slurm-cluster.sh start $$version; done
	tools/ray-cluster.sh start
	tools/kube-control-plane.sh start
	tools/kube-node.sh start
	tools/lsf-pac.sh start
	tools/quantum-runtime.sh start
	tools/sshd.sh start
	tools/s3.sh start

# Integration runs in two parts, both always run: first on INTEGRATION_WORKERS pytest-xdist workers,
# a test module (or a group of modules) per worker at a time (tests/integration/scheduling.py), since
# most tests wait on jobs; then the tests marked `serial`, alone (they load the machine or the node),
# once the static checks that ran beside the first part (under `make test`) have ended.
INTEGRATION_WORKERS ?= 3

integration: bootstrap services
	@tools/budget.sh begin integration
	status=0; \
	BRIDGE_REQUIRE_SERVICES=1 pytest -q --durations=25 -n $(INTEGRATION_WORKERS) --dist loadscope \
	  -m "not serial" tests/integration || status=$$?; \
	if [[ -n "$${BRIDGE_BACKGROUND:-}" ]]; then \
	  tools/budget.sh begin static; tools/background.sh wait static || status=$$?; \
	fi; \
	tools/budget.sh begin serial; \
	BRIDGE_REQUIRE_SERVICES=1 pytest -q --durations=10 -m serial tests/integration || status=$$?; \
	exit $$status

# The roles' scenarios (roles/*/molecule) against the same services.
molecule: bootstrap services
	@tools/budget.sh begin molecule
	tools/molecule.sh

bench: bootstrap
	tools/slurm-cluster.sh start 22.05
	set -a; . .run/slurm-22.05/env; set +a; python bench/slurm_submit.py
	set -a; . .run/slurm-22.05/env; set +a; python bench/slurm_lookup.py
	tools/slurm-cluster.sh start 26.05
	set -a; . .run/slurm-26.05/env; set +a; python bench/slurm_lookup.py
	tools/ray-cluster.sh start
	set -a; . .run/ray/env; set +a; python bench/ray_submit.py
	tools/lsf-pac.sh start
	set -a; . .run/lsf/env; set +a; python bench/lsf_submit.py
	python bench/lsf_submit.py --simulator --no-methods --fill 0,10000
	tools/quantum-runtime.sh start
	set -a; . .run/quantum/env; set +a; python bench/quantum_submit.py

bench-controller: bootstrap
	tools/slurm-cluster.sh start 26.05
	python bench/placement.py
	python bench/controller_load.py $(BENCH_ARGS)

stop:
	tools/slurm-cluster.sh stop all
	tools/ray-cluster.sh stop
	tools/kube-node.sh stop
	tools/kube-control-plane.sh stop
	tools/lsf-pac.sh stop
	tools/quantum-runtime.sh stop
	tools/sshd.sh stop
	tools/s3.sh stop
