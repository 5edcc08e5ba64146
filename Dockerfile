# The agentlane image: the manager (entrypoint), the worker and the scripted
# agent, built static and shipped on an empty base. The worker Deployment runs
# the same image with command /worker (config/worker/worker.yaml).
#
#   make docker-build IMG=agentlane:dev

FROM golang:1.26 AS builder
ARG TARGETOS
ARG TARGETARCH
WORKDIR /src

# Modules first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download

COPY api/ api/
COPY cmd/ cmd/
COPY internal/ internal/
COPY pkg/ pkg/

# Static binaries: the final stage has no C library.
ENV CGO_ENABLED=0
# VERSION and REVISION label agentlane_build_info (the .git directory is not
# copied, so Go cannot record them): --build-arg VERSION=v0.2.0 --build-arg REVISION=$(git rev-parse HEAD).
ARG VERSION=""
ARG REVISION=""
RUN GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    go build -trimpath -o /out/ -ldflags="-s -w \
      -X github.com/agentlane/agentlane/internal/buildinfo.Version=${VERSION} \
      -X github.com/agentlane/agentlane/internal/buildinfo.Revision=${REVISION}" \
    ./cmd/manager ./cmd/worker ./cmd/agent

FROM scratch
# The CA bundle, for TLS to the API server's clients and to HTTP budget guards.
COPY --from=builder /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=builder /out/manager /out/worker /out/agent /
# A numeric non-root user, so that runAsNonRoot can be verified without /etc/passwd.
USER 65532:65532
ENTRYPOINT ["/manager"]
