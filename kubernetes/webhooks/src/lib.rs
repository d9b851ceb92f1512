//! TARSy webhooks, served by `tarsy webhooks`:
//!
//! - the **Alertmanager bridge** ([`alertmanager`]): Alertmanager's webhook
//!   notifications (payload version 4) become `Alert` resources, one per
//!   firing alert, deduplicated by fingerprint, through an [`sink::AlertSink`];
//! - the **validating admission webhook** ([`admission`]): what CEL rules
//!   cannot check for Chain, Agent, MCPServer, LLMProvider and Alert
//!   (references to other objects, alert-type ownership, masking regexes),
//!   reading the namespace through a [`resources::ResourceReader`].
//!
//! [`server::serve`] runs both over HTTPS (certificate from a mounted Secret,
//! reloaded on change) and optionally the bridge over plain HTTP.

#![warn(missing_docs)]

pub mod admission;
pub mod alertmanager;
pub mod auth;
pub mod builtins;
mod error;
pub mod resources;
pub mod server;
pub mod sink;
pub mod tls;

pub use admission::{AdmissionConfig, AdmissionState, ReferencePolicy};
pub use alertmanager::{BridgeConfig, BridgeState, router};
pub use auth::{BridgeAuth, load_token};
pub use builtins::Builtins;
#[cfg(feature = "testing")]
pub use resources::InMemoryResources;
pub use resources::{KubeResources, ResourceReader};
pub use server::{ServeConfig, app, serve};
#[cfg(feature = "testing")]
pub use sink::InMemoryAlertSink;
pub use sink::{AlertSink, KubeAlertSink};
pub use tls::TlsFiles;
