# syntax=docker/dockerfile:1.7
# One image with the three waterline binaries:
#   /usr/local/bin/waterline-collector, /usr/local/bin/waterline-scorer,
#   /usr/local/bin/waterline-extender
# deploy/ picks the binary with `command:`. Build: docker build -t waterline:dev .
# The plugin-built kube-scheduler (deploy/overlays/plugin/) is a Go build with its own
# Dockerfile and context:
#   docker build -t ghcr.io/waterline-sched/waterline-kube-scheduler:0.1.0 plugin

# --- build ------------------------------------------------------------------------------
# Debian bookworm, like the runtime image below (same glibc). The image already carries
# pkg-config and libssl-dev (the collector's Prometheus client links OpenSSL); protobuf is
# compiled by protox, so no protoc is needed.
FROM docker.io/library/rust:1.95-bookworm AS build
WORKDIR /src

# Workspace manifests and sources only (not target/, .tools/, plugin/).
COPY Cargo.toml Cargo.lock rustfmt.toml clippy.toml ./
COPY proto ./proto
COPY api ./api
COPY core ./core
COPY runtime ./runtime
COPY collector ./collector
COPY scorer ./scorer
COPY extender ./extender
COPY tests/Cargo.toml ./tests/Cargo.toml
COPY tests/src ./tests/src

RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked \
        -p waterline-collector -p waterline-scorer -p waterline-extender \
    && mkdir -p /out \
    && cp target/release/waterline-collector target/release/waterline-scorer \
          target/release/waterline-extender /out/

# --- runtime ----------------------------------------------------------------------------
# distroless cc: glibc, libgcc_s, libssl3 and CA certificates; no shell, no package manager.
# The :nonroot tag runs as uid/gid 65532, matching the manifests' securityContext.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/ /usr/local/bin/
USER 65532:65532
# gRPC (scorer 50051, collector 50052), extender HTTP 8787, admin 9101-9103.
EXPOSE 50051 50052 8787 9101 9102 9103
CMD ["/usr/local/bin/waterline-scorer", "--help"]
