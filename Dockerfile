# dbm as a container: stage 1 compiles the single `dbm` executable with Bun (`bun run build`), stage 2
# runs only that file on Debian bookworm-slim as a non-root user, with its data in the /data volume.
#   docker build -t dbm . && docker run -p 8080:8080 -v dbm-data:/data dbm

# bun.lock is lockfileVersion 2, written by Bun 1.4; Bun 1.3 fails `bun install --frozen-lockfile` on it
# ("Unknown lockfile version"), so the build image is Bun 1.4, the version CI uses (.ci/run).
ARG BUN_VERSION=1.4.5

FROM oven/bun:${BUN_VERSION} AS build
WORKDIR /src
# Dependencies first so this layer stays cached while only sources change. The compile needs the
# runtime dependencies only; --production skips the test-only ones (embedded PostgreSQL, SMTP server).
COPY package.json bun.lock bunfig.toml ./
RUN bun install --frozen-lockfile --production
COPY tsconfig.json ./
COPY scripts ./scripts
COPY src ./src
RUN bun run build && ./dist/dbm version

FROM debian:bookworm-slim
# The executable links only glibc (libc, libm, libpthread, libdl; symbols up to GLIBC_2.17), all in the
# base image. TLS (SMTP, a PostgreSQL store) verifies against the root store built into the Bun runtime,
# so ca-certificates is not installed; a private CA goes in through NODE_EXTRA_CA_CERTS.
RUN groupadd --system --gid 10001 dbm \
 && useradd --system --uid 10001 --gid 10001 --no-log-init --no-create-home --home-dir /data --shell /usr/sbin/nologin dbm \
 && mkdir /data \
 && chown 10001:10001 /data \
 && chmod 0700 /data
COPY --from=build /src/dist/dbm /usr/local/bin/dbm

ENV DBM_DATA_DIR=/data DBM_LISTEN=0.0.0.0:8080
VOLUME /data
WORKDIR /data
USER 10001:10001
EXPOSE 8080
STOPSIGNAL SIGTERM

# No curl in the slim image: bash (always present in Debian) speaks HTTP through /dev/tcp to
# GET /healthz on the port taken from DBM_LISTEN. Set the address through DBM_LISTEN, not --listen,
# or this check probes the wrong port. It does not apply to `dbm agent`, which serves no HTTP:
# run the agent with --no-healthcheck (or `healthcheck: disable: true` in Compose).
HEALTHCHECK --interval=30s --timeout=5s --start-period=15s --retries=3 \
  CMD ["/bin/bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/${DBM_LISTEN##*:} && printf 'GET /healthz HTTP/1.0\\r\\nHost: localhost\\r\\n\\r\\n' >&3 && head -n 1 <&3 | grep -q ' 200 '"]

ENTRYPOINT ["/usr/local/bin/dbm"]
CMD ["serve"]
