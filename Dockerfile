# syntax=docker/dockerfile:1
# prunesched: one static binary, plus the nats-server it embeds (the same
# version, from go.mod) for the NATS nodes of deploy/compose.yaml.
#   docker build -t prunesched:local .
#   docker run --rm -p 127.0.0.1:7070:7070 \
#     -v "$PWD/deploy/secrets/api-tokens:/run/secrets/api_tokens:ro" prunesched:local
# See docs/operating.md, "Deploying".

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Static binaries (no cgo), no VCS stamping (.git is not in the build
# context, see .dockerignore).
ENV CGO_ENABLED=0 GOFLAGS=-buildvcs=false
RUN go build -trimpath -ldflags="-s -w" -o /out/prunesched ./cmd/prunesched \
 && go build -trimpath -ldflags="-s -w" -o /out/nats-server github.com/nats-io/nats-server/v2 \
 && mkdir -p /out/data

# distroless/static: no shell, no package manager, CA certificates for the
# proxy's upstream, and the unprivileged user "nonroot" (65532).
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/prunesched /out/nats-server /usr/local/bin/
# The data directory (embedded NATS, the proxy's identity key) belongs to
# the unprivileged user; a named volume mounted here inherits that owner.
COPY --from=build --chown=65532:65532 /out/data /data
ENV PRUNESCHED_DATA=/data
WORKDIR /data
USER 65532:65532
EXPOSE 7070 8788
ENTRYPOINT ["/usr/local/bin/prunesched"]
# Inside a container "loopback" is the container itself: listen on all of
# its interfaces and publish the port on the host's loopback only
# (docker run -p 127.0.0.1:7070:7070). Beyond loopback the API needs an
# auth file: mount one at /run/secrets/api_tokens (serve refuses to start
# without it).
CMD ["serve", "--listen", "0.0.0.0:7070", "--auth-file", "/run/secrets/api_tokens"]
