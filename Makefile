# The two commands of the README.
.PHONY: run test bench lint

# Build, start a collector with a synthetic cluster and a scorer, show a Score answer.
run:
	scripts/run.sh

# Every test tier (installs Prometheus and the offline checkers when missing).
test:
	scripts/test.sh

lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
