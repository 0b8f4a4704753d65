//! The web UI: `GET /` (the page) and `GET /assets/{name}` (its script, style and icon),
//! compiled into the binary from the committed build in `web/dist/` (ADR 0017).
//!
//! The page holds no data, so it needs no token: every piece of data comes from
//! `/v1/*`, which the page's script calls with the user's client id and token. What
//! lives here is only serving fixed bytes well: a table of embedded files looked up by
//! exact name (nothing is ever read from the filesystem, so no request path can reach
//! one), their content types, a strict Content-Security-Policy (scripts, styles and
//! connections from this origin only, no inline code, no framing), and validation
//! caching by a content hash. A name not in the table is a 404 in the error envelope.
//! The UI's source is `web/src/`; `scripts/build-web.sh` rebuilds `web/dist/`.

use std::sync::LazyLock;

use axum::Router;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use sha2::{Digest, Sha256};

use crate::error::ApiError;

/// The policy every UI response carries: only this origin's script, style, images and
/// connections; no inline script or style, no plugins, no framing, no form posts.
pub(crate) const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

/// Revalidate every time: the names are fixed, so a changed binary must not be hidden
/// behind a cached copy; an unchanged file costs a `304`.
const CACHE_CONTROL: &str = "no-cache";

/// One embedded file.
struct Asset {
    /// Its name under `/assets/` (the page itself is served at `/`).
    name: &'static str,
    content_type: &'static str,
    bytes: &'static [u8],
    /// A strong validator: the SHA-256 of the bytes, quoted.
    etag: HeaderValue,
}

impl Asset {
    fn new(name: &'static str, content_type: &'static str, bytes: &'static [u8]) -> Self {
        let digest = Sha256::digest(bytes);
        let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
        Self {
            name,
            content_type,
            bytes,
            // Hex in quotes is always a valid header value.
            etag: HeaderValue::from_str(&format!("\"{hex}\""))
                .unwrap_or_else(|_| HeaderValue::from_static("\"0\"")),
        }
    }
}

/// The page.
static INDEX: LazyLock<Asset> = LazyLock::new(|| {
    Asset::new(
        "index.html",
        "text/html; charset=utf-8",
        include_bytes!("../../../../web/dist/index.html"),
    )
});

/// Everything under `/assets/`, by exact name.
static ASSETS: LazyLock<[Asset; 3]> = LazyLock::new(|| {
    [
        Asset::new(
            "app.js",
            "text/javascript; charset=utf-8",
            include_bytes!("../../../../web/dist/assets/app.js"),
        ),
        Asset::new(
            "app.css",
            "text/css; charset=utf-8",
            include_bytes!("../../../../web/dist/assets/app.css"),
        ),
        Asset::new(
            "icon.svg",
            "image/svg+xml",
            include_bytes!("../../../../web/dist/assets/icon.svg"),
        ),
    ]
});

/// The UI's routes; no token, no client id (merged outside the `/v1` gate).
pub(crate) fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(page))
        .route("/assets/{*name}", get(asset))
}

async fn page(headers: HeaderMap) -> Response {
    serve(&INDEX, &headers)
}

async fn asset(uri: Uri, headers: HeaderMap) -> Result<Response, ApiError> {
    // The raw path, not a decoded one: the table's names are plain ASCII, so an exact
    // match needs no decoding, and `..`, `%2e`, slashes, NULs or invalid UTF-8 simply
    // match nothing.
    let name = uri.path().strip_prefix("/assets/").unwrap_or_default();
    ASSETS
        .iter()
        .find(|asset| asset.name == name)
        .map(|asset| serve(asset, &headers))
        .ok_or_else(|| ApiError::not_found("no such UI asset"))
}

/// The file with its headers, or `304` when the client's copy is current.
fn serve(asset: &Asset, request: &HeaderMap) -> Response {
    let current = request
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(str::trim)
        .any(|tag| tag == "*" || tag.trim_start_matches("W/").as_bytes() == asset.etag.as_bytes());
    let headers = [
        (header::ETAG, asset.etag.clone()),
        (
            header::CACHE_CONTROL,
            HeaderValue::from_static(CACHE_CONTROL),
        ),
        (
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        ),
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
        (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
        (
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ),
    ];
    if current {
        return (StatusCode::NOT_MODIFIED, headers).into_response();
    }
    (
        headers,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static(asset.content_type),
        )],
        asset.bytes,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_links_only_embedded_assets() {
        let page = std::str::from_utf8(INDEX.bytes).expect("the page is UTF-8");
        for link in page.split("/assets/").skip(1) {
            let name: String = link
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
                .collect();
            assert!(
                ASSETS.iter().any(|a| a.name == name),
                "the page links /assets/{name}, which is not embedded"
            );
        }
        assert!(
            !page.contains("<script>"),
            "no inline script: the CSP forbids it"
        );
    }

    #[test]
    fn etags_are_quoted_content_hashes() {
        let tags: Vec<_> = ASSETS.iter().map(|a| a.etag.clone()).collect();
        for tag in &tags {
            let text = tag.to_str().expect("ascii");
            assert!(text.starts_with('"') && text.ends_with('"') && text.len() == 34);
        }
        assert_ne!(tags[0], tags[1]);
    }
}
