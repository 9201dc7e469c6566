//! `GET /v1/lists/{name}/history`: a list's build history as JSON, oldest
//! build first (`status::ListWatch` keeps it).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Json};
use blocksieve_format::api::HistoryResponse;

use super::error::{ApiError, unknown_list};
use crate::state::AppState;
use crate::storage::history::HISTORY_LIMIT;

/// `GET /v1/lists/{name}/history`; `404 unknown_list` for a list not
/// configured, `404 no_history` on a replica (it builds nothing: the
/// history is on the builders, which serve this route on their
/// operational port).
pub(super) async fn history(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
) -> Result<impl IntoResponse, ApiError> {
    let slot = state.list(&name).ok_or_else(|| unknown_list(&name))?;
    if !state.role.builds() {
        return Err(ApiError::new(
            axum::http::StatusCode::NOT_FOUND,
            "no_history",
            "a replica builds nothing: the build history is on the builders".to_owned(),
        ));
    }
    let builds = slot.watch.with_history(|h| h.iter().cloned().collect());
    // Grows with every build: never a cached copy (as `GET /v1/lists`).
    Ok((
        [(header::CACHE_CONTROL, HeaderValue::from_static("no-store"))],
        Json(HistoryResponse {
            list: name,
            limit: HISTORY_LIMIT,
            builds,
        }),
    ))
}
