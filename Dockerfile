# sluice's image: built in one stage, run from a slim one. librdkafka is compiled statically by
# the rdkafka crate (it needs cmake, make and a C compiler at build time only).
FROM rust:1-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends cmake && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo build --release --locked && cp target/release/sluice /usr/local/bin/sluice

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 sluice
COPY --from=build /usr/local/bin/sluice /usr/local/bin/sluice
USER sluice
WORKDIR /home/sluice
EXPOSE 8080
ENTRYPOINT ["sluice"]
CMD ["serve"]
