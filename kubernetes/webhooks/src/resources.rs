//! Reading the other objects of a namespace (Chains, Agents, MCPServers,
//! LLMProviders): what admission checks and the bridge's optional chain check
//! look at.
//!
//! [`KubeResources`] serves reads from watch caches (reflectors), so that an
//! Alert admission at Alertmanager rates costs no API request.
//! With the `testing` feature, `InMemoryResources` is the same contract for
//! tests.

use std::fmt::Debug;
use std::time::Duration;

use async_trait::async_trait;
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tarsy_crds::{Agent, Chain, LLMProvider, MCPServer};

/// Reading the namespace's objects failed; the caller cannot decide.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ReadError {
    /// The watch caches have not been filled yet.
    #[error("the {kind} cache is not ready yet (still listing from the API server)")]
    NotReady {
        /// Kind whose cache is not ready.
        kind: &'static str,
    },
    /// The objects could not be read.
    #[error("cannot read {kind} objects: {message}")]
    Unavailable {
        /// Kind being read.
        kind: &'static str,
        /// Why.
        message: String,
    },
}

/// Read access to the TARSy objects of a namespace.
#[async_trait]
pub trait ResourceReader: Send + Sync + 'static {
    /// Chains of `namespace`.
    async fn chains(&self, namespace: &str) -> Result<Vec<Chain>, ReadError>;
    /// Agents of `namespace`.
    async fn agents(&self, namespace: &str) -> Result<Vec<Agent>, ReadError>;
    /// MCPServers of `namespace`.
    async fn mcp_servers(&self, namespace: &str) -> Result<Vec<MCPServer>, ReadError>;
    /// LLMProviders of `namespace`.
    async fn llm_providers(&self, namespace: &str) -> Result<Vec<LLMProvider>, ReadError>;
}

#[cfg(feature = "testing")]
pub use in_memory::{AnyResource, InMemoryResources};

/// The in-memory reader (feature `testing`: tests and benchmarks only).
#[cfg(feature = "testing")]
mod in_memory {
    use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

    use async_trait::async_trait;
    use kube::Resource;
    use tarsy_crds::{Agent, Chain, LLMProvider, MCPServer};

    use super::{ReadError, ResourceReader};

    /// One object of any kind [`InMemoryResources`] holds.
    #[derive(Debug, Clone)]
    // Only ever a short-lived argument of `insert`; boxing would buy nothing.
    #[allow(clippy::large_enum_variant)]
    pub enum AnyResource {
        /// A Chain.
        Chain(Chain),
        /// An Agent.
        Agent(Agent),
        /// An MCPServer.
        McpServer(MCPServer),
        /// An LLMProvider.
        LlmProvider(LLMProvider),
    }

    impl From<Chain> for AnyResource {
        fn from(v: Chain) -> Self {
            Self::Chain(v)
        }
    }
    impl From<Agent> for AnyResource {
        fn from(v: Agent) -> Self {
            Self::Agent(v)
        }
    }
    impl From<MCPServer> for AnyResource {
        fn from(v: MCPServer) -> Self {
            Self::McpServer(v)
        }
    }
    impl From<LLMProvider> for AnyResource {
        fn from(v: LLMProvider) -> Self {
            Self::LlmProvider(v)
        }
    }

    #[derive(Default)]
    struct Objects {
        chains: Vec<Chain>,
        agents: Vec<Agent>,
        mcp_servers: Vec<MCPServer>,
        llm_providers: Vec<LLMProvider>,
        unavailable: bool,
    }

    /// In-memory [`ResourceReader`] for tests. Objects are keyed
    /// by namespace and name; inserting an existing key replaces it.
    #[derive(Default, Clone)]
    pub struct InMemoryResources {
        inner: Arc<Mutex<Objects>>,
    }

    fn upsert<K: Resource>(list: &mut Vec<K>, obj: K) {
        let key = (obj.meta().namespace.clone(), obj.meta().name.clone());
        list.retain(|o| (o.meta().namespace.clone(), o.meta().name.clone()) != key);
        list.push(obj);
    }

    fn in_namespace<K: Resource + Clone>(list: &[K], namespace: &str) -> Vec<K> {
        list.iter()
            .filter(|o| o.meta().namespace.as_deref() == Some(namespace))
            .cloned()
            .collect()
    }

    impl InMemoryResources {
        /// An empty set.
        pub fn new() -> Self {
            Self::default()
        }

        fn lock(&self) -> MutexGuard<'_, Objects> {
            self.inner.lock().unwrap_or_else(PoisonError::into_inner)
        }

        /// Adds or replaces an object (its `metadata.namespace` must be set to be found).
        pub fn insert(&self, obj: impl Into<AnyResource>) {
            let mut g = self.lock();
            match obj.into() {
                AnyResource::Chain(o) => upsert(&mut g.chains, o),
                AnyResource::Agent(o) => upsert(&mut g.agents, o),
                AnyResource::McpServer(o) => upsert(&mut g.mcp_servers, o),
                AnyResource::LlmProvider(o) => upsert(&mut g.llm_providers, o),
            }
        }

        /// Makes every read fail (simulates an unreachable API server).
        pub fn set_unavailable(&self, unavailable: bool) {
            self.lock().unavailable = unavailable;
        }

        fn check(&self, kind: &'static str) -> Result<MutexGuard<'_, Objects>, ReadError> {
            let g = self.lock();
            if g.unavailable {
                return Err(ReadError::Unavailable {
                    kind,
                    message: "simulated outage".into(),
                });
            }
            Ok(g)
        }
    }

    #[async_trait]
    impl ResourceReader for InMemoryResources {
        async fn chains(&self, namespace: &str) -> Result<Vec<Chain>, ReadError> {
            Ok(in_namespace(&self.check("Chain")?.chains, namespace))
        }
        async fn agents(&self, namespace: &str) -> Result<Vec<Agent>, ReadError> {
            Ok(in_namespace(&self.check("Agent")?.agents, namespace))
        }
        async fn mcp_servers(&self, namespace: &str) -> Result<Vec<MCPServer>, ReadError> {
            Ok(in_namespace(
                &self.check("MCPServer")?.mcp_servers,
                namespace,
            ))
        }
        async fn llm_providers(&self, namespace: &str) -> Result<Vec<LLMProvider>, ReadError> {
            Ok(in_namespace(
                &self.check("LLMProvider")?.llm_providers,
                namespace,
            ))
        }
    }
}

/// [`ResourceReader`] backed by watch caches of the four kinds.
///
/// Needs `list` and `watch` on chains, agents, mcpservers and llmproviders
/// (in the watched namespace, or cluster-wide).
#[derive(Clone)]
pub struct KubeResources {
    chains: Store<Chain>,
    agents: Store<Agent>,
    mcp_servers: Store<MCPServer>,
    llm_providers: Store<LLMProvider>,
    ready_timeout: Duration,
}

impl KubeResources {
    /// Starts watching the four kinds in `namespace` (all namespaces when
    /// `None`). Returns the reader and the future that keeps the caches
    /// current: spawn it and keep it running for the reader's lifetime.
    pub fn start(client: Client, namespace: Option<&str>) -> (Self, BoxFuture<'static, ()>) {
        let (chains, f1) = watch::<Chain>(api(&client, namespace));
        let (agents, f2) = watch::<Agent>(api(&client, namespace));
        let (mcp_servers, f3) = watch::<MCPServer>(api(&client, namespace));
        let (llm_providers, f4) = watch::<LLMProvider>(api(&client, namespace));
        let run = async move {
            futures::join!(f1, f2, f3, f4);
        }
        .boxed();
        (
            Self {
                chains,
                agents,
                mcp_servers,
                llm_providers,
                ready_timeout: Duration::from_secs(10),
            },
            run,
        )
    }

    /// How long a read waits for a cache's initial list (default 10 s).
    pub fn with_ready_timeout(mut self, timeout: Duration) -> Self {
        self.ready_timeout = timeout;
        self
    }

    async fn read<K>(
        &self,
        store: &Store<K>,
        kind: &'static str,
        namespace: &str,
    ) -> Result<Vec<K>, ReadError>
    where
        K: Resource<DynamicType = ()> + Clone + 'static,
    {
        match tokio::time::timeout(self.ready_timeout, store.wait_until_ready()).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => {
                return Err(ReadError::Unavailable {
                    kind,
                    message: "the watch stopped".into(),
                });
            }
            Err(_) => return Err(ReadError::NotReady { kind }),
        }
        Ok(store
            .state()
            .into_iter()
            .filter(|o| o.namespace().as_deref() == Some(namespace))
            .map(|o| (*o).clone())
            .collect())
    }
}

fn api<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

fn watch<K>(api: Api<K>) -> (Store<K>, BoxFuture<'static, ()>)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let (reader, writer) = reflector::store();
    let run = reflector::reflector(
        writer,
        watcher(api, watcher::Config::default()).default_backoff(),
    )
    .for_each(|event| {
        if let Err(e) = event {
            tracing::warn!(kind = %K::kind(&()), error = %e, "watch error; retrying");
        }
        futures::future::ready(())
    })
    .boxed();
    (reader, run)
}

#[async_trait]
impl ResourceReader for KubeResources {
    async fn chains(&self, namespace: &str) -> Result<Vec<Chain>, ReadError> {
        self.read(&self.chains, "Chain", namespace).await
    }
    async fn agents(&self, namespace: &str) -> Result<Vec<Agent>, ReadError> {
        self.read(&self.agents, "Agent", namespace).await
    }
    async fn mcp_servers(&self, namespace: &str) -> Result<Vec<MCPServer>, ReadError> {
        self.read(&self.mcp_servers, "MCPServer", namespace).await
    }
    async fn llm_providers(&self, namespace: &str) -> Result<Vec<LLMProvider>, ReadError> {
        self.read(&self.llm_providers, "LLMProvider", namespace)
            .await
    }
}
