# llmgw's container image: a static binary and the build stage's CA
# certificates on an empty base, run as uid 65532 with nothing to write
# but /var/lib/llmgw, so a read-only root filesystem serves.
# `make image` builds the same image without a daemon (deploy/image);
# deploy/image/image_test.go holds the two to each other.
#
#   docker build -t llmgw --build-arg VERSION=1.2.3 --build-arg REVISION=$(git rev-parse HEAD) .

FROM --platform=$BUILDPLATFORM golang:1.26.8-bookworm AS build
ARG TARGETARCH
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=linux GOARCH=$TARGETARCH GOWORK=off go build -trimpath -ldflags="-s -w -buildid=" -o /out/llmgw ./cmd/llmgw
RUN mkdir -p /out/var/lib/llmgw

FROM scratch
ARG VERSION=dev
ARG REVISION=unknown
ARG CREATED=1970-01-01T00:00:00Z
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/llmgw /llmgw
COPY --from=build --chown=65532:65532 /out/var/lib/llmgw /var/lib/llmgw
USER 65532:65532
WORKDIR /var/lib/llmgw
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin TMPDIR=/var/lib/llmgw
VOLUME ["/var/lib/llmgw"]
EXPOSE 8080/tcp 8081/tcp
LABEL org.opencontainers.image.title="llmgw" \
      org.opencontainers.image.description="An OpenAI-compatible gateway in front of pools of LLM inference servers and hosted providers." \
      org.opencontainers.image.source="https://gitea.mynodes.xyz/ilker/llmgw" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}"
ENTRYPOINT ["/llmgw"]
CMD ["serve"]
