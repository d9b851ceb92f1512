//! Follow-up chats: one per session, and the questions asked in them.

use crate::Store;
use crate::db::{Sql, new_id, now};
use crate::error::{Result, StoreError, classify_insert, is_foreign_key_violation};
use crate::model::{Chat, ChatUserMessage, Created};

const CHAT: &str = "chat";
const MESSAGE: &str = "chat message";

impl Store {
    /// The session's chat, created on first use. A session has at most one
    /// chat: concurrent callers all receive the same one, and only one of
    /// them sees `created: true`.
    pub async fn get_or_create_chat(
        &self,
        session_id: &str,
        created_by: Option<&str>,
    ) -> Result<Created<Chat>> {
        let inserted = self
            .db
            .execute(
                Sql::new(
                    "INSERT INTO chats (id, session_id, created_by, created_at) VALUES ($1, $2, $3, $4) \
                     ON CONFLICT (session_id) DO NOTHING",
                )
                .bind(new_id())
                .bind(session_id)
                .bind(created_by)
                .bind(now()),
            )
            .await;
        let created = match inserted {
            Ok(n) => n == 1,
            Err(e) if is_foreign_key_violation(&e) => {
                return Err(StoreError::not_found("session", session_id));
            }
            Err(e) => return Err(e),
        };
        let record = self
            .chat_for_session(session_id)
            .await?
            .ok_or_else(|| StoreError::not_found(CHAT, session_id))?;
        Ok(Created { record, created })
    }

    /// The chat with this id.
    pub async fn get_chat(&self, id: &str) -> Result<Chat> {
        self.db
            .fetch_optional(Sql::new("SELECT * FROM chats WHERE id = $1").bind(id))
            .await?
            .ok_or_else(|| StoreError::not_found(CHAT, id))
    }

    /// The session's chat, if one was opened (not-found for an unknown session).
    pub async fn chat_for_session(&self, session_id: &str) -> Result<Option<Chat>> {
        let chat = self
            .db
            .fetch_optional(Sql::new("SELECT * FROM chats WHERE session_id = $1").bind(session_id))
            .await?;
        if chat.is_none() {
            self.require_session(session_id).await?;
        }
        Ok(chat)
    }

    /// Heartbeat of a running chat answer, recording the worker that runs it.
    pub async fn touch_chat(&self, id: &str, pod_id: Option<&str>) -> Result<()> {
        let n = self
            .db
            .execute(
                Sql::new(
                    "UPDATE chats SET last_interaction_at = $2, pod_id = COALESCE($3, pod_id) WHERE id = $1",
                )
                .bind(id)
                .bind(now())
                .bind(pod_id),
            )
            .await?;
        if n == 0 {
            return Err(StoreError::not_found(CHAT, id));
        }
        Ok(())
    }

    /// Stores a question asked in a chat.
    pub async fn create_chat_user_message(
        &self,
        chat_id: &str,
        content: &str,
        author: Option<&str>,
    ) -> Result<ChatUserMessage> {
        if content.trim().is_empty() {
            return Err(StoreError::InvalidInput("chat message is empty".into()));
        }
        let id = new_id();
        let result = self
            .db
            .fetch_optional::<ChatUserMessage>(
                Sql::new(
                    "INSERT INTO chat_user_messages (id, chat_id, content, author, created_at) \
                     VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING RETURNING *",
                )
                .bind(id.clone())
                .bind(chat_id)
                .bind(content)
                .bind(author)
                .bind(now()),
            )
            .await
            .map_err(|e| match e {
                StoreError::Database(db) => classify_insert(MESSAGE, db),
                other => other,
            });
        match result {
            Ok(Some(m)) => Ok(m),
            // Stored by an earlier attempt of this call.
            Ok(None) => self.get_chat_user_message(&id).await,
            Err(e) if is_foreign_key_violation(&e) => Err(StoreError::not_found(CHAT, chat_id)),
            Err(e) => Err(e),
        }
    }

    /// The chat question with this id.
    pub async fn get_chat_user_message(&self, id: &str) -> Result<ChatUserMessage> {
        self.db
            .fetch_optional(Sql::new("SELECT * FROM chat_user_messages WHERE id = $1").bind(id))
            .await?
            .ok_or_else(|| StoreError::not_found(MESSAGE, id))
    }

    /// A chat's questions, oldest first.
    pub async fn list_chat_user_messages(&self, chat_id: &str) -> Result<Vec<ChatUserMessage>> {
        let list: Vec<ChatUserMessage> = self
            .db
            .fetch_all(
                Sql::new(
                    "SELECT * FROM chat_user_messages WHERE chat_id = $1 ORDER BY created_at, id",
                )
                .bind(chat_id),
            )
            .await?;
        if list.is_empty() {
            self.get_chat(chat_id).await?;
        }
        Ok(list)
    }

    /// Deletes a question (a submission that was rejected must leave no orphan).
    pub async fn delete_chat_user_message(&self, id: &str) -> Result<()> {
        let n = self
            .db
            .execute(Sql::new("DELETE FROM chat_user_messages WHERE id = $1").bind(id))
            .await?;
        if n == 0 {
            return Err(StoreError::not_found(MESSAGE, id));
        }
        Ok(())
    }
}
