# The two commands of the README: `make demo` runs the main job, `make test` the whole suite.
# Both install ZooKeeper and a JDK first when they are missing (Debian, via apt-get).

CARGO ?= cargo
# The workspace's test builds with Kerberos: zkw's `kerberos` feature is off by default (it needs
# libkrb5-dev and libclang-dev), and cli/tests/local.rs runs `zkw --sasl kerberos`.
TEST_FEATURES ?= --features zkwire-cli/kerberos
# Seconds per fuzz target in `make test` (a smoke run; use fuzz/run.sh 600 for a campaign).
FUZZ_SECONDS ?= 20
# Test binaries run at once by tests/run-suite.py.
TEST_JOBS ?= 2

.PHONY: deps demo test

deps:
	@./.ci/install-deps

demo:
	@./.ci/install-deps --demo
	$(CARGO) run -q -p zkwire-cli --bin zkw -- demo

test: deps
	tests/golden/generate.sh --check
	# Comments wrap at 100 columns, as rustfmt wraps code (stable rustfmt leaves comments alone).
	@find . -name '*.rs' -not -path '*/target/*' -exec awk 'length > 100 && /^ *\/\// \
		{ print FILENAME ":" FNR ": comment over 100 columns"; bad = 1 } END { exit bad }' {} +
	$(CARGO) clippy --workspace --all-targets $(TEST_FEATURES) -q -- -D warnings
	# zkwire as users build it, without the `unstable` internals the workspace turns on
	# (the second doc run also leaves the user-facing docs in target/doc).
	$(CARGO) clippy -p zkwire --lib -q -- -D warnings
	$(CARGO) clippy -p zkwire --lib --features tls,tls-native-roots,sasl-digest,sasl-gssapi -q -- -D warnings
	# zkw as `cargo install --path cli` builds it: default features, no Kerberos, so that it
	# builds with a C compiler alone (and says so when asked for `--sasl kerberos`).
	CARGO="$(CARGO)" tests/check-default-build.sh
	# The README's "Use it" section, built as a new user's crate would be.
	tests/readme-quickstart.sh
	tests/readme-figures.sh --check
	$(CARGO) clippy -p zkwire-cli --bins -q -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps -q
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc -p zkwire --no-deps -q --features tls,sasl-digest,sasl-gssapi
	# The test binaries two at a time (they mostly wait on ZooKeeper), longest first, and the
	# doctests; like `cargo test --workspace --no-fail-fast`, in half the time (tests/run-suite.py).
	# Beside them, at the lowest priority, the fuzz smoke: it takes the CPU they leave idle.
	CARGO="$(CARGO)" tests/run-suite.py --jobs $(TEST_JOBS) --beside "fuzz/run.sh $(FUZZ_SECONDS)" \
		--workspace $(TEST_FEATURES)
