# syntax=docker/dockerfile:1.7
# image/image.yaml is the one description of the image (user, entrypoint, environment, files,
# labels, platforms); `make image` builds it from there without a Docker engine. This Dockerfile,
# for `docker buildx` users, must say the same: test/unit/image-definition.test.ts fails when they drift.
# One image for the controller and the worker. The bundle is plain JavaScript, so the build stage
# runs once on the build platform and the final stage is per target platform (amd64/arm64):
#   make docker-build IMAGE=ghcr.io/you/kube-node-ready:1.0.0   (pushes it, with SBOM and provenance;
#   OUTPUT=oci writes dist/kube-node-ready-oci.tar instead: docs/supply-chain.md)
# Both bases are pinned by digest (BuildKit pulls the digest; the tag is only for the reader).
# Base image digests: taken from public Dockerfiles that pin the same ones, not verified here (no Docker engine or registry access); update: make pin-base-images (docs/supply-chain.md)
ARG NODE_IMAGE=node:24-bookworm-slim@sha256:0e0ff40c39bc087845bfb27465a0df4ea419520094bc35842ff83dd8cbe6f9b6
ARG RUNTIME_IMAGE=gcr.io/distroless/nodejs24-debian12:nonroot@sha256:14d42e2511532589a7c7e01a753667a74fcc96266e137e8125006b87b0c32d0a
# The image's version (packages/cli/package.json) and git commit; make docker-build passes both.
ARG VERSION=dev
ARG COMMIT=unknown

FROM --platform=$BUILDPLATFORM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json .npmrc ./
COPY packages/core/package.json packages/core/
COPY packages/worker/package.json packages/worker/
COPY packages/controller/package.json packages/controller/
COPY packages/sandbox/package.json packages/sandbox/
COPY packages/cli/package.json packages/cli/
# The image's own Node 24 builds; the `node` devDependency's download is not needed here.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY scripts scripts
COPY packages packages
ARG VERSION
ARG COMMIT
RUN KNR_VERSION=${VERSION} KNR_COMMIT=${COMMIT} node scripts/bundle.mjs && node scripts/dist.mjs

FROM ${RUNTIME_IMAGE}
ARG VERSION
ARG COMMIT
LABEL org.opencontainers.image.title="kube-node-ready" \
      org.opencontainers.image.description="Verifies a new node's network from its pod network before opening it to workloads" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/kube-node-ready/kube-node-ready" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}"
COPY --from=build /src/dist/image /app
# Non-root, nothing written at run time: works with readOnlyRootFilesystem.
USER 65532:65532
WORKDIR /home/nonroot
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
# No --enable-source-maps: decoding the map costs every worker memory and start-up time
# (docs/worker.md#benchmarks). NODE_OPTIONS=--enable-source-maps gives TypeScript stack traces.
ENTRYPOINT ["/nodejs/bin/node", "/app/kube-node-ready.mjs"]
