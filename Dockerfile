# kproxy: a static binary on a distroless base, running as a non-root user.
#   docker build -t kproxy .
#   docker run --rm -p 9092:9092 -p 9644:9644 kproxy serve --etcd-endpoints http://etcd:2379 --advertise HOST:9092

FROM golang:1.26-bookworm AS build
WORKDIR /src
# Modules first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags="-s -w" -o /out/kproxy ./cmd/kproxy

# distroless/static: CA certificates, tzdata and /etc/passwd with the
# nonroot user (65532), nothing else: no shell, no package manager.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/kproxy /usr/local/bin/kproxy
USER 65532:65532
# Kafka clients, the admin HTTP (probes, metrics, routing page).
EXPOSE 9092 9644
ENTRYPOINT ["/usr/local/bin/kproxy"]
CMD ["serve", "--listen", "0.0.0.0:9092", "--admin", "0.0.0.0:9644"]
