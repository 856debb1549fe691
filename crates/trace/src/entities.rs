//! The ROS 2 entities a trace declares at start-up (nodes, publishers,
//! subscriptions, timers, callbacks), resolved from their handles, so that
//! runtime events can be tied to a topic, a node and a DDS GUID.
//!
//! Handles are addresses inside one process, so everything is keyed by
//! (vpid, handle). Every table is capped; when full, the oldest entry is
//! evicted first and counted in [`EntityStats`]. A handle declared again (an
//! address reused after the entity was destroyed) replaces the old entry.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

use crate::event::{Gid, Record, Ros2Event};

/// Caps of an [`EntityTable`], per table.
#[derive(Clone, Copy, Debug)]
pub struct EntityLimits {
    pub nodes: usize,
    pub endpoints: usize,
    pub callbacks: usize,
}

impl Default for EntityLimits {
    fn default() -> Self {
        EntityLimits { nodes: 4096, endpoints: 65536, callbacks: 65536 }
    }
}

/// Entries evicted or replaced, per table, and declarations that could not be
/// completed (an `rcl_*_init` whose `rmw_*_init` gid was never seen).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EntityStats {
    pub nodes_evicted: u64,
    pub endpoints_evicted: u64,
    pub callbacks_evicted: u64,
    pub gids_evicted: u64,
    pub replaced: u64,
    pub endpoints_without_gid: u64,
    /// Init events without a vpid context (handles of all processes then share one key space).
    pub without_vpid: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    pub vpid: i64,
    pub node_handle: u64,
    pub name: String,
    pub namespace: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndpointKind {
    Publisher,
    Subscription,
}

/// A publisher or subscription: its rcl and rmw handles, topic, node and gid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub kind: EndpointKind,
    pub vpid: i64,
    /// The rcl handle (`publisher_handle` / `subscription_handle`).
    pub handle: u64,
    pub rmw_handle: u64,
    pub node_handle: u64,
    pub topic_name: String,
    pub queue_depth: u64,
    pub gid: Option<Gid>,
}

/// What a callback belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallbackOwner {
    /// A subscription, by its rcl handle.
    Subscription(u64),
    /// A timer, by its handle.
    Timer(u64),
    /// A service, by its rcl handle.
    Service(u64),
}

/// A timer: its period and, once `rclcpp_timer_link_node` named it, its node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timer {
    pub period: i64,
    pub node_handle: Option<u64>,
}

/// A service or a client (`rcl_service_init` / `rcl_client_init`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceEndpoint {
    pub handle: u64,
    pub rmw_handle: u64,
    pub node_handle: u64,
    pub service_name: String,
    /// Kilted on: the client's gid (`rmw_client_init`).
    pub gid: Option<Gid>,
}

struct Capped<K, V> {
    map: HashMap<K, V>,
    order: VecDeque<K>,
    cap: usize,
}

impl<K: Hash + Eq + Clone, V> Capped<K, V> {
    fn new(cap: usize) -> Self {
        Capped { map: HashMap::new(), order: VecDeque::new(), cap: cap.max(1) }
    }
    /// Inserts; returns (replaced, evicted).
    fn insert(&mut self, k: K, v: V) -> (bool, bool) {
        if self.map.insert(k.clone(), v).is_some() {
            return (true, false);
        }
        self.order.push_back(k);
        let mut evicted = false;
        while self.map.len() > self.cap {
            match self.order.pop_front() {
                Some(old) => {
                    if self.map.remove(&old).is_some() {
                        evicted = true;
                    }
                }
                None => break,
            }
        }
        // `order` may hold keys already removed by `remove`; keep it bounded too.
        if self.order.len() > 2 * self.cap {
            let map = &self.map;
            self.order.retain(|k| map.contains_key(k));
        }
        (false, evicted)
    }
    fn get(&self, k: &K) -> Option<&V> {
        self.map.get(k)
    }
    fn remove(&mut self, k: &K) -> Option<V> {
        self.map.remove(k)
    }
    fn len(&self) -> usize {
        self.map.len()
    }
}

type Key = (i64, u64);

/// Entities declared by a trace's init events; feed it every record with [`EntityTable::observe`].
pub struct EntityTable {
    nodes: Capped<Key, Node>,
    /// rmw handle → gid, from rmw_*_init, until the rcl_*_init that names it.
    gids: Capped<Key, Gid>,
    publishers: Capped<Key, Endpoint>,
    subscriptions: Capped<Key, Endpoint>,
    /// rmw handle → rcl handle.
    publisher_by_rmw: Capped<Key, u64>,
    subscription_by_rmw: Capped<Key, u64>,
    /// rclcpp subscription object → rcl subscription handle.
    rclcpp_subscription: Capped<Key, u64>,
    callbacks: Capped<Key, CallbackOwner>,
    symbols: Capped<Key, String>,
    /// rmw handle → gid of every rmw_publisher_init / rmw_subscription_init (kept after the rcl init
    /// claimed it: an rmw handle no rcl init names is an rmw-internal entity).
    rmw_publishers: Capped<Key, Gid>,
    rmw_subscriptions: Capped<Key, Gid>,
    timers: Capped<Key, Timer>,
    services: Capped<Key, ServiceEndpoint>,
    clients: Capped<Key, ServiceEndpoint>,
    client_gids: Capped<Key, Gid>,
    /// Callbacks added to an rclcpp subscription object before its `rclcpp_subscription_init`
    /// (rclcpp's intra-process subscriptions trace them in that order).
    pending_callbacks: Capped<Key, Vec<u64>>,
    /// Processes whose `rcl_init` the trace holds (their entities' creation was traced).
    inited: Capped<i64, ()>,
    /// Processes whose `rcl_publisher_init` declared a `/rosout` publisher.
    rosout: Capped<i64, ()>,
    stats: EntityStats,
}

impl Default for EntityTable {
    fn default() -> Self {
        EntityTable::new(EntityLimits::default())
    }
}

impl EntityTable {
    pub fn new(l: EntityLimits) -> EntityTable {
        EntityTable {
            nodes: Capped::new(l.nodes),
            gids: Capped::new(l.endpoints),
            publishers: Capped::new(l.endpoints),
            subscriptions: Capped::new(l.endpoints),
            publisher_by_rmw: Capped::new(l.endpoints),
            subscription_by_rmw: Capped::new(l.endpoints),
            rclcpp_subscription: Capped::new(l.endpoints),
            callbacks: Capped::new(l.callbacks),
            symbols: Capped::new(l.callbacks),
            rmw_publishers: Capped::new(l.endpoints),
            rmw_subscriptions: Capped::new(l.endpoints),
            timers: Capped::new(l.callbacks),
            services: Capped::new(l.endpoints),
            clients: Capped::new(l.endpoints),
            client_gids: Capped::new(l.endpoints),
            pending_callbacks: Capped::new(l.callbacks),
            inited: Capped::new(l.nodes),
            rosout: Capped::new(l.nodes),
            stats: EntityStats::default(),
        }
    }

    pub fn stats(&self) -> &EntityStats {
        &self.stats
    }

    fn count(&mut self, r: (bool, bool), evicted: fn(&mut EntityStats) -> &mut u64) {
        if r.0 {
            self.stats.replaced += 1;
        }
        if r.1 {
            *evicted(&mut self.stats) += 1;
        }
    }

    /// Learns from an init event; returns whether the record was one.
    pub fn observe(&mut self, rec: &Record) -> bool {
        let pid = match rec.context.vpid {
            Some(p) => p,
            None => {
                if is_init(&rec.event) {
                    self.stats.without_vpid += 1;
                }
                -1
            }
        };
        match &rec.event {
            Ros2Event::RclNodeInit { node_handle, node_name, namespace, .. } => {
                let n = Node { vpid: pid, node_handle: *node_handle, name: node_name.clone(), namespace: namespace.clone() };
                let r = self.nodes.insert((pid, *node_handle), n);
                self.count(r, |s| &mut s.nodes_evicted);
            }
            Ros2Event::RclInit { .. } => {
                self.inited.insert(pid, ());
            }
            Ros2Event::RmwPublisherInit { rmw_publisher_handle: h, gid } => {
                let r = self.gids.insert((pid, *h), *gid);
                self.count(r, |s| &mut s.gids_evicted);
                let r = self.rmw_publishers.insert((pid, *h), *gid);
                self.count(r, |s| &mut s.gids_evicted);
            }
            Ros2Event::RmwSubscriptionInit { rmw_subscription_handle: h, gid } => {
                let r = self.gids.insert((pid, *h), *gid);
                self.count(r, |s| &mut s.gids_evicted);
                let r = self.rmw_subscriptions.insert((pid, *h), *gid);
                self.count(r, |s| &mut s.gids_evicted);
            }
            Ros2Event::RmwClientInit { rmw_client_handle, gid } => {
                let r = self.client_gids.insert((pid, *rmw_client_handle), *gid);
                self.count(r, |s| &mut s.gids_evicted);
            }
            Ros2Event::RclServiceInit { service_handle, node_handle, rmw_service_handle, service_name } => {
                let e = ServiceEndpoint {
                    handle: *service_handle,
                    rmw_handle: *rmw_service_handle,
                    node_handle: *node_handle,
                    service_name: service_name.clone(),
                    gid: None,
                };
                let r = self.services.insert((pid, *service_handle), e);
                self.count(r, |s| &mut s.endpoints_evicted);
            }
            Ros2Event::RclClientInit { client_handle, node_handle, rmw_client_handle, service_name } => {
                let gid = self.client_gids.get(&(pid, *rmw_client_handle)).copied();
                let e = ServiceEndpoint {
                    handle: *client_handle,
                    rmw_handle: *rmw_client_handle,
                    node_handle: *node_handle,
                    service_name: service_name.clone(),
                    gid,
                };
                let r = self.clients.insert((pid, *client_handle), e);
                self.count(r, |s| &mut s.endpoints_evicted);
            }
            Ros2Event::RclcppServiceCallbackAdded { service_handle, callback } => {
                let r = self.callbacks.insert((pid, *callback), CallbackOwner::Service(*service_handle));
                self.count(r, |s| &mut s.callbacks_evicted);
            }
            Ros2Event::RclTimerInit { timer_handle, period } => {
                let r = self.timers.insert((pid, *timer_handle), Timer { period: *period, node_handle: None });
                self.count(r, |s| &mut s.callbacks_evicted);
            }
            Ros2Event::RclcppTimerLinkNode { timer_handle, node_handle } => {
                let period = self.timers.get(&(pid, *timer_handle)).map(|t| t.period).unwrap_or(0);
                let r = self.timers.insert((pid, *timer_handle), Timer { period, node_handle: Some(*node_handle) });
                self.count(r, |s| &mut s.callbacks_evicted);
            }
            Ros2Event::RclPublisherInit { publisher_handle, node_handle, rmw_publisher_handle, topic_name, queue_depth } => {
                let gid = self.gids.remove(&(pid, *rmw_publisher_handle));
                if gid.is_none() {
                    self.stats.endpoints_without_gid += 1;
                }
                let e = Endpoint {
                    kind: EndpointKind::Publisher,
                    vpid: pid,
                    handle: *publisher_handle,
                    rmw_handle: *rmw_publisher_handle,
                    node_handle: *node_handle,
                    topic_name: topic_name.clone(),
                    queue_depth: *queue_depth,
                    gid,
                };
                if topic_name == "/rosout" {
                    self.rosout.insert(pid, ());
                }
                let r = self.publishers.insert((pid, *publisher_handle), e);
                self.count(r, |s| &mut s.endpoints_evicted);
                let r = self.publisher_by_rmw.insert((pid, *rmw_publisher_handle), *publisher_handle);
                self.count(r, |s| &mut s.endpoints_evicted);
            }
            Ros2Event::RclSubscriptionInit {
                subscription_handle,
                node_handle,
                rmw_subscription_handle,
                topic_name,
                queue_depth,
            } => {
                let gid = self.gids.remove(&(pid, *rmw_subscription_handle));
                if gid.is_none() {
                    self.stats.endpoints_without_gid += 1;
                }
                let e = Endpoint {
                    kind: EndpointKind::Subscription,
                    vpid: pid,
                    handle: *subscription_handle,
                    rmw_handle: *rmw_subscription_handle,
                    node_handle: *node_handle,
                    topic_name: topic_name.clone(),
                    queue_depth: *queue_depth,
                    gid,
                };
                let r = self.subscriptions.insert((pid, *subscription_handle), e);
                self.count(r, |s| &mut s.endpoints_evicted);
                let r = self.subscription_by_rmw.insert((pid, *rmw_subscription_handle), *subscription_handle);
                self.count(r, |s| &mut s.endpoints_evicted);
            }
            Ros2Event::RclcppSubscriptionInit { subscription_handle, subscription } => {
                let r = self.rclcpp_subscription.insert((pid, *subscription), *subscription_handle);
                self.count(r, |s| &mut s.endpoints_evicted);
                for cb in self.pending_callbacks.remove(&(pid, *subscription)).unwrap_or_default() {
                    let r = self.callbacks.insert((pid, cb), CallbackOwner::Subscription(*subscription_handle));
                    self.count(r, |s| &mut s.callbacks_evicted);
                }
            }
            Ros2Event::RclcppSubscriptionCallbackAdded { subscription, callback } => {
                if let Some(&rcl) = self.rclcpp_subscription.get(&(pid, *subscription)) {
                    let r = self.callbacks.insert((pid, *callback), CallbackOwner::Subscription(rcl));
                    self.count(r, |s| &mut s.callbacks_evicted);
                } else {
                    // The subscription object is declared later (intra-process subscriptions).
                    let mut v = self.pending_callbacks.remove(&(pid, *subscription)).unwrap_or_default();
                    if v.len() < 16 {
                        v.push(*callback);
                    }
                    let r = self.pending_callbacks.insert((pid, *subscription), v);
                    self.count(r, |s| &mut s.callbacks_evicted);
                }
            }
            Ros2Event::RclcppTimerCallbackAdded { timer_handle, callback } => {
                let r = self.callbacks.insert((pid, *callback), CallbackOwner::Timer(*timer_handle));
                self.count(r, |s| &mut s.callbacks_evicted);
            }
            Ros2Event::RclcppCallbackRegister { callback, symbol } => {
                let r = self.symbols.insert((pid, *callback), symbol.clone());
                self.count(r, |s| &mut s.callbacks_evicted);
            }
            _ => return is_init(&rec.event),
        }
        true
    }

    pub fn node(&self, vpid: i64, node_handle: u64) -> Option<&Node> {
        self.nodes.get(&(vpid, node_handle))
    }
    pub fn publisher(&self, vpid: i64, publisher_handle: u64) -> Option<&Endpoint> {
        self.publishers.get(&(vpid, publisher_handle))
    }
    pub fn publisher_by_rmw(&self, vpid: i64, rmw_publisher_handle: u64) -> Option<&Endpoint> {
        let h = self.publisher_by_rmw.get(&(vpid, rmw_publisher_handle))?;
        self.publishers.get(&(vpid, *h))
    }
    pub fn subscription(&self, vpid: i64, subscription_handle: u64) -> Option<&Endpoint> {
        self.subscriptions.get(&(vpid, subscription_handle))
    }
    pub fn subscription_by_rmw(&self, vpid: i64, rmw_subscription_handle: u64) -> Option<&Endpoint> {
        let h = self.subscription_by_rmw.get(&(vpid, rmw_subscription_handle))?;
        self.subscriptions.get(&(vpid, *h))
    }
    pub fn callback_owner(&self, vpid: i64, callback: u64) -> Option<CallbackOwner> {
        self.callbacks.get(&(vpid, callback)).copied()
    }
    pub fn callback_symbol(&self, vpid: i64, callback: u64) -> Option<&str> {
        self.symbols.get(&(vpid, callback)).map(String::as_str)
    }
    /// The gid of an rmw publisher that no `rcl_publisher_init` named: an
    /// rmw-internal writer (rmw_fastrtps's `ros_discovery_info` writer).
    pub fn rmw_only_publisher(&self, vpid: i64, rmw_handle: u64) -> Option<Gid> {
        if self.publisher_by_rmw.get(&(vpid, rmw_handle)).is_some() {
            return None;
        }
        self.rmw_publishers.get(&(vpid, rmw_handle)).copied()
    }
    /// The gid of an rmw subscription that no `rcl_subscription_init` named (rmw-internal reader).
    pub fn rmw_only_subscription(&self, vpid: i64, rmw_handle: u64) -> Option<Gid> {
        if self.subscription_by_rmw.get(&(vpid, rmw_handle)).is_some() {
            return None;
        }
        self.rmw_subscriptions.get(&(vpid, rmw_handle)).copied()
    }
    /// The subscription (rcl handle) behind an rclcpp subscription object.
    pub fn rclcpp_subscription(&self, vpid: i64, subscription: u64) -> Option<u64> {
        self.rclcpp_subscription.get(&(vpid, subscription)).copied()
    }
    pub fn timer(&self, vpid: i64, timer_handle: u64) -> Option<Timer> {
        self.timers.get(&(vpid, timer_handle)).copied()
    }
    pub fn service(&self, vpid: i64, service_handle: u64) -> Option<&ServiceEndpoint> {
        self.services.get(&(vpid, service_handle))
    }
    pub fn client(&self, vpid: i64, client_handle: u64) -> Option<&ServiceEndpoint> {
        self.clients.get(&(vpid, client_handle))
    }
    /// Whether the trace holds `rcl_init` of process `vpid` (so its entities' creation was traced).
    pub fn process_inited(&self, vpid: i64) -> bool {
        self.inited.get(&vpid).is_some()
    }
    /// Whether process `vpid` declared a `/rosout` publisher.
    pub fn declares_rosout(&self, vpid: i64) -> bool {
        self.rosout.get(&vpid).is_some()
    }

    /// Numbers of nodes, publishers, subscriptions and callbacks held.
    pub fn sizes(&self) -> (usize, usize, usize, usize) {
        (self.nodes.len(), self.publishers.len(), self.subscriptions.len(), self.callbacks.len())
    }
}

fn is_init(e: &Ros2Event) -> bool {
    matches!(
        e,
        Ros2Event::RclInit { .. }
            | Ros2Event::RclNodeInit { .. }
            | Ros2Event::RmwPublisherInit { .. }
            | Ros2Event::RclPublisherInit { .. }
            | Ros2Event::RmwSubscriptionInit { .. }
            | Ros2Event::RclSubscriptionInit { .. }
            | Ros2Event::RclcppSubscriptionInit { .. }
            | Ros2Event::RclcppSubscriptionCallbackAdded { .. }
            | Ros2Event::RclTimerInit { .. }
            | Ros2Event::RclcppTimerCallbackAdded { .. }
            | Ros2Event::RclcppTimerLinkNode { .. }
            | Ros2Event::RclcppCallbackRegister { .. }
            | Ros2Event::RclServiceInit { .. }
            | Ros2Event::RclcppServiceCallbackAdded { .. }
            | Ros2Event::RclClientInit { .. }
            | Ros2Event::RmwClientInit { .. }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{EventContext, EventTime};

    fn rec(pid: i64, event: Ros2Event) -> Record {
        Record { event, time: EventTime::default(), context: EventContext { vpid: Some(pid), ..Default::default() } }
    }

    #[test]
    fn resolves_publisher_gid_topic_and_callbacks() {
        let mut t = EntityTable::default();
        let gid = Gid([7; 24]);
        t.observe(&rec(1, Ros2Event::RmwPublisherInit { rmw_publisher_handle: 0x20, gid }));
        t.observe(&rec(1, Ros2Event::RclPublisherInit {
            publisher_handle: 0x10,
            node_handle: 0x1,
            rmw_publisher_handle: 0x20,
            topic_name: "/a".into(),
            queue_depth: 10,
        }));
        t.observe(&rec(1, Ros2Event::RclcppSubscriptionInit { subscription_handle: 0x30, subscription: 0x31 }));
        t.observe(&rec(1, Ros2Event::RclcppSubscriptionCallbackAdded { subscription: 0x31, callback: 0x40 }));
        let p = t.publisher_by_rmw(1, 0x20).expect("publisher");
        assert_eq!((p.topic_name.as_str(), p.gid), ("/a", Some(gid)));
        assert!(t.publisher_by_rmw(2, 0x20).is_none(), "handles are per process");
        assert_eq!(t.callback_owner(1, 0x40), Some(CallbackOwner::Subscription(0x30)));
        assert_eq!(t.stats().endpoints_without_gid, 0);
    }

    #[test]
    fn tables_are_capped_and_count_evictions() {
        let mut t = EntityTable::new(EntityLimits { nodes: 2, endpoints: 2, callbacks: 2 });
        for h in 0..5u64 {
            t.observe(&rec(1, Ros2Event::RclNodeInit {
                node_handle: h,
                rmw_handle: 0,
                node_name: format!("n{h}"),
                namespace: "/".into(),
            }));
        }
        assert_eq!(t.sizes().0, 2);
        assert_eq!(t.stats().nodes_evicted, 3);
        assert!(t.node(1, 0).is_none() && t.node(1, 4).is_some(), "oldest evicted first");
        t.observe(&rec(1, Ros2Event::RclNodeInit { node_handle: 4, rmw_handle: 0, node_name: "x".into(), namespace: "/".into() }));
        assert_eq!(t.stats().replaced, 1);
        assert_eq!(t.node(1, 4).map(|n| n.name.as_str()), Some("x"));
    }
}
