-- pgbench's side of the hold figure: a sale with :units units and :units admitted attempts,
-- written straight into the ledger (ids derived from the attempt's number).
INSERT INTO sales (id, name, opens_at, stock_kind, total, per_user_limit, admission_ttl_secs,
    hold_ttl_secs, payment_ttl_secs, rate_per_minute, max_active, status)
VALUES (:'sale', 'pgbench', now(), 'quantity', :units, 1, 3600, 3600, 3600, 1, 1, 'paused');
INSERT INTO stock_units (sale_id, unit_id) SELECT :'sale', n::text FROM generate_series(1, :units) n;
INSERT INTO attempts (id, sale_id, user_id, seq, state, admission_expires_at)
SELECT ('00000000-0000-7000-8000-' || lpad(n::text, 12, '0'))::uuid, :'sale', 'pg-' || n, n,
       'ADMITTED', now() + interval '1 hour'
FROM generate_series(1, :units) n;
