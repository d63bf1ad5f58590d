-- W3C traceparents of the spans that wrote the rows (none when no trace was recorded):
-- an outbox row's is sent as its Kafka record's header, so a consumer continues the buyer's
-- trace; a payment's is its checkout's, so the provider's word on it joins the same trace.
ALTER TABLE outbox ADD COLUMN traceparent TEXT;
ALTER TABLE payments ADD COLUMN traceparent TEXT;
