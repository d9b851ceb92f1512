//! Prints the OpenAPI document of the REST API (what `GET
//! /api/v1/openapi.json` serves), without a database or a server:
//!
//! ```text
//! cargo run -p tarsy-api --example openapi > dashboard/openapi.json
//! ```
//!
//! The dashboard's TypeScript types are generated from that file
//! (`npm run gen:api` in `dashboard/`).

fn main() {
    print!("{}", tarsy_api::openapi_json());
}
