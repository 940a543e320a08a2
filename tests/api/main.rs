//! Black-box tests through the real router: one binary, a `TestApp` per test.

mod fakes;
mod github;
mod helpers;
mod issuer;
#[path = "../support/pg_schema.rs"]
mod pg_schema;

mod a2a_conformance;
mod ard;
mod audit;
mod bazaar;
mod card_fetch;
pub mod cards;
mod catalog;
mod changes;
mod deprecation;
mod errors;
mod facets;
mod health;
mod hostile;
mod identifiers;
mod interop;
mod lifecycle;
mod mcp;
mod mcp_registry;
mod mirrors;
mod namespaces;
mod ops;
mod orgs;
mod ownership;
mod playground;
mod private;
mod public;
mod publish;
mod publishing;
mod replicas;
mod restart;
pub mod search_paths;
mod security;
mod signin;
mod ssrf;
mod tokens;
mod utility;
mod verify;
mod versions;
mod visibility;
mod web;
