# The hotlist binary in a slim image: build with cargo, run on Debian slim.
#   docker build -t hotlist .
#   docker run --rm -v "$PWD/configs:/etc/hotlist" hotlist run --config /etc/hotlist/local.toml
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p hotlist && cp target/release/hotlist /usr/local/bin/hotlist

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /var/lib/hotlist --create-home hotlist
COPY --from=build /usr/local/bin/hotlist /usr/local/bin/hotlist
USER hotlist
WORKDIR /var/lib/hotlist
ENTRYPOINT ["hotlist"]
CMD ["--help"]
