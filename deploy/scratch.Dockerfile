# The same image as ../Dockerfile, from binaries built on the host (scripts/build-worker-image.sh):
# no registry, no base image, just static binaries and the CA bundle for TLS to Temporal.
FROM scratch
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY worker starter /
ENTRYPOINT ["/worker"]
