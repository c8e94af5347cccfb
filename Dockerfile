# The worker and starter image for users: build with `docker build -t sandboxflow-worker .`
# (docker-compose.yml does). Without a registry, scripts/build-worker-image.sh builds the same image
# from binaries compiled on the host.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/worker ./worker \
 && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/starter ./starter

FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/worker /out/starter /
ENTRYPOINT ["/worker"]
