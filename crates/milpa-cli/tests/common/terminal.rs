//! Runs `milpa` with a pseudo-terminal as its standard input, as a person at a terminal
//! would, and types into it: `milpa approvals grant|reject` decides only there.

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::Run;

/// How long a command at the terminal may run.
const LIMIT: Duration = Duration::from_secs(60);

/// A `milpa` started at a pseudo-terminal.
pub struct AtTerminal {
    child: Child,
    stdout: JoinHandle<String>,
    stderr: JoinHandle<String>,
}

impl AtTerminal {
    /// Starts `command` with a new pseudo-terminal as standard input and `typed` typed into
    /// it; standard output and error are captured apart.
    pub fn spawn(mut command: Command, typed: &str) -> AtTerminal {
        let pty = nix::pty::openpty(None, None).expect("a pseudo-terminal");
        let mut child = command
            .stdin(Stdio::from(pty.slave))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("milpa started");
        // `command` holds the other copy of the terminal's end: the child has its own now.
        drop(command);
        let mut master = std::fs::File::from(pty.master);
        // The terminal keeps the line until the program reads it.
        master.write_all(typed.as_bytes()).unwrap();
        // What the terminal echoes is drained, so it never fills up.
        std::thread::spawn(move || {
            let mut sink = [0u8; 1024];
            while matches!(master.read(&mut sink), Ok(n) if n > 0) {}
        });
        let stdout = read_all(child.stdout.take().unwrap());
        let stderr = read_all(child.stderr.take().unwrap());
        AtTerminal {
            child,
            stdout,
            stderr,
        }
    }

    /// Waits for it to end (killed after a minute); what it printed.
    pub fn wait(mut self) -> Run {
        let deadline = Instant::now() + LIMIT;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("milpa at the terminal ran over {LIMIT:?}");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        Run {
            code: status.code().unwrap_or(-1),
            stdout: self.stdout.join().unwrap(),
            stderr: self.stderr.join().unwrap(),
        }
    }
}

fn read_all(mut pipe: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = Vec::new();
        let _ = pipe.read_to_end(&mut text);
        String::from_utf8_lossy(&text).into_owned()
    })
}

/// `cmd` (its program, arguments, environment and folder) as a `std::process::Command`.
fn std_command(cmd: &assert_cmd::Command) -> Command {
    let mut command = Command::new(cmd.get_program());
    command.args(cmd.get_args());
    for (key, value) in cmd.get_envs() {
        match value {
            Some(value) => command.env(key, value),
            None => command.env_remove(key),
        };
    }
    if let Some(dir) = cmd.get_current_dir() {
        command.current_dir(dir);
    }
    command
}

/// Runs `cmd` at a new pseudo-terminal, `typed` typed into it.
pub fn run_in_terminal(cmd: &assert_cmd::Command, typed: &str) -> Run {
    AtTerminal::spawn(std_command(cmd), typed).wait()
}

/// What a person types to decide the approval of `milpa … approvals grant|reject ID …`:
/// its short code (which `milpa approvals` shows), then Enter.
pub fn code_line(args: impl Iterator<Item = String>) -> String {
    let args: Vec<String> = args.collect();
    let at = args
        .iter()
        .position(|arg| arg == "approvals")
        .expect("an `approvals` command");
    let id = args.get(at + 2).expect("approvals grant|reject ID");
    format!("{}\n", milpa_cli::approval_code::short_code(id))
}

/// Runs `milpa … approvals grant|reject ID …` at a terminal, typing the approval's short
/// code when asked, as the person who read it in `milpa approvals` does.
pub fn decide(cmd: &mut assert_cmd::Command) -> Run {
    let typed = code_line(cmd.get_args().map(|a| a.to_string_lossy().into_owned()));
    run_in_terminal(cmd, &typed)
}

/// [`decide`] for a `std::process::Command`, started now; wait for it with
/// [`AtTerminal::wait`].
pub fn spawn_decision(command: Command) -> AtTerminal {
    let typed = code_line(command.get_args().map(|a| a.to_string_lossy().into_owned()));
    AtTerminal::spawn(command, &typed)
}

/// [`decide`] for `approvals grant|reject ID …`, [`run`](super::run) for any other command.
pub fn run_or_decide(cmd: &mut assert_cmd::Command) -> Run {
    let args: Vec<String> = cmd
        .get_args()
        .map(|arg| arg.to_string_lossy().into_owned())
        .collect();
    let deciding = args.windows(3).any(|w| {
        w[0] == "approvals" && (w[1] == "grant" || w[1] == "reject") && !w[2].starts_with('-')
    });
    if deciding {
        decide(cmd)
    } else {
        super::run(cmd)
    }
}

/// Runs `cmd` with a new pseudo-terminal as its standard error (standard input empty,
/// standard output a pipe), as `milpa …` run by a person whose output is piped on; what
/// it printed, the terminal's share in `stderr`.
pub fn run_with_terminal_stderr(cmd: &assert_cmd::Command) -> Run {
    let pty = nix::pty::openpty(None, None).expect("a pseudo-terminal");
    let mut command = std_command(cmd);
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(pty.slave))
        .spawn()
        .expect("milpa started");
    // `command` holds the other copy of the terminal's end: the child has its own now, and
    // reading ends when the child closes it.
    drop(command);
    let stdout = read_all(child.stdout.take().unwrap());
    let terminal = read_all(std::fs::File::from(pty.master));
    let deadline = Instant::now() + LIMIT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("milpa at the terminal ran over {LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Run {
        code: status.code().unwrap_or(-1),
        stdout: stdout.join().unwrap(),
        stderr: terminal.join().unwrap(),
    }
}
