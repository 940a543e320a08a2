-- What checking the signatures on a publisher's own card found (JSON), when it carries any.
ALTER TABLE agents ADD COLUMN card_signature TEXT;
