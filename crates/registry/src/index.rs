//! A per-tenant, in-memory search index of agent embeddings, loaded from the database on first
//! use, kept current by this instance's writes, and marked stale by other instances' change
//! notices (bus channel `registry-changes`) or after `MAX_AGE`.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use steward_core::{AgentId, TenantId};

use crate::embedding::{Embedding, DIM};

/// An index older than this is reloaded on the next search (a safety net for lost notices).
pub const MAX_AGE: Duration = Duration::from_secs(60);

/// One tenant's vectors, stored flat for a cache-friendly scan.
#[derive(Clone, Default)]
pub struct TenantIndex {
    ids: Vec<AgentId>,
    positions: HashMap<AgentId, usize>,
    vectors: Vec<f32>,
    loaded: Option<Instant>,
}

impl TenantIndex {
    pub fn new(entries: impl IntoIterator<Item = (AgentId, Embedding)>) -> Self {
        let mut index = TenantIndex {
            loaded: Some(Instant::now()),
            ..Default::default()
        };
        for (id, e) in entries {
            index.upsert(id, &e);
        }
        index
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    fn position(&self, id: AgentId) -> Option<usize> {
        self.positions.get(&id).copied()
    }

    pub fn upsert(&mut self, id: AgentId, e: &Embedding) {
        match self.position(id) {
            Some(i) => self.vectors[i * DIM..(i + 1) * DIM].copy_from_slice(&e.0),
            None => {
                self.positions.insert(id, self.ids.len());
                self.ids.push(id);
                self.vectors.extend_from_slice(&e.0);
            }
        }
    }

    pub fn remove(&mut self, id: AgentId) {
        if let Some(i) = self.positions.remove(&id) {
            let last = self.ids.len() - 1;
            self.ids.swap(i, last);
            self.ids.pop();
            if i != last {
                self.positions.insert(self.ids[i], i);
            }
            if i != last {
                let (head, tail) = self.vectors.split_at_mut(last * DIM);
                head[i * DIM..(i + 1) * DIM].copy_from_slice(&tail[..DIM]);
            }
            self.vectors.truncate(last * DIM);
        }
    }

    /// The number of agents with similarity above zero, and the best `top` of them, best first
    /// (ties by id). Selection is partial: only the returned window is sorted.
    pub fn search(&self, query: &Embedding, top: usize) -> (usize, Vec<(AgentId, f32)>) {
        let q = &query.0;
        let mut hits: Vec<(AgentId, f32)> = self
            .vectors
            .chunks_exact(DIM)
            .zip(&self.ids)
            .filter_map(|(v, id)| {
                let s: f32 = v.iter().zip(q).map(|(a, b)| a * b).sum();
                (s > 1e-6).then_some((*id, s.min(1.0)))
            })
            .collect();
        let total = hits.len();
        let order =
            |a: &(AgentId, f32), b: &(AgentId, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        if top < hits.len() {
            if top > 0 {
                hits.select_nth_unstable_by(top - 1, order);
            }
            hits.truncate(top);
        }
        hits.sort_unstable_by(order);
        (total, hits)
    }

    fn fresh(&self) -> bool {
        self.loaded.is_some_and(|t| t.elapsed() < MAX_AGE)
    }
}

/// The indexes of every tenant this instance has searched.
#[derive(Clone, Default)]
pub struct SearchIndex {
    tenants: Arc<RwLock<HashMap<TenantId, Arc<RwLock<TenantIndex>>>>>,
}

impl SearchIndex {
    /// The tenant's index when loaded and fresh.
    pub fn get(&self, tenant: TenantId) -> Option<Arc<RwLock<TenantIndex>>> {
        let map = self.tenants.read().unwrap_or_else(|p| p.into_inner());
        let index = map.get(&tenant)?;
        let fresh = index.read().unwrap_or_else(|p| p.into_inner()).fresh();
        fresh.then(|| index.clone())
    }

    pub fn put(&self, tenant: TenantId, index: TenantIndex) -> Arc<RwLock<TenantIndex>> {
        let index = Arc::new(RwLock::new(index));
        self.tenants
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(tenant, index.clone());
        index
    }

    /// Applies a local change when the tenant's index is loaded.
    pub fn apply(&self, tenant: TenantId, id: AgentId, embedding: Option<&Embedding>) {
        let map = self.tenants.read().unwrap_or_else(|p| p.into_inner());
        if let Some(index) = map.get(&tenant) {
            let mut index = index.write().unwrap_or_else(|p| p.into_inner());
            match embedding {
                Some(e) => index.upsert(id, e),
                None => index.remove(id),
            }
        }
    }

    /// Drops a tenant's index (another instance changed its agents).
    pub fn invalidate(&self, tenant: TenantId) {
        self.tenants
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&tenant);
    }

    /// Drops every tenant's index (notices of other instances may have been missed).
    pub fn invalidate_all(&self) {
        self.tenants
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(text: &str) -> Embedding {
        Embedding::of_query(text)
    }

    #[test]
    fn upsert_remove_search() {
        let (a, b, c) = (AgentId::new(), AgentId::new(), AgentId::new());
        let mut idx = TenantIndex::new([
            (a, e("invoice parser")),
            (b, e("weather bot")),
            (c, e("invoice mail")),
        ]);
        let (total, hits) = idx.search(&e("invoice"), 10);
        assert_eq!(total, 2);
        assert_eq!(hits.len(), 2);
        assert_eq!(idx.search(&e("invoice"), 1).1.len(), 1);
        assert!(hits.iter().all(|(id, _)| *id != b));
        idx.remove(a);
        assert_eq!(idx.len(), 2);
        assert_eq!(
            idx.search(&e("invoice"), 10).1.first().map(|h| h.0),
            Some(c)
        );
        idx.upsert(b, &e("invoice weather"));
        assert_eq!(idx.search(&e("invoice"), 10).0, 2);
    }
}
