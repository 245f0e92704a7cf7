# syntax=docker/dockerfile:1

# Build a static binary; nothing from this stage but the binary ships.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/mailroom ./cmd/server \
 && mkdir -p /out/data /out/workspaces

# Distroless with Python: the team-protocols scenario runs its workspace
# program with python3. No shell, no package manager; :nonroot runs as uid
# 65532. The health check uses the binary's own healthcheck command, since
# the image has no curl or wget.
FROM gcr.io/distroless/python3-debian12:nonroot
COPY --from=build /out/mailroom /usr/local/bin/mailroom
# A fresh named volume copies this directory's owner, so the non-root user
# can write to /data.
COPY --from=build --chown=65532:65532 /out/data /data
# The replicas' shared workspaces volume (docker-compose.replicas.yml).
COPY --from=build --chown=65532:65532 /out/workspaces /workspaces
ENV MAILROOM_ADDR=0.0.0.0:8080 \
    MAILROOM_DATA=/data
VOLUME /data
EXPOSE 8080
USER nonroot:nonroot
HEALTHCHECK --interval=30s --timeout=5s --start-period=5s --retries=3 \
  CMD ["/usr/local/bin/mailroom", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/mailroom"]
