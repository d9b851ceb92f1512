//! The Postgres LISTEN task: one connection per process listens on every
//! channel some local subscriber wants and feeds the bus.

use std::collections::HashSet;
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::{PgListener, PgNotification};
use tarsy_store::{EventNotification, Store};
use tokio::sync::mpsc;

use crate::bus::{Delivery, ListenCmd, WeakBus};

/// Pause before retrying after a listener error.
const RETRY_DELAY: Duration = Duration::from_millis(500);

pub(crate) fn spawn(
    pool: PgPool,
    store: Store,
    bus: WeakBus,
    cmds: mpsc::UnboundedReceiver<ListenCmd>,
) {
    tokio::spawn(run(pool, store, bus, cmds));
}

async fn run(
    pool: PgPool,
    store: Store,
    bus: WeakBus,
    mut cmds: mpsc::UnboundedReceiver<ListenCmd>,
) {
    let mut listener = loop {
        match PgListener::connect_with(&pool).await {
            Ok(listener) => break listener,
            Err(sqlx::Error::PoolClosed) => return,
            Err(e) => {
                tracing::warn!(error = %e, "event listener cannot connect; retrying");
                if bus.upgrade().is_none() {
                    return;
                }
                tokio::time::sleep(RETRY_DELAY).await;
            }
        }
    };
    let mut listening: HashSet<String> = HashSet::new();
    loop {
        tokio::select! {
            cmd = cmds.recv() => match cmd {
                // The bus is gone: nobody can subscribe any more.
                None => return,
                Some(ListenCmd::Listen { channel, ack }) => {
                    let outcome = if listening.contains(&channel) {
                        Ok(())
                    } else {
                        match listener.listen(&channel).await {
                            Ok(()) => {
                                listening.insert(channel);
                                Ok(())
                            }
                            Err(e) => Err(e.to_string()),
                        }
                    };
                    let _ = ack.send(outcome);
                }
                Some(ListenCmd::Unlisten { channel }) => {
                    if listening.remove(&channel)
                        && let Err(e) = listener.unlisten(&channel).await
                    {
                        tracing::warn!(%channel, error = %e, "UNLISTEN failed");
                    }
                }
            },
            received = listener.try_recv() => match received {
                Ok(Some(notification)) => {
                    let Some(bus) = bus.upgrade() else { return };
                    if let Some(delivery) = decode(&store, &notification).await {
                        bus.dispatch(delivery);
                    }
                }
                Ok(None) => {
                    // Reconnected (and re-LISTENed): whatever was notified
                    // meanwhile is lost, so subscribers catch up from storage.
                    tracing::warn!("event listener reconnected; subscribers will catch up");
                    let Some(bus) = bus.upgrade() else { return };
                    bus.resync_all();
                }
                Err(sqlx::Error::PoolClosed) => return,
                Err(e) => {
                    tracing::warn!(error = %e, "event listener failed; retrying");
                    tokio::time::sleep(RETRY_DELAY).await;
                    let Some(bus) = bus.upgrade() else { return };
                    bus.resync_all();
                }
            },
        }
    }
}

/// Turns a notification into a delivery, loading truncated events from storage.
async fn decode(store: &Store, notification: &PgNotification) -> Option<Delivery> {
    let channel = notification.channel().to_string();
    let parsed = match EventNotification::parse(notification.payload()) {
        Ok(parsed) => parsed,
        Err(e) => {
            tracing::warn!(%channel, error = %e, "ignoring a malformed notification");
            return None;
        }
    };
    let payload = match (parsed.payload, parsed.event_id) {
        (Some(payload), event_id) if !parsed.truncated => {
            return Some(Delivery {
                channel,
                event_id,
                payload,
            });
        }
        (_, Some(id)) => match store.get_event(id).await {
            Ok(event) => event.payload,
            Err(e) => {
                tracing::warn!(%channel, event_id = id, error = %e, "cannot load a truncated event");
                return None;
            }
        },
        (_, None) => {
            tracing::warn!(%channel, "ignoring a notification with neither payload nor event id");
            return None;
        }
    };
    Some(Delivery {
        channel,
        event_id: parsed.event_id,
        payload,
    })
}
