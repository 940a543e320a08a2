//! Thin REST handlers, one file per resource: extract → authorise → call the domain → respond.

pub mod agents;
pub mod ard;
pub mod audit;
pub mod bazaar;
pub mod bindings;
pub mod catalog;
pub mod changes;
pub mod identity;
pub mod mcp_registry;
pub mod mirrors;
pub mod namespaces;
pub mod ops;
pub mod orgs;
pub mod public;
pub mod signin;
pub mod tokens;
