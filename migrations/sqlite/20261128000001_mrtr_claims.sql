-- A retry goes on from a round by claiming it until `claimed_until` (unix ms; 0: not claimed),
-- renewing the claim while its call runs, and deletes the round once it is answered. A retry
-- that ends without an answer releases its claim; one whose replica died lets it lapse, so the
-- client can send the retry again.
ALTER TABLE mrtr_rounds ADD COLUMN claimed_until BIGINT NOT NULL DEFAULT 0;
