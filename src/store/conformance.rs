//! The conformance suite every `Store` implementation must pass.
