//! [`ScriptedEmbedder`]: deterministic text vectors for tests, served by the
//! scripted server's `Embed` and usable in process as a
//! [`tarsy_memory::Embedder`].
//!
//! A hashed bag of words: a text is lowercased and split on every character
//! that is not alphanumeric; each token adds ±1 to one of the vector's
//! dimensions, both chosen by a stable hash of the token (FNV-1a, the same
//! on every run and platform); the sum is scaled to unit length. Texts that
//! share words point the same way (cosine near 1), texts without common
//! words are near orthogonal (cosine near 0, up to hash collisions).

use tarsy_memory::{EmbedError, Embedder};

/// Deterministic hashed-bag-of-words embeddings. Cheap to copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScriptedEmbedder {
    dimensions: usize,
}

impl Default for ScriptedEmbedder {
    fn default() -> Self {
        Self::new()
    }
}

impl ScriptedEmbedder {
    /// Length of the vectors of [`ScriptedEmbedder::new`].
    pub const DEFAULT_DIMENSIONS: usize = 64;

    /// Vectors of [`Self::DEFAULT_DIMENSIONS`] components.
    pub fn new() -> Self {
        Self {
            dimensions: Self::DEFAULT_DIMENSIONS,
        }
    }

    /// Vectors of `dimensions` components (at least 1).
    pub fn with_dimensions(dimensions: usize) -> Self {
        Self {
            dimensions: dimensions.max(1),
        }
    }

    /// The length of every vector.
    pub fn dimensions(&self) -> usize {
        self.dimensions
    }

    /// The unit vector of one text. A text without any word embeds as the
    /// empty token would: every such text gets the same vector.
    pub fn embed_text(&self, text: &str) -> Vec<f32> {
        let mut vector = vec![0f32; self.dimensions];
        let lower = text.to_lowercase();
        let mut tokens = lower
            .split(|c: char| !c.is_alphanumeric())
            .filter(|t| !t.is_empty())
            .peekable();
        if tokens.peek().is_none() {
            self.add(&mut vector, "");
        }
        for token in tokens {
            self.add(&mut vector, token);
        }
        let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 0.0 {
            vector.iter_mut().for_each(|x| *x /= norm);
        }
        vector
    }

    /// The vectors of `texts`, in order.
    pub fn embed_all(&self, texts: &[String]) -> Vec<Vec<f32>> {
        texts.iter().map(|t| self.embed_text(t)).collect()
    }

    fn add(&self, vector: &mut [f32], token: &str) {
        let hash = fnv1a(token.as_bytes());
        // The low bits pick the dimension, the top bit the sign: collisions
        // of unrelated words cancel out as often as they add up.
        let index = (hash % self.dimensions as u64) as usize;
        let sign = if hash >> 63 == 0 { 1.0 } else { -1.0 };
        vector[index] += sign;
    }
}

/// 64-bit FNV-1a: stable across runs, builds and platforms (unlike the
/// standard library's randomly seeded hasher).
fn fnv1a(bytes: &[u8]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes
        .iter()
        .fold(OFFSET, |h, b| (h ^ u64::from(*b)).wrapping_mul(PRIME))
}

#[tonic::async_trait]
impl Embedder for ScriptedEmbedder {
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(self.embed_all(texts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cosine(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    fn similarity(e: &ScriptedEmbedder, a: &str, b: &str) -> f32 {
        cosine(&e.embed_text(a), &e.embed_text(b))
    }

    #[test]
    fn texts_sharing_words_are_closer_than_unrelated_ones() {
        let e = ScriptedEmbedder::new();
        let alert = "Pod checkout-api OOMKilled in namespace payments";
        let similar = "checkout-api pod was OOMKilled again (namespace payments)";
        let unrelated = "Disk usage above 90% on node db-3";
        let close = similarity(&e, alert, similar);
        let far = similarity(&e, alert, unrelated);
        assert!(close > 0.7, "similar texts: {close}");
        assert!(far.abs() < 0.3, "unrelated texts: {far}");
        assert!(close > far);
    }

    #[test]
    fn vectors_are_unit_length_deterministic_and_case_blind() {
        let e = ScriptedEmbedder::new();
        let v = e.embed_text("Certificate EXPIRED for ingress web");
        assert_eq!(v.len(), ScriptedEmbedder::DEFAULT_DIMENSIONS);
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-6, "{norm}");
        assert_eq!(v, e.embed_text("certificate expired, for INGRESS web!"));
        // The published FNV-1a test vectors: the same on every run and platform.
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn texts_without_words_get_one_unit_vector() {
        let e = ScriptedEmbedder::with_dimensions(8);
        let empty = e.embed_text("");
        assert_eq!(empty, e.embed_text(" -- !"));
        assert_eq!(empty.len(), 8);
        assert!((cosine(&empty, &empty) - 1.0).abs() < 1e-6);
        assert_eq!(ScriptedEmbedder::with_dimensions(0).dimensions(), 1);
    }

    #[tokio::test]
    async fn the_server_embeds_records_and_plays_scripted_replies() {
        use crate::server::{ScriptedEmbedReply, ScriptedLlm};
        use tarsy_proto::v1::EmbedRequest;

        let script = ScriptedLlm::new();
        script.push_embed(ScriptedEmbedReply::Vectors(vec![vec![1.0]]));
        script.push_embed(ScriptedEmbedReply::Fail(
            tonic::Code::Unavailable,
            "down".into(),
        ));
        let request = |texts: &[&str]| EmbedRequest {
            texts: texts.iter().map(|t| t.to_string()).collect(),
            llm_config: None,
        };
        let scripted = script.embed_request(request(&["a", "b"])).await.unwrap();
        assert_eq!(scripted.embeddings.len(), 1);
        let failed = script.embed_request(request(&["a"])).await.unwrap_err();
        assert_eq!(failed.code(), tonic::Code::Unavailable);
        script.set_embedder(ScriptedEmbedder::with_dimensions(16));
        let answer = script.embed_request(request(&["x y", "z"])).await.unwrap();
        let e = ScriptedEmbedder::with_dimensions(16);
        let vectors: Vec<_> = answer.embeddings.into_iter().map(|v| v.values).collect();
        assert_eq!(vectors, vec![e.embed_text("x y"), e.embed_text("z")]);
        let recorded: Vec<_> = script
            .embed_requests()
            .into_iter()
            .map(|r| r.texts)
            .collect();
        assert_eq!(recorded, [vec!["a", "b"], vec!["a"], vec!["x y", "z"]]);
        // Generate's record is separate.
        assert_eq!(script.request_count(), 0);
    }

    #[tokio::test]
    async fn the_embedder_trait_embeds_in_order() {
        let e = ScriptedEmbedder::new();
        let texts = vec!["one".to_string(), "two".to_string()];
        let vectors = Embedder::embed(&e, &texts).await.unwrap();
        assert_eq!(vectors, vec![e.embed_text("one"), e.embed_text("two")]);
    }
}
