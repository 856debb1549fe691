//! The one table type for state keyed by something on the wire (GUIDs,
//! topics, samples, destinations, fragment sets): a hash map whose entries
//! are also kept in recency order, so that the table can be capped in
//! entries and, optionally, in weight (bytes), evicting the least recently
//! touched entry first — in O(1) — and counting every eviction.
//!
//! "Touched" is up to the owner: an entry moves to the most-recent end when
//! it is inserted or when the owner calls [`BoundedMap::touch`] /
//! [`BoundedMap::get_touch`]; plain [`get`](BoundedMap::get) and
//! [`get_mut`](BoundedMap::get_mut) leave the order alone. Tables that
//! expire entries by age (the sample tracker, discovery reassembly) touch on
//! activity, so the least recent entry is also the oldest and expiry only
//! looks at the front.
//!
//! Why not the `lru` or `hashlink` crates: both allocate one heap node per
//! entry and neither has a weight budget or an eviction counter; here the
//! entries live in one slab (`Vec`) linked by 32-bit indices, and the hash
//! index is a `hashbrown::HashTable` of slot numbers (4 bytes per entry, the
//! key stored once, each key hashed once per operation). The table never
//! allocates once it is full.

use hashbrown::HashTable;
use std::hash::{BuildHasher, Hash};

const NIL: u32 = u32::MAX;

struct Node<K, V> {
    key: K,
    value: V,
    hash: u64,
    weight: usize,
    /// Towards the least recent end.
    prev: u32,
    /// Towards the most recent end.
    next: u32,
}

/// A hash map capped in entries (and optionally in total weight) that evicts
/// its least recently touched entry first. See the module documentation.
pub struct BoundedMap<K, V, S = rustc_hash::FxBuildHasher> {
    hasher: S,
    /// Slot numbers, found by the hash of the slot's key.
    index: HashTable<u32>,
    slots: Vec<Option<Node<K, V>>>,
    free: Vec<u32>,
    /// Least recently touched.
    head: u32,
    /// Most recently touched.
    tail: u32,
    max_entries: usize,
    max_weight: usize,
    weight: usize,
    evicted: u64,
}

impl<K: Hash + Eq, V> BoundedMap<K, V> {
    /// A table of at most `max_entries` entries (at least one).
    pub fn new(max_entries: usize) -> Self {
        Self::with_hasher(max_entries, Default::default())
    }
}

impl<K: Hash + Eq, V, S: BuildHasher + Default> Default for BoundedMap<K, V, S> {
    /// An effectively unbounded table (`usize::MAX` entries): for owners that
    /// set the cap later with [`set_max_entries`](Self::set_max_entries).
    fn default() -> Self {
        Self::with_hasher(usize::MAX, S::default())
    }
}

impl<K: Hash + Eq, V, S: BuildHasher> BoundedMap<K, V, S> {
    pub fn with_hasher(max_entries: usize, hasher: S) -> Self {
        BoundedMap {
            hasher,
            index: HashTable::new(),
            slots: Vec::new(),
            free: Vec::new(),
            head: NIL,
            tail: NIL,
            max_entries: max_entries.clamp(1, NIL as usize - 1),
            max_weight: usize::MAX,
            weight: 0,
            evicted: 0,
        }
    }

    /// Also caps the sum of the entries' weights (see [`set_weight`](Self::set_weight)).
    pub fn with_max_weight(mut self, max_weight: usize) -> Self {
        self.max_weight = max_weight;
        self
    }

    /// Reserves room for `n` entries up front (tables on the hot path that
    /// should never rehash while they fill).
    /// (`n` may exceed the cap: a hash index with room to spare rehashes in
    /// place under insert/remove churn; the slab never exceeds the cap.)
    pub fn with_capacity(mut self, n: usize) -> Self {
        let slots = &self.slots;
        self.index.reserve(n, |&i| slots[i as usize].as_ref().map_or(0, |n| n.hash));
        self.slots.reserve(n.min(self.max_entries));
        self
    }

    /// Changes the entry cap; entries over it are evicted (and counted) at the next insertion.
    pub fn set_max_entries(&mut self, max_entries: usize) {
        self.max_entries = max_entries.clamp(1, NIL as usize - 1);
    }

    pub fn max_entries(&self) -> usize {
        self.max_entries
    }

    pub fn max_weight(&self) -> usize {
        self.max_weight
    }

    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Sum of the entries' weights.
    pub fn weight(&self) -> usize {
        self.weight
    }

    /// Entries the table evicted to stay within its caps (not those removed by the owner).
    pub fn evicted(&self) -> u64 {
        self.evicted
    }

    pub fn contains_key(&self, k: &K) -> bool {
        self.find(k).is_some()
    }

    fn hash(&self, k: &K) -> u64 {
        self.hasher.hash_one(k)
    }

    fn find_hashed(&self, hash: u64, k: &K) -> Option<u32> {
        let slots = &self.slots;
        self.index.find(hash, |&i| slots[i as usize].as_ref().is_some_and(|n| n.key == *k)).copied()
    }

    fn find(&self, k: &K) -> Option<u32> {
        self.find_hashed(self.hash(k), k)
    }

    fn node(&self, i: u32) -> &Node<K, V> {
        self.slots[i as usize].as_ref().expect("linked slot is occupied")
    }

    fn node_mut(&mut self, i: u32) -> &mut Node<K, V> {
        self.slots[i as usize].as_mut().expect("linked slot is occupied")
    }

    fn unlink(&mut self, i: u32) {
        let (prev, next) = {
            let n = self.node(i);
            (n.prev, n.next)
        };
        if prev == NIL {
            self.head = next;
        } else {
            self.node_mut(prev).next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.node_mut(next).prev = prev;
        }
    }

    fn link_back(&mut self, i: u32) {
        let tail = self.tail;
        {
            let n = self.node_mut(i);
            n.prev = tail;
            n.next = NIL;
        }
        if tail == NIL {
            self.head = i;
        } else {
            self.node_mut(tail).next = i;
        }
        self.tail = i;
    }

    fn move_to_back(&mut self, i: u32) {
        if self.tail != i {
            self.unlink(i);
            self.link_back(i);
        }
    }

    /// Unlinks slot `i` and drops it from the index.
    fn take(&mut self, i: u32) -> (K, V) {
        self.unlink(i);
        let n = self.slots[i as usize].take().expect("linked slot is occupied");
        self.free.push(i);
        if let Ok(e) = self.index.find_entry(n.hash, |&j| j == i) {
            e.remove();
        }
        self.weight -= n.weight;
        (n.key, n.value)
    }

    /// The value, without changing the recency order.
    pub fn get(&self, k: &K) -> Option<&V> {
        self.find(k).map(|i| &self.node(i).value)
    }

    /// The value, without changing the recency order.
    pub fn get_mut(&mut self, k: &K) -> Option<&mut V> {
        let i = self.find(k)?;
        Some(&mut self.node_mut(i).value)
    }

    /// Marks the entry as just seen; false if absent.
    pub fn touch(&mut self, k: &K) -> bool {
        match self.find(k) {
            Some(i) => {
                self.move_to_back(i);
                true
            }
            None => false,
        }
    }

    /// The value, marked as just seen.
    pub fn get_touch(&mut self, k: &K) -> Option<&mut V> {
        let i = self.find(k)?;
        self.move_to_back(i);
        Some(&mut self.node_mut(i).value)
    }

    /// Marks the entry at `slot` (see [`slot`](Self::slot)) as just seen.
    pub fn touch_at(&mut self, slot: u32) {
        if matches!(self.slots.get(slot as usize), Some(Some(_))) {
            self.move_to_back(slot);
        }
    }

    /// Where the entry lives: a handle for [`at_mut`](Self::at_mut), valid
    /// until the entry is removed or evicted (a cache for hot paths).
    pub fn slot(&self, k: &K) -> Option<u32> {
        self.find(k)
    }

    /// The entry at `slot` if it still holds key `k` (no change of order).
    pub fn at_mut(&mut self, slot: u32, k: &K) -> Option<&mut V> {
        match self.slots.get_mut(slot as usize) {
            Some(Some(n)) if n.key == *k => Some(&mut n.value),
            _ => None,
        }
    }

    /// Evicts least-recent entries (never `keep`) until `extra` more entries
    /// and the current weight fit the caps.
    fn make_room(&mut self, extra: usize, keep: u32, on_evict: &mut dyn FnMut(K, V)) {
        while self.head != NIL && (self.index.len() + extra > self.max_entries || self.weight > self.max_weight) {
            let victim = if self.head == keep { self.node(keep).next } else { self.head };
            if victim == NIL {
                break;
            }
            let (k, v) = self.take(victim);
            self.evicted += 1;
            on_evict(k, v);
        }
    }

    /// The entry for `k`, created by `make` if absent (evicting the least
    /// recent entries as needed, each passed to `on_evict`); marked as just seen.
    pub fn get_or_insert_with(&mut self, k: K, make: impl FnOnce() -> V, on_evict: &mut dyn FnMut(K, V)) -> &mut V {
        let i = self.get_or_insert_slot(k, make, on_evict);
        &mut self.node_mut(i).value
    }

    /// Like [`get_or_insert_with`](Self::get_or_insert_with), returning the
    /// entry's slot (for [`value_at`](Self::value_at) and the other `_at` methods).
    pub fn get_or_insert_slot(&mut self, k: K, make: impl FnOnce() -> V, on_evict: &mut dyn FnMut(K, V)) -> u32 {
        self.slot_or_insert(k, make, on_evict, true)
    }

    /// The entry for `k`, created by `make` if absent, *without* marking an
    /// existing entry as seen: for tables kept in insertion order (expiry by
    /// age of the first sighting), where a new entry goes to the recent end
    /// and an old one keeps its place.
    pub fn get_or_insert_keep_order(&mut self, k: K, make: impl FnOnce() -> V, on_evict: &mut dyn FnMut(K, V)) -> u32 {
        self.slot_or_insert(k, make, on_evict, false)
    }

    fn slot_or_insert(&mut self, k: K, make: impl FnOnce() -> V, on_evict: &mut dyn FnMut(K, V), touch: bool) -> u32 {
        let hash = self.hash(&k);
        if let Some(i) = self.find_hashed(hash, &k) {
            if touch {
                self.move_to_back(i);
            }
            return i;
        }
        self.make_room(1, NIL, on_evict);
        let node = Node { key: k, value: make(), hash, weight: 0, prev: NIL, next: NIL };
        let i = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = Some(node);
                i
            }
            None => {
                self.slots.push(Some(node));
                (self.slots.len() - 1) as u32
            }
        };
        let slots = &self.slots;
        self.index.insert_unique(hash, i, |&j| slots[j as usize].as_ref().map_or(0, |n| n.hash));
        self.link_back(i);
        i
    }

    /// The value in `slot`, if the slot holds an entry (no change of order).
    /// Only for a slot just returned by this table: a stale slot may hold another key.
    pub fn value_at(&mut self, slot: u32) -> Option<&mut V> {
        match self.slots.get_mut(slot as usize) {
            Some(Some(n)) => Some(&mut n.value),
            _ => None,
        }
    }

    /// Removes the entry in `slot` (not counted as an eviction).
    pub fn remove_at(&mut self, slot: u32) -> Option<(K, V)> {
        matches!(self.slots.get(slot as usize), Some(Some(_))).then(|| self.take(slot))
    }

    /// [`set_weight`](Self::set_weight) for the entry in `slot`.
    pub fn set_weight_at(&mut self, slot: u32, weight: usize, on_evict: &mut dyn FnMut(K, V)) {
        let Some(Some(n)) = self.slots.get_mut(slot as usize) else { return };
        let old = std::mem::replace(&mut n.weight, weight);
        self.weight = self.weight - old + weight;
        if self.weight > self.max_weight {
            self.make_room(0, slot, on_evict);
        }
    }

    /// Inserts or replaces the value of `k` (marked as just seen); evicted entries go to `on_evict`.
    pub fn insert(&mut self, k: K, v: V, on_evict: &mut dyn FnMut(K, V)) -> &mut V {
        let mut v = Some(v);
        let slot = self.get_or_insert_with(k, || v.take().expect("value"), on_evict);
        if let Some(v) = v {
            *slot = v;
        }
        slot
    }

    /// Sets the weight of `k` (e.g. the bytes it holds) and evicts other
    /// least-recent entries while the total is over the weight cap. The entry
    /// itself is never evicted here: an entry heavier than the whole cap
    /// stays alone. Returns false if `k` is absent.
    pub fn set_weight(&mut self, k: &K, weight: usize, on_evict: &mut dyn FnMut(K, V)) -> bool {
        let Some(i) = self.find(k) else { return false };
        self.set_weight_at(i, weight, on_evict);
        true
    }

    /// Whether `extra` more weight would fit without evicting anything.
    pub fn fits(&self, extra: usize) -> bool {
        self.weight.saturating_add(extra) <= self.max_weight
    }

    pub fn remove(&mut self, k: &K) -> Option<V> {
        let hash = self.hash(k);
        let slots = &self.slots;
        let e = self.index.find_entry(hash, |&i| slots[i as usize].as_ref().is_some_and(|n| n.key == *k)).ok()?;
        let (i, _) = e.remove();
        self.unlink(i);
        let n = self.slots[i as usize].take().expect("indexed slot is occupied");
        self.free.push(i);
        self.weight -= n.weight;
        Some(n.value)
    }

    /// The least recently touched entry.
    pub fn peek_lru(&self) -> Option<(&K, &V)> {
        (self.head != NIL).then(|| {
            let n = self.node(self.head);
            (&n.key, &n.value)
        })
    }

    /// Removes the least recently touched entry (not counted as an eviction:
    /// the owner decides why it goes).
    pub fn pop_lru(&mut self) -> Option<(K, V)> {
        (self.head != NIL).then(|| self.take(self.head))
    }

    /// Like [`pop_lru`](Self::pop_lru), counted as an eviction.
    pub fn evict_lru(&mut self) -> Option<(K, V)> {
        let e = self.pop_lru();
        if e.is_some() {
            self.evicted += 1;
        }
        e
    }

    /// Entries in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.slots.iter().flatten().map(|n| (&n.key, &n.value))
    }

    /// Entries in no particular order.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&K, &mut V)> {
        self.slots.iter_mut().flatten().map(|n| (&n.key, &mut n.value))
    }

    pub fn keys(&self) -> impl Iterator<Item = &K> {
        self.iter().map(|(k, _)| k)
    }

    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.iter().map(|(_, v)| v)
    }

    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.iter_mut().map(|(_, v)| v)
    }

    /// Entries from least to most recently touched.
    pub fn iter_lru(&self) -> impl Iterator<Item = (&K, &V)> {
        let mut i = self.head;
        std::iter::from_fn(move || {
            (i != NIL).then(|| {
                let n = self.node(i);
                i = n.next;
                (&n.key, &n.value)
            })
        })
    }

    /// Removes every entry, least recent first (not counted as evictions).
    pub fn drain_lru(&mut self) -> Vec<(K, V)> {
        let mut out = Vec::with_capacity(self.len());
        while let Some(e) = self.pop_lru() {
            out.push(e);
        }
        out
    }

    /// Removes every entry (not counted as evictions); keeps the eviction count.
    pub fn clear(&mut self) {
        self.index.clear();
        self.slots.clear();
        self.free.clear();
        self.head = NIL;
        self.tail = NIL;
        self.weight = 0;
    }
}

impl<K: Hash + Eq, V, S: BuildHasher> std::ops::Index<&K> for BoundedMap<K, V, S> {
    type Output = V;
    /// The value of `k` (no change of order); panics if absent, like `HashMap`'s index.
    fn index(&self, k: &K) -> &V {
        self.get(k).expect("key present in BoundedMap")
    }
}

impl<K: Hash + Eq, V, S: BuildHasher> std::fmt::Debug for BoundedMap<K, V, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoundedMap")
            .field("len", &self.len())
            .field("max_entries", &self.max_entries)
            .field("weight", &self.weight)
            .field("evicted", &self.evicted)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn none<K, V>() -> impl FnMut(K, V) {
        |_, _| {}
    }

    #[test]
    fn evicts_least_recently_touched_and_counts() {
        let mut m: BoundedMap<u32, &str> = BoundedMap::new(2);
        m.insert(1, "a", &mut none());
        m.insert(2, "b", &mut none());
        m.touch(&1);
        let mut gone = vec![];
        m.insert(3, "c", &mut |k, v| gone.push((k, v)));
        assert_eq!(gone, vec![(2, "b")]);
        assert_eq!(m.evicted(), 1);
        assert_eq!(m.iter_lru().map(|(k, _)| *k).collect::<Vec<_>>(), vec![1, 3]);
        // get_mut does not reorder; get_touch does.
        *m.get_mut(&1).unwrap() = "A";
        assert_eq!(m.peek_lru(), Some((&1, &"A")));
        m.get_touch(&1);
        assert_eq!(m.peek_lru(), Some((&3, &"c")));
        assert_eq!(m.remove(&3), Some("c"));
        assert_eq!(m.evicted(), 1, "removal by the owner is not an eviction");
    }

    #[test]
    fn weight_cap_evicts_others_first() {
        let mut m: BoundedMap<u32, ()> = BoundedMap::new(100).with_max_weight(10);
        for k in 0..3 {
            m.insert(k, (), &mut none());
            m.set_weight(&k, 4, &mut none());
        }
        // 12 > 10: the least recent (0) went.
        assert_eq!(m.len(), 2);
        assert!(!m.contains_key(&0));
        assert_eq!(m.weight(), 8);
        // One entry heavier than the cap stays alone.
        m.set_weight(&2, 50, &mut none());
        assert_eq!(m.keys().copied().collect::<Vec<_>>(), vec![2]);
        assert_eq!(m.weight(), 50);
        assert_eq!(m.evicted(), 2);
    }

    #[test]
    fn keep_order_inserts_at_the_back_but_does_not_move() {
        let mut m: BoundedMap<u32, u32> = BoundedMap::new(10);
        for k in 0..3 {
            m.get_or_insert_keep_order(k, || k, &mut none());
        }
        let s = m.get_or_insert_keep_order(0, || 99, &mut none());
        assert_eq!(m.value_at(s).copied(), Some(0));
        assert_eq!(m.iter_lru().map(|(k, _)| *k).collect::<Vec<_>>(), vec![0, 1, 2]);
        m.get_or_insert_slot(0, || 99, &mut none());
        assert_eq!(m.iter_lru().map(|(k, _)| *k).collect::<Vec<_>>(), vec![1, 2, 0]);
    }

    #[test]
    fn slot_handles_detect_reuse() {
        let mut m: BoundedMap<u32, u32> = BoundedMap::new(1);
        m.insert(1, 10, &mut none());
        let s = m.slot(&1).unwrap();
        m.insert(2, 20, &mut none()); // evicts 1, reuses its slot
        assert_eq!(m.at_mut(s, &1), None);
        assert_eq!(m.at_mut(s, &2).copied(), Some(20));
    }

    proptest! {
        /// Against a naive model: a Vec in recency order.
        #[test]
        fn matches_a_naive_lru(ops in proptest::collection::vec((0u8..4, 0u16..40), 1..400), cap in 1usize..12) {
            let mut m: BoundedMap<u16, u16> = BoundedMap::new(cap);
            let mut model: Vec<(u16, u16)> = vec![];
            let mut evicted = 0u64;
            for (op, k) in ops {
                match op {
                    0 => {
                        let mut gone = vec![];
                        m.insert(k, k * 2, &mut |a, b| gone.push((a, b)));
                        if let Some(p) = model.iter().position(|e| e.0 == k) {
                            model.remove(p);
                        } else if model.len() >= cap {
                            prop_assert_eq!(gone, vec![model.remove(0)]);
                            evicted += 1;
                        }
                        model.push((k, k * 2));
                    }
                    1 => {
                        let hit = m.touch(&k);
                        let p = model.iter().position(|e| e.0 == k);
                        prop_assert_eq!(hit, p.is_some());
                        if let Some(p) = p {
                            let e = model.remove(p);
                            model.push(e);
                        }
                    }
                    2 => {
                        let p = model.iter().position(|e| e.0 == k).map(|p| model.remove(p).1);
                        prop_assert_eq!(m.remove(&k), p);
                    }
                    _ => {
                        prop_assert_eq!(m.pop_lru(), if model.is_empty() { None } else { Some(model.remove(0)) });
                    }
                }
                prop_assert_eq!(m.iter_lru().map(|(a, b)| (*a, *b)).collect::<Vec<_>>(), model.clone());
                prop_assert_eq!(m.evicted(), evicted);
                prop_assert!(m.len() <= cap);
            }
        }
    }
}
