//! In-process fan-out of events to the subscribers of this process.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use serde_json::Value;
use tokio::sync::{Notify, mpsc, oneshot};

use crate::EventsError;

/// How many undelivered events one subscriber may have queued. Beyond it the
/// subscriber is marked lagged and recovers persistent events by catch-up.
const QUEUE_CAPACITY: usize = 1024;

/// One event on its way to subscribers.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    /// Channel it was published on.
    pub channel: String,
    /// Stored event id (the catch-up cursor); `None` for transient events.
    pub event_id: Option<i64>,
    /// The event as clients see it.
    pub payload: Value,
}

/// What a subscriber receives.
#[derive(Debug, Clone)]
pub enum BusItem {
    /// An event of a subscribed channel.
    Event(Arc<Delivery>),
    /// Events may have been missed (the subscriber's queue overflowed, or the
    /// Postgres listener lost its connection): catch up from storage.
    Resync,
}

/// A command for the Postgres LISTEN task.
pub(crate) enum ListenCmd {
    /// Make sure the channel is listened to; answer once it is.
    Listen {
        channel: String,
        ack: oneshot::Sender<Result<(), String>>,
    },
    /// Nobody here subscribes to the channel any more.
    Unlisten { channel: String },
}

/// Sending side of one subscriber, as registered on a channel.
#[derive(Clone)]
struct SubEntry {
    tx: mpsc::Sender<Arc<Delivery>>,
    lagged: Arc<AtomicBool>,
    wake: Arc<Notify>,
}

impl SubEntry {
    fn flag_lagged(&self) {
        self.lagged.store(true, Ordering::SeqCst);
        self.wake.notify_one();
    }
}

struct Inner {
    channels: Mutex<HashMap<String, HashMap<u64, SubEntry>>>,
    next_id: AtomicU64,
    listen: Option<mpsc::UnboundedSender<ListenCmd>>,
}

impl Inner {
    fn channels(&self) -> MutexGuard<'_, HashMap<String, HashMap<u64, SubEntry>>> {
        // A panic while holding the lock cannot leave the map inconsistent
        // (every critical section is a single insert or remove): keep going.
        self.channels
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn remove(&self, channel: &str, id: u64) {
        let mut channels = self.channels();
        let now_empty = match channels.get_mut(channel) {
            Some(subs) => {
                subs.remove(&id);
                subs.is_empty()
            }
            None => false,
        };
        if now_empty {
            channels.remove(channel);
            if let Some(listen) = &self.listen {
                // Sent under the lock so LISTEN/UNLISTEN reach the task in
                // the order the subscription counts changed.
                let _ = listen.send(ListenCmd::Unlisten {
                    channel: channel.to_string(),
                });
            }
        }
    }
}

/// Fans events out to this process's subscribers by channel. Cheap to clone.
#[derive(Clone)]
pub struct EventBus {
    inner: Arc<Inner>,
}

/// A bus handle that does not keep the bus alive (held by the LISTEN task).
#[derive(Clone)]
pub(crate) struct WeakBus(Weak<Inner>);

impl WeakBus {
    pub(crate) fn upgrade(&self) -> Option<EventBus> {
        self.0.upgrade().map(|inner| EventBus { inner })
    }
}

impl Default for EventBus {
    fn default() -> Self {
        Self::new()
    }
}

impl EventBus {
    /// A bus fed only by in-process publishers (SQLite / local mode).
    pub fn new() -> Self {
        Self::build(None)
    }

    pub(crate) fn with_listener(listen: mpsc::UnboundedSender<ListenCmd>) -> Self {
        Self::build(Some(listen))
    }

    fn build(listen: Option<mpsc::UnboundedSender<ListenCmd>>) -> Self {
        Self {
            inner: Arc::new(Inner {
                channels: Mutex::new(HashMap::new()),
                next_id: AtomicU64::new(1),
                listen,
            }),
        }
    }

    pub(crate) fn downgrade(&self) -> WeakBus {
        WeakBus(Arc::downgrade(&self.inner))
    }

    /// A new subscriber with no channels yet.
    pub fn subscriber(&self) -> Subscriber {
        let (tx, rx) = mpsc::channel(QUEUE_CAPACITY);
        let entry = SubEntry {
            tx,
            lagged: Arc::new(AtomicBool::new(false)),
            wake: Arc::new(Notify::new()),
        };
        Subscriber {
            id: self.inner.next_id.fetch_add(1, Ordering::Relaxed),
            bus: self.clone(),
            entry,
            rx,
            channels: HashSet::new(),
        }
    }

    /// Delivers an event to every subscriber of its channel in this process.
    /// Never blocks: a subscriber whose queue is full is marked lagged.
    pub fn dispatch(&self, delivery: Delivery) {
        let delivery = Arc::new(delivery);
        let channels = self.inner.channels();
        let Some(subs) = channels.get(&delivery.channel) else {
            return;
        };
        for entry in subs.values() {
            match entry.tx.try_send(delivery.clone()) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(_)) => entry.flag_lagged(),
                // The subscriber is being dropped; its Drop unregisters it.
                Err(mpsc::error::TrySendError::Closed(_)) => {}
            }
        }
    }

    /// Tells every subscriber that events may have been missed.
    pub(crate) fn resync_all(&self) {
        let channels = self.inner.channels();
        for entry in channels.values().flat_map(|subs| subs.values()) {
            entry.flag_lagged();
        }
    }

    /// How many subscriptions (subscriber × channel) exist in this process.
    pub fn subscription_count(&self) -> usize {
        self.inner.channels().values().map(HashMap::len).sum()
    }
}

/// One consumer of the bus (a WebSocket connection). Dropping it removes
/// all its subscriptions.
pub struct Subscriber {
    id: u64,
    bus: EventBus,
    entry: SubEntry,
    rx: mpsc::Receiver<Arc<Delivery>>,
    channels: HashSet<String>,
}

impl Subscriber {
    /// Starts receiving the channel's events. On Postgres it returns only once
    /// this process LISTENs on the channel, so that a catch-up read made after
    /// it cannot miss an event committed in between.
    pub async fn subscribe(&mut self, channel: &str) -> Result<(), EventsError> {
        if self.channels.contains(channel) {
            return Ok(());
        }
        let ack = {
            let mut channels = self.bus.inner.channels();
            channels
                .entry(channel.to_string())
                .or_default()
                .insert(self.id, self.entry.clone());
            self.bus.inner.listen.as_ref().map(|listen| {
                let (tx, rx) = oneshot::channel();
                let sent = listen.send(ListenCmd::Listen {
                    channel: channel.to_string(),
                    ack: tx,
                });
                (sent.is_ok(), rx)
            })
        };
        self.channels.insert(channel.to_string());
        if let Some((sent, rx)) = ack {
            let outcome = if sent {
                match rx.await {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(message)) => Err(EventsError::Listen {
                        channel: channel.to_string(),
                        message,
                    }),
                    Err(_) => Err(EventsError::ListenerStopped),
                }
            } else {
                Err(EventsError::ListenerStopped)
            };
            if outcome.is_err() {
                self.unsubscribe(channel);
            }
            outcome?;
        }
        Ok(())
    }

    /// Stops receiving the channel's events (events already queued stay).
    pub fn unsubscribe(&mut self, channel: &str) {
        if self.channels.remove(channel) {
            self.bus.inner.remove(channel, self.id);
        }
    }

    /// True when subscribed to the channel.
    pub fn is_subscribed(&self, channel: &str) -> bool {
        self.channels.contains(channel)
    }

    /// The subscribed channels.
    pub fn channels(&self) -> impl Iterator<Item = &str> {
        self.channels.iter().map(String::as_str)
    }

    /// The next item; `None` never happens while the subscriber exists (it
    /// holds its own sender), so callers can loop on it. Cancel-safe.
    pub async fn recv(&mut self) -> Option<BusItem> {
        loop {
            if self.entry.lagged.swap(false, Ordering::SeqCst) {
                return Some(BusItem::Resync);
            }
            tokio::select! {
                item = self.rx.recv() => return item.map(BusItem::Event),
                _ = self.entry.wake.notified() => continue,
            }
        }
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        for channel in self.channels.drain() {
            self.bus.inner.remove(&channel, self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn delivery(channel: &str, id: i64) -> Delivery {
        Delivery {
            channel: channel.into(),
            event_id: Some(id),
            payload: json!({"n": id}),
        }
    }

    #[tokio::test]
    async fn only_subscribed_channels_are_delivered() {
        let bus = EventBus::new();
        let mut a = bus.subscriber();
        let mut b = bus.subscriber();
        a.subscribe("session:1").await.unwrap();
        b.subscribe("session:2").await.unwrap();
        bus.dispatch(delivery("session:1", 1));
        bus.dispatch(delivery("session:2", 2));
        let Some(BusItem::Event(got)) = a.recv().await else {
            panic!("expected an event")
        };
        assert_eq!(got.event_id, Some(1));
        let Some(BusItem::Event(got)) = b.recv().await else {
            panic!("expected an event")
        };
        assert_eq!(got.event_id, Some(2));
        assert_eq!(bus.subscription_count(), 2);
        a.unsubscribe("session:1");
        bus.dispatch(delivery("session:1", 3));
        drop(b);
        assert_eq!(bus.subscription_count(), 0);
        let nothing = tokio::time::timeout(std::time::Duration::from_millis(50), a.recv()).await;
        assert!(nothing.is_err(), "unsubscribed channel still delivered");
    }

    #[tokio::test]
    async fn a_full_queue_turns_into_a_resync() {
        let bus = EventBus::new();
        let mut a = bus.subscriber();
        a.subscribe("sessions").await.unwrap();
        for i in 0..(QUEUE_CAPACITY as i64 + 5) {
            bus.dispatch(delivery("sessions", i));
        }
        assert!(matches!(a.recv().await, Some(BusItem::Resync)));
        assert!(matches!(a.recv().await, Some(BusItem::Event(_))));
    }
}
