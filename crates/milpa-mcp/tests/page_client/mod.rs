//! A browser-like HTTP client for the approvals page tests: keeps cookies, posts forms with
//! the page's own `Origin`, and reads the CSRF token out of a page.

#![allow(dead_code, missing_docs)]

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::{HttpResponse, WAIT, parse_response};

pub struct PageClient {
    pub addr: SocketAddr,
    cookies: Vec<(String, String)>,
}

impl PageClient {
    pub fn new(addr: SocketAddr) -> PageClient {
        PageClient {
            addr,
            cookies: Vec::new(),
        }
    }

    /// This page's origin, as a browser sends it with a form.
    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn cookie(&self, name: &str) -> Option<&str> {
        self.cookies
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Sets (or, with `None`, forgets) a cookie by hand.
    pub fn set_cookie(&mut self, name: &str, value: Option<&str>) {
        self.cookies.retain(|(k, _)| k != name);
        if let Some(value) = value {
            self.cookies.push((name.to_owned(), value.to_owned()));
        }
    }

    /// One request on a fresh connection; the response's `Set-Cookie`s are kept.
    pub async fn request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> HttpResponse {
        let mut stream = tokio::net::TcpStream::connect(self.addr).await.unwrap();
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
            body.len()
        );
        if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
            head.push_str(&format!("Host: {}\r\n", self.addr));
        }
        if !self.cookies.is_empty() {
            let jar: Vec<String> = self
                .cookies
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            head.push_str(&format!("Cookie: {}\r\n", jar.join("; ")));
        }
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).await.unwrap();
        stream.write_all(body).await.unwrap();
        let mut raw = Vec::new();
        tokio::time::timeout(WAIT, stream.read_to_end(&mut raw))
            .await
            .expect("timed out reading the response")
            .unwrap();
        let response = parse_response(&raw);
        for set in set_cookies(&response) {
            let pair = set.split(';').next().unwrap_or("");
            if let Some((name, value)) = pair.split_once('=') {
                let forget = value.is_empty() || set.contains("Max-Age=0");
                self.set_cookie(name.trim(), (!forget).then_some(value.trim()));
            }
        }
        response
    }

    pub async fn get(&mut self, path: &str) -> HttpResponse {
        self.request("GET", path, &[], b"").await
    }

    /// Posts a form the way a browser does from this page (with its `Origin`).
    pub async fn post_form(&mut self, path: &str, fields: &[(&str, &str)]) -> HttpResponse {
        let origin = self.origin();
        self.post_form_with(path, fields, &[("Origin", &origin)])
            .await
    }

    pub async fn post_form_with(
        &mut self,
        path: &str,
        fields: &[(&str, &str)],
        headers: &[(&str, &str)],
    ) -> HttpResponse {
        let body = encode(fields);
        let mut all = vec![("Content-Type", "application/x-www-form-urlencoded")];
        all.extend_from_slice(headers);
        self.request("POST", path, &all, body.as_bytes()).await
    }

    /// Opens the login form and signs in with `token`.
    pub async fn login(&mut self, token: &str) -> HttpResponse {
        let form = self.get("/approvals").await;
        assert_eq!(form.status, 200, "{form:?}");
        let csrf = csrf(&form.body);
        self.post_form(
            "/approvals/login",
            &[("csrf", &csrf), ("next", "/approvals"), ("token", token)],
        )
        .await
    }

    /// Signs in with `token` and returns the queue page (which must load).
    pub async fn logged_in(&mut self, token: &str) -> HttpResponse {
        let login = self.login(token).await;
        assert_eq!(login.status, 303, "{login:?}");
        let page = self.get("/approvals").await;
        assert_eq!(page.status, 200, "{page:?}");
        page
    }

    /// Posts a decision with the CSRF token of `page`.
    pub async fn decide(
        &mut self,
        page: &HttpResponse,
        id: &str,
        decision: &str,
        reason: &str,
    ) -> HttpResponse {
        let csrf = csrf(&page.body);
        self.post_form(
            &format!("/approvals/{id}"),
            &[("csrf", &csrf), ("reason", reason), ("decision", decision)],
        )
        .await
    }
}

pub fn encode(fields: &[(&str, &str)]) -> String {
    form_urlencoded::Serializer::new(String::new())
        .extend_pairs(fields)
        .finish()
}

/// The value of the first hidden `csrf` field of a page.
pub fn csrf(html: &str) -> String {
    let marker = "name=\"csrf\" value=\"";
    let start = html.find(marker).expect("a csrf field") + marker.len();
    let end = html[start..].find('"').unwrap() + start;
    html[start..end].to_owned()
}

pub fn set_cookies(response: &HttpResponse) -> Vec<&str> {
    response
        .headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("set-cookie"))
        .map(|(_, v)| v.as_str())
        .collect()
}

/// The part of a queue page that lists pending items (before the decisions).
pub fn pending_section(html: &str) -> &str {
    let start = html
        .find("<section id=\"pending\">")
        .expect("a pending section");
    let end = html[start..].find("</section>").unwrap() + start;
    &html[start..end]
}

/// The part of a queue page that lists past decisions.
pub fn decisions_section(html: &str) -> &str {
    match html.find("<h2>Recent decisions</h2>") {
        Some(start) => &html[start..],
        None => "",
    }
}
