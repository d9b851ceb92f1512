//! The web dashboard's files, embedded into this binary at build time.

use tarsy_api::Dashboard;

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/dashboard_assets.rs"));
}

/// The dashboard built into this binary (empty when it was not built).
pub fn dashboard() -> Dashboard {
    Dashboard::new(embedded::ASSETS)
}
