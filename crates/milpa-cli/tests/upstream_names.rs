//! Transparent in front of one server: `milpa proxy` keeps the server's own tool names
//! unless `--prefix` is given; `[[upstreams]]` without `prefix` keep theirs when there is
//! one and get `<name>__` when there are several; each tool's `title`, every annotation,
//! its `icons` and its `_meta` come through as the server listed them.

mod common;

use common::stdio::StdioClient;
use common::{Sandbox, odd_command, odd_upstream, run_manifest};
use serde_json::{Value, json};

fn proxy(sb: &Sandbox, extra: &[&str]) -> StdioClient {
    let mut proxy = common::http::milpa_command(sb);
    proxy.args(["--store", "memory", "proxy"]);
    proxy.args(extra);
    proxy.arg("--").arg(odd_upstream());
    StdioClient::start(proxy, &sb.path().join("proxy.err"))
}

fn entry<'a>(listed: &'a Value, name: &str) -> &'a Value {
    listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no {name}: {listed}"))
}

#[test]
fn proxy_keeps_the_servers_names_title_annotations_and_meta() {
    let sb = Sandbox::new();
    let mut client = proxy(&sb, &[]);
    let names = client.wait_for_tool("echo");
    assert_eq!(
        names,
        [
            "echo",
            "pid",
            "huge",
            "flood",
            "log",
            "roots",
            "open_page",
            "env",
            "args"
        ]
    );
    let listed = client.request("tools/list", json!({}));
    let echo = entry(&listed, "echo");
    assert_eq!(echo["title"], "Echo", "{echo}");
    assert_eq!(
        echo["annotations"],
        json!({"title": "Echo it", "readOnlyHint": true, "idempotentHint": true,
               "openWorldHint": false, "destructiveHint": false}),
        "{echo}"
    );
    assert_eq!(echo["_meta"], json!({"example.com/origin": "odd_upstream"}));
    assert_eq!(
        echo["icons"],
        json!([{"src": "https://example.com/echo.png", "mimeType": "image/png", "sizes": ["48x48"]}])
    );
    // A tool the server did not annotate: mutating here (fail closed), said so.
    let pid = entry(&listed, "pid");
    assert!(
        pid.get("title").is_none() && pid.get("_meta").is_none(),
        "{pid}"
    );
    assert_eq!(
        pid["annotations"],
        json!({"readOnlyHint": false, "destructiveHint": true})
    );
    let echoed = client.call("echo", json!({"text": "same name"}));
    assert_eq!(echoed["content"][0]["text"], "same name", "{echoed}");
}

#[test]
fn proxy_prefixes_names_when_asked() {
    let sb = Sandbox::new();
    let mut client = proxy(&sb, &["--prefix", "odd_"]);
    let names = client.wait_for_tool("odd_echo");
    assert!(!names.contains(&"echo".to_owned()), "{names:?}");
    let echoed = client.call("odd_echo", json!({"text": "prefixed"}));
    assert_eq!(echoed["content"][0]["text"], "prefixed", "{echoed}");
}

/// The first column of `milpa tools`' first table.
fn listed_names(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .skip(1)
        .take_while(|l| !l.is_empty() && !l.starts_with("UPSTREAM"))
        .map(|l| l.split_whitespace().next().unwrap().to_owned())
        .collect()
}

#[test]
fn manifest_upstreams_are_prefixed_only_when_there_are_several() {
    let sb = Sandbox::new();
    let one = format!(
        "[[upstreams]]\nname = \"a\"\ncommand = {}\n[upstreams.tools.\"*\"]\nhide = true\n\
         [upstreams.tools.\"echo\"]\nhide = false\n",
        odd_command(&[])
    );
    let run = run_manifest(&sb, &one, &["--store", "memory", "tools"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(listed_names(&run.stdout), ["echo"], "{}", run.stdout);

    let two = format!(
        "{one}[[upstreams]]\nname = \"b\"\ncommand = {}\n[upstreams.tools.\"*\"]\nhide = true\n\
         [upstreams.tools.\"pid\"]\nhide = false\n\
         [[upstreams]]\nname = \"c\"\nprefix = \"\"\ncommand = {}\n\
         [upstreams.tools.\"*\"]\nhide = true\n[upstreams.tools.\"args\"]\nhide = false\n",
        odd_command(&[]),
        odd_command(&[])
    );
    let run = run_manifest(&sb, &two, &["--store", "memory", "tools"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // Listed in the order the upstreams came up.
    let mut names = listed_names(&run.stdout);
    names.sort();
    assert_eq!(names, ["a__echo", "args", "b__pid"], "{}", run.stdout);
}
