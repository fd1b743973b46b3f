//! The operator console's files (issue 18): served from the binary at `/dashboard` with their
//! content types, ETags and security headers; client routes fall back to the page; unknown
//! files are 404 problem documents; the routes are pages, not API operations.

mod common;

use actix_web::test::TestRequest;

fn assert_page_headers(reply: &common::Reply, what: &str) {
    let csp = reply.header("content-security-policy").unwrap_or_default();
    for directive in [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self' ws: wss:",
        "frame-ancestors 'none'",
    ] {
        assert!(
            csp.contains(directive),
            "{what}: CSP {csp:?} lacks {directive}"
        );
    }
    assert!(!csp.contains("unsafe-inline"), "{what}: {csp}");
    assert_eq!(
        reply.header("x-content-type-options").as_deref(),
        Some("nosniff"),
        "{what}"
    );
    assert_eq!(
        reply.header("x-frame-options").as_deref(),
        Some("DENY"),
        "{what}"
    );
    assert_eq!(
        reply.header("referrer-policy").as_deref(),
        Some("no-referrer"),
        "{what}"
    );
}

app_test!(the_console_is_served_from_the_binary, |app| {
    let root: serde_json::Value = serde_json::from_slice(&app.get("/").await.body).unwrap();
    assert_eq!(root["dashboard"], "/dashboard");

    let page = app.get("/dashboard").await;
    assert_eq!(page.status.as_u16(), 200);
    assert_eq!(
        page.header("content-type").as_deref(),
        Some("text/html; charset=utf-8")
    );
    assert!(page.text().contains("/dashboard/app.js"));
    assert!(!page.text().contains("<script>"), "no inline script");
    assert!(!page.text().contains("style="), "no inline style");
    assert_page_headers(&page, "/dashboard");

    // Client routes and the SSO failure page answer the same page.
    for path in [
        "/dashboard/",
        "/dashboard/agents",
        "/login?sso_error=invalid_state",
    ] {
        let r = app.get(path).await;
        assert_eq!(r.status.as_u16(), 200, "{path}");
        assert_eq!(r.body, page.body, "{path}");
    }

    for (path, ty) in [
        ("/dashboard/app.js", "text/javascript; charset=utf-8"),
        ("/dashboard/views.js", "text/javascript; charset=utf-8"),
        ("/dashboard/app.css", "text/css; charset=utf-8"),
        ("/dashboard/favicon.svg", "image/svg+xml"),
    ] {
        let r = app.get(path).await;
        assert_eq!(r.status.as_u16(), 200, "{path}");
        assert_eq!(r.header("content-type").as_deref(), Some(ty), "{path}");
        assert_page_headers(&r, path);
        let etag = r
            .header("etag")
            .unwrap_or_else(|| panic!("{path}: no ETag"));
        let again = app
            .send(
                TestRequest::get()
                    .uri(path)
                    .insert_header(("If-None-Match", etag.as_str())),
            )
            .await;
        assert_eq!(again.status.as_u16(), 304, "{path}");
        assert!(again.body.is_empty());
        let other = app
            .send(
                TestRequest::get()
                    .uri(path)
                    .insert_header(("If-None-Match", "\"x\"")),
            )
            .await;
        assert_eq!(other.status.as_u16(), 200, "{path}");
    }

    for path in [
        "/dashboard/nope.js",
        "/dashboard/../Cargo.toml",
        "/dashboard/.hidden.js",
    ] {
        let r = app.get(path).await;
        assert_eq!(r.status.as_u16(), 404, "{path}");
        assert_eq!(
            r.header("content-type").as_deref(),
            Some("application/problem+json"),
            "{path}"
        );
    }

    let head = app
        .send(
            TestRequest::default()
                .method(actix_web::http::Method::HEAD)
                .uri("/dashboard"),
        )
        .await;
    assert_eq!(head.status.as_u16(), 200);
    let post = app.send(TestRequest::post().uri("/dashboard")).await;
    assert_eq!(post.status.as_u16(), 405);
});

/// The console's routes are pages: they are not in the OpenAPI document.
#[test]
fn console_routes_are_not_api_operations() {
    let registered = steward_server::routes::registrar().operations();
    assert!(registered
        .iter()
        .all(|(_, p)| !p.starts_with("/dashboard") && p != "/login"));
}
