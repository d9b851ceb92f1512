//! TARSy live events.
//!
//! * [`StorePublisher`] implements [`tarsy_core::EventPublisher`] on top of
//!   [`tarsy_store::Store`]: persistent events are stored (and, on Postgres,
//!   `NOTIFY`-ed in the same transaction); transient `stream.chunk` events are
//!   a bare `NOTIFY` on Postgres and an in-process dispatch on SQLite.
//! * [`EventBus`] fans events out to the subscribers of this process
//!   (WebSocket connections), per channel (`session:{id}`, `sessions`).
//! * On Postgres, [`EventHub::start`] runs a `LISTEN` task that feeds the bus
//!   with every notification of the channels someone here subscribes to, so
//!   an event published by any replica (or any investigation pod) reaches the
//!   WebSocket clients of every API replica.
//! * [`lifecycle`] publishes `session.status` and `stage.status` the same
//!   way for every driver.
//! * [`Connection`] is the WebSocket protocol (subscribe, unsubscribe,
//!   catch-up, ping) independent of any HTTP framework.

#![warn(missing_docs)]

mod bus;
mod connection;
pub mod lifecycle;
mod listener;
mod publisher;

use std::sync::Arc;

pub use bus::{BusItem, Delivery, EventBus, Subscriber};
pub use connection::{
    CATCHUP_LIMIT, ClientMessage, Connection, MAX_SUBSCRIPTIONS, validate_channel,
};
pub use publisher::{StorePublisher, fit_transient};
use tarsy_store::{BackendKind, Store};

/// Errors of the event layer.
#[derive(Debug, thiserror::Error)]
pub enum EventsError {
    /// The channel name is not `sessions` or `session:{id}`.
    #[error("invalid channel {channel:?}: {reason}")]
    InvalidChannel {
        /// The rejected name.
        channel: String,
        /// Why.
        reason: String,
    },
    /// Postgres refused to LISTEN on the channel.
    #[error("cannot listen on {channel:?}: {message}")]
    Listen {
        /// The channel.
        channel: String,
        /// The database error.
        message: String,
    },
    /// The listener task has stopped (the store was closed).
    #[error("the event listener has stopped")]
    ListenerStopped,
    /// A store call failed.
    #[error(transparent)]
    Store(#[from] tarsy_store::StoreError),
}

/// The event plumbing of one process: the bus, the publisher and, on
/// Postgres, the LISTEN task feeding the bus. Cheap to clone.
#[derive(Clone)]
pub struct EventHub {
    store: Store,
    bus: EventBus,
}

impl EventHub {
    /// Builds the hub for `store`. On Postgres this spawns the LISTEN task
    /// (it must run inside a Tokio runtime); it stops when the last clone of
    /// the bus is dropped or the store is closed.
    pub fn start(store: Store) -> Self {
        let bus = match store.postgres_pool() {
            Some(pool) => {
                let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
                let bus = EventBus::with_listener(tx);
                listener::spawn(pool.clone(), store.clone(), bus.downgrade(), rx);
                bus
            }
            None => EventBus::new(),
        };
        Self { store, bus }
    }

    /// The bus subscribers attach to.
    pub fn bus(&self) -> &EventBus {
        &self.bus
    }

    /// The store the events live in.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// A publisher writing to this hub's store. On SQLite it also dispatches
    /// to this process's bus (there is no NOTIFY to do it).
    pub fn publisher(&self) -> Arc<StorePublisher> {
        Arc::new(StorePublisher::new(
            self.store.clone(),
            Some(self.bus.clone()),
        ))
    }

    /// A WebSocket protocol handler for one client connection.
    pub fn connection(&self) -> Connection {
        Connection::new(self.store.clone(), self.bus.subscriber())
    }

    /// Which backend carries the events.
    pub fn backend(&self) -> BackendKind {
        self.store.backend()
    }
}
