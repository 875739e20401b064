//! `[approvals] notify_command`: a program run whenever an approval opens (a call parked for a
//! person, or a `request_verification` request), so a person learns of it.
//!
//! The program runs like a command tool: an argv (never a shell) whose `{placeholder}`s each
//! become part of one element, a cleared environment (`PATH`, `HOME`, `LANG` and
//! `notify_env`), standard input closed, its own process group (on Linux every descendant)
//! killed after `notify_timeout_seconds` (default [`NOTIFY_TIMEOUT`]). It runs beside the call, never on its path: the call
//! answers `APPROVAL_PENDING` at once, and a program that cannot start, exits non-zero or
//! times out is logged with `tracing::warn` (target `milpa::approvals`), never an error of
//! the call.
//!
//! A value that would start an element with `-` where the program reads options (a
//! verification subject is the requester's own text) is not passed: that notification is
//! skipped with a warning, as a command tool refuses such a call. A literal `--` element
//! before the placeholders lets any value through.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use milpa::approval::{Approval, rfc3339};
use milpa::events::{Dispatcher, Event};
use milpa::verification::VERIFICATION_REQUESTED;
use milpa_process::{child_env, process_tree};
use serde_json::{Map, Value};
use tokio_util::task::TaskTracker;

use crate::command_tool::read_tail;
use crate::manifest::Manifest;
use crate::template::ArgTemplate;

/// How long a notify command may run before its process group is killed, unless
/// `notify_timeout_seconds` says otherwise.
pub(crate) const NOTIFY_TIMEOUT: Duration =
    Duration::from_secs(crate::manifest::DEFAULT_NOTIFY_TIMEOUT_SECONDS);

/// How much of a failed notify command's standard error the warning quotes (its end).
const STDERR_TAIL_BYTES: usize = 1024;

/// The log target of notification warnings.
const TARGET: &str = "milpa::approvals";

/// Runs `[approvals] notify_command` for every approval that opens. Build it with
/// [`ApprovalNotifier::from_manifest`], then [`subscribe`](Self::subscribe) it to the
/// approval queue's dispatcher.
#[derive(Debug)]
pub(crate) struct ApprovalNotifier {
    program: PathBuf,
    args: Vec<ArgTemplate>,
    /// Per element of `args`: whether a literal `--` comes before it (options ended).
    after_end_of_options: Vec<bool>,
    env: Vec<String>,
    timeout: Duration,
    /// `http://ADDR/approvals` once `serve --http` listens: `{url}` is this page plus the id.
    page: OnceLock<String>,
    running: TaskTracker,
}

impl ApprovalNotifier {
    /// The notifier `[approvals] notify_command` describes; `None` when it is not set. A
    /// relative program path with a `/` (`./notify.sh`) is taken from the manifest's folder.
    pub(crate) fn from_manifest(manifest: &Manifest) -> Option<ApprovalNotifier> {
        let argv = manifest.approvals.notify_command.as_ref()?.get_ref();
        let (program, rest) = argv.split_first()?;
        Some(
            ApprovalNotifier::new(
                program,
                rest,
                manifest.approvals.notify_env(),
                manifest.base_dir(),
            )
            .with_timeout(manifest.approvals.notify_timeout()),
        )
    }

    /// A notifier running `program` with the argument templates `args` and the variables
    /// `env` names passed through.
    pub(crate) fn new(
        program: &str,
        args: &[String],
        env: &[String],
        base_dir: Option<&Path>,
    ) -> ApprovalNotifier {
        let path = PathBuf::from(program);
        let program = match base_dir {
            Some(base) if program.contains('/') && path.is_relative() => base.join(path),
            _ => path,
        };
        let args: Vec<ArgTemplate> = args.iter().map(|a| ArgTemplate::parse(a)).collect();
        let after_end_of_options = args
            .iter()
            .scan(false, |ended, arg| {
                let before = *ended;
                *ended |= arg.is_end_of_options();
                Some(before)
            })
            .collect();
        ApprovalNotifier {
            program,
            args,
            after_end_of_options,
            env: env.to_vec(),
            timeout: NOTIFY_TIMEOUT,
            page: OnceLock::new(),
            running: TaskTracker::new(),
        }
    }

    /// The same notifier killing its program after `timeout` instead of [`NOTIFY_TIMEOUT`].
    pub(crate) fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets the approvals page (`http://ADDR/approvals`) `{url}` links to; the first call
    /// wins. Until then `{url}` is empty.
    pub(crate) fn set_approvals_page(&self, page: impl Into<String>) {
        let _ = self.page.set(page.into());
    }

    /// Runs the notifier on every `verification.requested` `dispatcher` dispatches (parked
    /// calls and verification requests alike).
    pub(crate) fn subscribe(self: &Arc<Self>, dispatcher: &Dispatcher) {
        let notifier = Arc::clone(self);
        dispatcher.subscribe(VERIFICATION_REQUESTED, 0, move |event: &Event<'_>| {
            if let Some(opened) = event.verification() {
                notifier.notify(&Approval::from_record(opened.record.clone()));
            }
        });
    }

    /// The argv (after the program) for `approval`; `Err` naming the placeholder whose value
    /// would start an element with `-` where the program reads options.
    pub(crate) fn argv(&self, approval: &Approval) -> Result<Vec<String>, String> {
        let values = self.values(approval);
        for (template, after_end) in self.args.iter().zip(&self.after_end_of_options) {
            if *after_end {
                continue;
            }
            if let Some(param) = template.leading_dash_param(&values) {
                return Err(format!(
                    "{{{param}}} of approval {id} starts with `-` where the program reads \
                     options; put a literal \"--\" element before the placeholders",
                    id = approval.id()
                ));
            }
        }
        // Every placeholder has a value (empty when the approval has none), so no element
        // is left out.
        Ok(self
            .args
            .iter()
            .filter_map(|template| template.render(&values))
            .collect())
    }

    /// Waits until every notify command started so far has ended (each within its
    /// timeout); `milpa call` waits so that ending the process does not kill them.
    pub(crate) async fn idle(&self) {
        self.running.close();
        self.running.wait().await;
        self.running.reopen();
    }

    /// The placeholder values of `approval`.
    fn values(&self, approval: &Approval) -> Map<String, Value> {
        let url = self
            .page
            .get()
            .map(|page| format!("{page}/{}", approval.id()))
            .unwrap_or_default();
        let text = |value: Option<&str>| Value::String(value.unwrap_or_default().to_owned());
        let mut values = Map::new();
        values.insert("id".into(), text(Some(approval.id())));
        values.insert("summary".into(), text(Some(approval.summary())));
        values.insert("tool".into(), text(approval.tool()));
        values.insert("requested_by".into(), text(approval.requested_by()));
        values.insert("kind".into(), text(Some(approval.kind().as_str())));
        values.insert(
            "expires_at".into(),
            Value::String(approval.expires_at_ms().map(rfc3339).unwrap_or_default()),
        );
        values.insert("url".into(), Value::String(url));
        values
    }

    /// Starts the program for `approval` on the current runtime, without waiting for it.
    fn notify(&self, approval: &Approval) {
        let id = approval.id().to_owned();
        let argv = match self.argv(approval) {
            Ok(argv) => argv,
            Err(why) => {
                tracing::warn!(target: TARGET, "approvals.notify_command not run: {why}");
                return;
            }
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(
                target: TARGET,
                "approvals.notify_command not run for approval {id}: no async runtime"
            );
            return;
        };
        let mut command = tokio::process::Command::new(&self.program);
        command
            .args(&argv)
            .env_clear()
            .envs(child_env::inherited(&self.env))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let program = self.program.display().to_string();
        let timeout = self.timeout;
        runtime.spawn(
            self.running
                .track_future(run(command, program, id, timeout)),
        );
    }
}

/// Runs one notification to its end or its timeout, and logs what went wrong.
async fn run(mut command: tokio::process::Command, program: String, id: String, timeout: Duration) {
    let (mut child, mut tree) = match process_tree::spawn(&mut command) {
        Ok(started) => started,
        Err(error) => {
            tracing::warn!(
                target: TARGET,
                "approvals.notify_command `{program}` could not start for approval {id}: {error}"
            );
            return;
        }
    };
    let stderr = child.stderr.take();
    let finished = async {
        let waited = async {
            let status = child.wait().await;
            // Whatever the program left running goes with it.
            tree.kill();
            status
        };
        tokio::join!(read_tail(stderr, STDERR_TAIL_BYTES), waited)
    };
    // On timeout the dropped future kills the program's group and descendants.
    match tokio::time::timeout(timeout, finished).await {
        Err(_) => tracing::warn!(
            target: TARGET,
            "approvals.notify_command `{program}` for approval {id} ran longer than {}s and was killed",
            timeout.as_secs_f64()
        ),
        Ok((_, Err(error))) => tracing::warn!(
            target: TARGET,
            "approvals.notify_command `{program}` for approval {id}: could not wait: {error}"
        ),
        Ok(((stderr, _), Ok(status))) if !status.success() => {
            let stderr = String::from_utf8_lossy(&stderr);
            let stderr = stderr.trim();
            tracing::warn!(
                target: TARGET,
                "approvals.notify_command `{program}` for approval {id} failed ({status}){}{stderr}",
                if stderr.is_empty() { "" } else { ": " }
            );
        }
        Ok(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use milpa::verification::{VerificationRecord, VerificationStatus};
    use serde_json::json;

    fn verification(subject: &str) -> Approval {
        Approval::from_record(VerificationRecord {
            id: "req-1".into(),
            subject: subject.into(),
            policy: Default::default(),
            required_grants: 1,
            requested_by: Some("bot".into()),
            payload: json!({}),
            status: VerificationStatus::Pending,
            grants: Vec::new(),
            rejection: None,
            created_at_ms: 0,
            resolved_at_ms: None,
            revision: 0,
        })
    }

    fn notifier(args: &[&str]) -> ApprovalNotifier {
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        ApprovalNotifier::new("notify", &args, &[], None)
    }

    #[test]
    fn placeholders_fill_one_element_each_and_absent_values_are_empty() {
        let n = notifier(&[
            "{kind}:{id}",
            "{summary}",
            "{tool}",
            "by {requested_by}",
            "{url}",
        ]);
        let approval = verification("rotate keys; rm -rf /");
        assert_eq!(
            n.argv(&approval).unwrap(),
            [
                "verification:req-1",
                "rotate keys; rm -rf /",
                "",
                "by bot",
                ""
            ]
        );
        n.set_approvals_page("http://127.0.0.1:8080/approvals");
        n.set_approvals_page("http://ignored");
        assert_eq!(
            n.argv(&approval).unwrap()[4],
            "http://127.0.0.1:8080/approvals/req-1"
        );
    }

    #[test]
    fn a_value_read_as_an_option_is_not_passed() {
        let approval = verification("--exec=evil");
        let why = notifier(&["{summary}"]).argv(&approval).unwrap_err();
        assert!(
            why.starts_with("{summary} of approval req-1 starts with `-`"),
            "{why}"
        );
        // After a literal `--` it is an operand.
        assert_eq!(
            notifier(&["--", "{summary}"]).argv(&approval).unwrap(),
            ["--", "--exec=evil"]
        );
        // Literal text first: one element, not an option.
        assert_eq!(
            notifier(&["--body={summary}"]).argv(&approval).unwrap(),
            ["--body=--exec=evil"]
        );
    }
}
