# A minimal, static, non-root egressd image (distroless-style).
# It cannot be built on the development machines of this project (no
# container engine there), so it is not built in CI; the binary it copies
# is built exactly as "make build" builds it, which CI does check.
FROM golang:1.26 AS build
ARG VERSION=dev
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/egressd ./cmd/egressd

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/egressd /usr/bin/egressd
# uid 65532 is distroless's "nonroot"; the Kubernetes fence allows it out.
USER 65532:65532
ENTRYPOINT ["/usr/bin/egressd"]
CMD ["serve", "--manifest=/etc/egressd/manifest.json", "--listen=127.0.0.1:3128", "--admin=0.0.0.0:9090", "--state=/var/lib/egressd"]
