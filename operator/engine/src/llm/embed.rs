//! [`GrpcEmbedder`]: investigation memory's [`Embedder`] over the LLM
//! service's `Embed` RPC, on the connection of a [`GrpcLlmClient`].

use std::time::Duration;

use async_trait::async_trait;
use tarsy_core::LlmProviderConfig;
use tarsy_memory::{EmbedError, Embedder};
use tarsy_proto::v1 as pb;
use tarsy_proto::v1::llm_service_client::LlmServiceClient;
use tonic::transport::Channel;

use super::GrpcLlmClient;
use super::grpc::status_info;

/// Texts per `Embed` call: the Gemini API embeds at most 100 per request.
pub const EMBED_BATCH: usize = 100;

/// How long one `Embed` call (one batch) may take, unless
/// [`GrpcEmbedder::with_timeout`] says otherwise. It covers the service's
/// own retries of a rate-limited provider (1 + 2 + 4 s).
pub const DEFAULT_EMBED_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the calls go: the connection of the engine's LLM client, or a
/// channel of its own.
#[derive(Clone, Debug)]
enum Connection {
    Shared(GrpcLlmClient),
    Own(LlmServiceClient<Channel>),
}

/// An [`Embedder`] that asks the LLM service: texts in batches of at most
/// [`EMBED_BATCH`], one call after the other, each with a deadline.
/// Cloning is cheap.
///
/// Failures: a failed or timed-out call is [`EmbedError::Unavailable`]
/// (the service's status and message: unreachable service, provider
/// failure, unsupported provider type, missing key); an answer with a
/// vector count other than the texts', or vectors of different or zero
/// lengths, is [`EmbedError::Invalid`].
#[derive(Clone, Debug)]
pub struct GrpcEmbedder {
    connection: Connection,
    config: pb::LlmConfig,
    timeout: Duration,
}

impl GrpcEmbedder {
    /// Embeds over `client`'s connection to the LLM service, with
    /// `config`: the provider (type, `api_key_env`, `base_url`) and the
    /// embedding model (see [`GrpcEmbedder::embedding_config`]).
    pub fn new(client: &GrpcLlmClient, config: pb::LlmConfig) -> Self {
        Self {
            connection: Connection::Shared(client.clone()),
            config,
            timeout: DEFAULT_EMBED_TIMEOUT,
        }
    }

    /// Embeds over `channel` (a connection made elsewhere).
    pub fn from_channel(channel: Channel, config: pb::LlmConfig) -> Self {
        Self {
            connection: Connection::Own(LlmServiceClient::new(channel)),
            config,
            timeout: DEFAULT_EMBED_TIMEOUT,
        }
    }

    /// The deadline of each call (default [`DEFAULT_EMBED_TIMEOUT`]).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The `llm_config` sent with every call.
    pub fn config(&self) -> &pb::LlmConfig {
        &self.config
    }

    /// The `llm_config` of an embedding `model` of `provider`: its type,
    /// key and credentials variables, base URL, project and location. Its
    /// chat model, native tools and backend are not sent.
    pub fn embedding_config(provider: &LlmProviderConfig, model: &str) -> pb::LlmConfig {
        pb::LlmConfig {
            provider: provider.provider_type.as_str().to_string(),
            model: model.to_string(),
            api_key_env: provider.api_key_env.clone().unwrap_or_default(),
            credentials_env: provider.credentials_env.clone().unwrap_or_default(),
            base_url: provider.base_url.clone().unwrap_or_default(),
            project: provider.project.clone().unwrap_or_default(),
            location: provider.location.clone().unwrap_or_default(),
            ..pb::LlmConfig::default()
        }
    }

    fn client(&self) -> LlmServiceClient<Channel> {
        match &self.connection {
            Connection::Shared(c) => c.service_client(),
            Connection::Own(c) => c.clone(),
        }
    }

    /// One call: the vectors of `texts` (at most [`EMBED_BATCH`]), counted.
    async fn embed_batch(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut request = tonic::Request::new(pb::EmbedRequest {
            texts: texts.to_vec(),
            llm_config: Some(self.config.clone()),
        });
        // The service learns the deadline (and stops the provider call at
        // it); the timer here ends the wait even if the service does not.
        request.set_timeout(self.timeout);
        let mut client = self.client();
        let answer = tokio::time::timeout(self.timeout, client.embed(request))
            .await
            .map_err(|_| {
                EmbedError::Unavailable(format!("Embed did not answer within {:?}", self.timeout))
            })?
            .map_err(|status| EmbedError::Unavailable(status_info(&status).message))?
            .into_inner();
        if answer.embeddings.len() != texts.len() {
            return Err(EmbedError::Invalid(format!(
                "{} vectors for {} texts",
                answer.embeddings.len(),
                texts.len()
            )));
        }
        Ok(answer.embeddings.into_iter().map(|e| e.values).collect())
    }
}

/// Every vector non-empty, finite, and as long as the first.
fn check_lengths(vectors: &[Vec<f32>]) -> Result<(), EmbedError> {
    let Some(first) = vectors.first() else {
        return Ok(());
    };
    if let Some(v) = vectors.iter().find(|v| v.len() != first.len()) {
        return Err(EmbedError::Invalid(format!(
            "vectors of different lengths ({} and {})",
            first.len(),
            v.len()
        )));
    }
    if first.is_empty() {
        return Err(EmbedError::Invalid("empty vectors".into()));
    }
    if vectors.iter().flatten().any(|x| !x.is_finite()) {
        return Err(EmbedError::Invalid("vectors with non-finite values".into()));
    }
    Ok(())
}

#[async_trait]
impl Embedder for GrpcEmbedder {
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut vectors = Vec::with_capacity(texts.len());
        for batch in texts.chunks(EMBED_BATCH) {
            vectors.extend(self.embed_batch(batch).await?);
        }
        check_lengths(&vectors)?;
        Ok(vectors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tarsy_scripted_llm::{
        ScriptedEmbedReply, ScriptedEmbedder, ScriptedLlm, ScriptedLlmServer,
    };

    fn config() -> pb::LlmConfig {
        pb::LlmConfig {
            provider: "google".into(),
            model: "gemini-embedding-001".into(),
            api_key_env: "GOOGLE_API_KEY".into(),
            ..pb::LlmConfig::default()
        }
    }

    fn texts(items: &[&str]) -> Vec<String> {
        items.iter().map(|t| t.to_string()).collect()
    }

    async fn embedder(script: &ScriptedLlm) -> (ScriptedLlmServer, GrpcEmbedder) {
        let server = ScriptedLlmServer::start(script.clone()).await.unwrap();
        let client = GrpcLlmClient::connect(&server.endpoint()).await.unwrap();
        (server, GrpcEmbedder::new(&client, config()))
    }

    fn cosine(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    #[tokio::test]
    async fn texts_in_vectors_out_with_the_config_sent() {
        let script = ScriptedLlm::new();
        let (_server, embedder) = embedder(&script).await;
        let input = texts(&[
            "Pod checkout-api OOMKilled in namespace payments",
            "checkout-api OOMKilled again in payments",
            "Certificate expired on ingress web",
        ]);
        let vectors = embedder.embed(&input).await.unwrap();
        assert_eq!(vectors, ScriptedEmbedder::new().embed_all(&input));
        assert!(cosine(&vectors[0], &vectors[1]) > cosine(&vectors[0], &vectors[2]));
        let requests = script.embed_requests();
        assert_eq!(requests.len(), 1);
        assert_eq!(requests[0].texts, input);
        assert_eq!(requests[0].llm_config, Some(config()));
    }

    #[tokio::test]
    async fn texts_go_in_batches_of_at_most_a_hundred_in_order() {
        let script = ScriptedLlm::new();
        let (_server, embedder) = embedder(&script).await;
        let input: Vec<String> = (0..2 * EMBED_BATCH + 50)
            .map(|i| format!("text number {i}"))
            .collect();
        let vectors = embedder.embed(&input).await.unwrap();
        assert_eq!(vectors, ScriptedEmbedder::new().embed_all(&input));
        let sizes: Vec<usize> = script
            .embed_requests()
            .iter()
            .map(|r| r.texts.len())
            .collect();
        assert_eq!(sizes, [EMBED_BATCH, EMBED_BATCH, 50]);
    }

    #[tokio::test]
    async fn no_texts_no_call() {
        let script = ScriptedLlm::new();
        let (_server, embedder) = embedder(&script).await;
        assert_eq!(embedder.embed(&[]).await.unwrap(), Vec::<Vec<f32>>::new());
        assert!(script.embed_requests().is_empty());
    }

    #[tokio::test]
    async fn a_failed_call_is_unavailable_with_the_services_message() {
        let script = ScriptedLlm::new();
        script.push_embed(ScriptedEmbedReply::Fail(
            tonic::Code::InvalidArgument,
            "invalid_request: Embed serves provider types google and openai, not 'anthropic'"
                .into(),
        ));
        script.push_embed(ScriptedEmbedReply::Fail(
            tonic::Code::Unauthenticated,
            "credentials: environment variable GOOGLE_API_KEY (api_key_env) is not set".into(),
        ));
        let (_server, embedder) = embedder(&script).await;
        let Err(EmbedError::Unavailable(message)) = embedder.embed(&texts(&["a"])).await else {
            panic!("an unavailable embedder");
        };
        assert!(message.contains("not 'anthropic'"), "{message}");
        let Err(EmbedError::Unavailable(message)) = embedder.embed(&texts(&["a"])).await else {
            panic!("an unavailable embedder");
        };
        assert!(message.contains("GOOGLE_API_KEY"), "{message}");
    }

    #[tokio::test]
    async fn a_wrong_count_or_unequal_lengths_are_invalid() {
        let script = ScriptedLlm::new();
        script.push_embed(ScriptedEmbedReply::Vectors(vec![vec![1.0, 0.0]]));
        script.push_embed(ScriptedEmbedReply::Vectors(vec![vec![1.0, 0.0], vec![1.0]]));
        script.push_embed(ScriptedEmbedReply::Vectors(vec![vec![], vec![]]));
        let (_server, embedder) = embedder(&script).await;
        let two = texts(&["a", "b"]);
        assert_eq!(
            embedder.embed(&two).await,
            Err(EmbedError::Invalid("1 vectors for 2 texts".into()))
        );
        assert_eq!(
            embedder.embed(&two).await,
            Err(EmbedError::Invalid(
                "vectors of different lengths (2 and 1)".into()
            ))
        );
        assert_eq!(
            embedder.embed(&two).await,
            Err(EmbedError::Invalid("empty vectors".into()))
        );
    }

    #[tokio::test]
    async fn batches_of_different_lengths_are_invalid() {
        let script = ScriptedLlm::new();
        script.push_embed(ScriptedEmbedReply::Vectors(vec![
            vec![1.0, 0.0];
            EMBED_BATCH
        ]));
        let (_server, embedder) = embedder(&script).await;
        // The second batch is embedded by the default 64-dimension embedder.
        let input = vec!["x".to_string(); EMBED_BATCH + 1];
        assert_eq!(
            embedder.embed(&input).await,
            Err(EmbedError::Invalid(format!(
                "vectors of different lengths (2 and {})",
                ScriptedEmbedder::DEFAULT_DIMENSIONS
            )))
        );
    }

    #[tokio::test]
    async fn a_call_past_its_deadline_is_unavailable() {
        let script = ScriptedLlm::new();
        script.push_embed(ScriptedEmbedReply::Hang);
        let (_server, embedder) = embedder(&script).await;
        let embedder = embedder.with_timeout(Duration::from_millis(200));
        let started = tokio::time::Instant::now();
        let result = embedder.embed(&texts(&["a"])).await;
        assert!(
            matches!(&result, Err(EmbedError::Unavailable(_))),
            "{result:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(5));
        // The next call is answered.
        assert_eq!(embedder.embed(&texts(&["a"])).await.unwrap().len(), 1);
    }

    #[tokio::test]
    async fn an_unreachable_service_is_unavailable() {
        let server = ScriptedLlmServer::start(ScriptedLlm::new()).await.unwrap();
        let endpoint = server.endpoint();
        server.shutdown().await;
        let client = GrpcLlmClient::connect_lazy(&endpoint).unwrap();
        let embedder = GrpcEmbedder::new(&client, config());
        let result = embedder.embed(&texts(&["a"])).await;
        assert!(
            matches!(&result, Err(EmbedError::Unavailable(_))),
            "{result:?}"
        );
    }

    #[tokio::test]
    async fn a_channel_of_its_own_works_too() {
        let script = ScriptedLlm::new();
        let server = ScriptedLlmServer::start(script.clone()).await.unwrap();
        let channel = tonic::transport::Endpoint::from_shared(server.endpoint())
            .unwrap()
            .connect()
            .await
            .unwrap();
        let embedder = GrpcEmbedder::from_channel(channel, config());
        let vectors = embedder.embed(&texts(&["disk full"])).await.unwrap();
        assert_eq!(
            vectors,
            vec![ScriptedEmbedder::new().embed_text("disk full")]
        );
    }

    #[test]
    fn the_embedding_config_of_a_provider() {
        let provider = LlmProviderConfig {
            name: "local".into(),
            provider_type: tarsy_core::ProviderType::Openai,
            model: "qwen3".into(),
            api_key_env: None,
            credentials_env: None,
            base_url: Some("http://ollama:11434/v1".into()),
            project: None,
            location: None,
            native_tools: [("google_search".to_string(), true)].into(),
            max_tool_result_tokens: None,
            context_window_tokens: None,
            script: None,
            fallback: Vec::new(),
            price: None,
        };
        let cfg = GrpcEmbedder::embedding_config(&provider, "nomic-embed-text");
        assert_eq!(
            cfg,
            pb::LlmConfig {
                provider: "openai".into(),
                model: "nomic-embed-text".into(),
                base_url: "http://ollama:11434/v1".into(),
                ..pb::LlmConfig::default()
            }
        );
    }
}
