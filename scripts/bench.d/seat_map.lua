-- wrk: the public seat map of $BENCH_SALE, as every buyer's page reads it.
wrk.path = "/v1/public/sales/" .. os.getenv("BENCH_SALE") .. "/seat-map"
