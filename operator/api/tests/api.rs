//! The API over a real HTTP server and a real WebSocket client, against the
//! real store on SQLite and Postgres.

#[path = "common/mod.rs"]
mod common;

mod api {
    mod cross_site;
    mod dashboard;
    mod memories;
    mod rest;
    mod review;
    mod ws;
}
