# tollgate container image: the gateway (`tollgate`) and the demo backend (`tollgate-echo`).
#
#   docker build -t tollgate:local .
#   docker run --rm -p 8080:8080 -v $PWD/my-gateway.yaml:/etc/tollgate/gateway.yaml:ro tollgate:local
#
# The image's default config is the demo gateway.yaml (it expects Redis and backends on
# 127.0.0.1); mount your own at /etc/tollgate/gateway.yaml. docker-compose.yml runs the full demo.
#
# Build arguments (the defaults are the plain Docker build above):
#   BUILDER_IMAGE  image that compiles the binaries              (default rust:1-bookworm)
#   RUNTIME_IMAGE  base of the final image                       (default debian:bookworm-slim)
#   BINARIES       image or stage holding /out/tollgate and /out/tollgate-echo (default: the
#                  `builder` stage below). scripts/compose-demo.sh builds without any registry:
#                  BINARIES is an image made from the host's release binaries, RUNTIME_IMAGE a
#                  local debootstrap image, and the unused builder stage is skipped.
ARG BUILDER_IMAGE=rust:1-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim
ARG BINARIES=builder

# ---- build ---------------------------------------------------------------------------------------
FROM ${BUILDER_IMAGE} AS builder
RUN apt-get update \
 && apt-get install -y --no-install-recommends cmake pkg-config \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Only what the build needs (the build context may contain a large target/ directory). benches/
# is copied because Cargo.toml declares a [[bench]] target, and cargo checks that it exists.
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY lua ./lua
COPY benches ./benches
RUN cargo build --release --locked --bins \
 && mkdir -p /out \
 && cp target/release/tollgate target/release/tollgate-echo /out/

# ---- binaries: the builder stage, or a prebuilt image given as BINARIES ---------------------------
FROM ${BINARIES} AS binaries

# ---- runtime -------------------------------------------------------------------------------------
FROM ${RUNTIME_IMAGE}
LABEL org.opencontainers.image.title="tollgate"
# curl serves the healthchecks; a base that already has it needs no package download.
RUN if ! command -v curl >/dev/null; then \
      apt-get update \
      && apt-get install -y --no-install-recommends ca-certificates curl \
      && rm -rf /var/lib/apt/lists/*; \
    fi \
 && useradd --system --no-create-home --shell /usr/sbin/nologin tollgate
COPY --from=binaries /out/tollgate /out/tollgate-echo /usr/local/bin/
COPY gateway.yaml /etc/tollgate/gateway.yaml
COPY demo/jwt-hs256.secret /etc/tollgate/demo/jwt-hs256.secret
# secret_file paths in the config are relative to the working directory.
WORKDIR /etc/tollgate
USER tollgate
EXPOSE 8080 9090
# SIGTERM: graceful shutdown (server.grace_period_s); SIGHUP: reload the config.
STOPSIGNAL SIGTERM
ENTRYPOINT ["tollgate"]
CMD ["run", "-c", "/etc/tollgate/gateway.yaml"]
