# linkgate's container image, for those who build with Docker:
#
#   docker buildx build --platform linux/amd64,linux/arm64 \
#     --build-arg VERSION=v0.1.0 --build-arg REVISION=$(git rev-parse HEAD) \
#     --build-arg SOURCE_DATE_EPOCH=$(git log -1 --format=%ct) -t linkgate .
#
# `make image` builds the same image without Docker, from make cross's
# binaries (tools/release image, with go-containerregistry). The build stage
# cross-compiles on the builder's own platform, then writes the image's
# files with the same code make image uses; the final stage is FROM scratch.
# A test builds this final stage with podman and checks that it matches.
ARG GO_IMAGE=golang:1.26-bookworm

FROM --platform=$BUILDPLATFORM ${GO_IMAGE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG TARGETARCH
ARG VERSION=dev
ARG REVISION=unknown
ARG SOURCE_DATE_EPOCH=0
RUN go run ./tools/release build -arch "$TARGETARCH" -version "$VERSION" -commit "$REVISION" -out /out \
 && go run ./tools/release rootfs -bin "/out/linkgate_linux_$TARGETARCH" -out /rootfs

FROM scratch
ARG VERSION=dev
ARG REVISION=unknown
COPY --from=build /rootfs/ /
USER 65532:65532
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
WORKDIR /
EXPOSE 8080/tcp 9080/tcp 9443/tcp
VOLUME ["/data"]
LABEL org.opencontainers.image.title="linkgate" \
      org.opencontainers.image.description="The link platform in one binary: URL shortener, APISIX-compatible API gateway, load generator." \
      org.opencontainers.image.source="https://github.com/linkgate/linkgate" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0"
ENTRYPOINT ["/linkgate"]
CMD ["serve"]
