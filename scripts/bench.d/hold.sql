-- The ledger's hold transaction (src/ledger/postgres/attempts.rs, transition.rs), statement
-- for statement, for pgbench. Attempt :n of the prepared sale holds one unit.
\set n random(1, :units)
BEGIN;
SELECT a.id, a.sale_id, a.user_id, a.seq, a.state, a.reason, a.admission_expires_at,
       a.hold_expires_at, a.payment_expires_at, h.quantity, h.seat_ids, h.status, p.reference
  FROM attempts a LEFT JOIN holds h ON h.attempt_id = a.id LEFT JOIN payments p ON p.attempt_id = a.id
 WHERE a.id = ('00000000-0000-7000-8000-' || lpad(:n::text, 12, '0'))::uuid FOR UPDATE OF a;
SELECT now() + interval '1 hour' <= now();
SET LOCAL enable_seqscan = off;
UPDATE stock_units SET attempt_id = ('00000000-0000-7000-8000-' || lpad(:n::text, 12, '0'))::uuid
 WHERE ctid = ANY(ARRAY(
     SELECT ctid FROM stock_units WHERE sale_id = :sale AND attempt_id IS NULL
     LIMIT 1 FOR UPDATE SKIP LOCKED))
 RETURNING unit_id;
INSERT INTO holds (attempt_id, sale_id, quantity, seat_ids, status)
VALUES (('00000000-0000-7000-8000-' || lpad(:n::text, 12, '0'))::uuid, :sale, 1, '{}', 'held')
ON CONFLICT (attempt_id) DO NOTHING;
UPDATE attempts a SET hold_expires_at = now() + make_interval(secs => s.hold_ttl_secs)
  FROM sales s WHERE a.id = ('00000000-0000-7000-8000-' || lpad(:n::text, 12, '0'))::uuid AND s.id = a.sale_id;
UPDATE attempts SET state = 'HOLD', reason = NULL, updated_at = now()
 WHERE id = ('00000000-0000-7000-8000-' || lpad(:n::text, 12, '0'))::uuid;
INSERT INTO attempt_transitions (attempt_id, from_state, to_state, reason, cause)
VALUES (('00000000-0000-7000-8000-' || lpad(:n::text, 12, '0'))::uuid, 'ADMITTED', 'HOLD', NULL, 'hold');
INSERT INTO outbox (id, sale_id, event_type, payload)
VALUES (gen_random_uuid(), :sale, 'sluice.attempt.held',
        '{"type": "sluice.attempt.held", "data": {"user_id": "pg", "from": "ADMITTED", "to": "HOLD"}}');
SELECT a.id, a.state, h.quantity, p.reference
  FROM attempts a LEFT JOIN holds h ON h.attempt_id = a.id LEFT JOIN payments p ON p.attempt_id = a.id
 WHERE a.id = ('00000000-0000-7000-8000-' || lpad(:n::text, 12, '0'))::uuid FOR UPDATE OF a;
END;
